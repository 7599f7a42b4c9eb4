"""One entry point for every measurement: `run_workload(w, run) -> (resolved Workload, result)`.

    from llmbench.measure.options import RunOptions
    from llmbench.measure.suites import run_workload
    from llmbench.point import Workload
    w, result = run_workload(Workload(suite="block", model="gpt2-xl", batch=1, seq_len=1024),
                             RunOptions(device="cpu", repeats=3))

The torch device is resolved once (training under torchrun: the local rank's, the process group
started), then the Workload is resolved against it (`resolve_workload`): hardware from the device
(point.hardware_for_device), precision from the hardware (point.precision_for), devices = the
torchrun world, micro-batch and grad-accum from the global batch (Workload.micro_steps), the
layout measure runs (training: the tp, zero and recompute asked, run by measure/parallel_train.py;
otherwise data parallel only). Each suite is `run_<suite>(w, run, device) ->
(metrics, info)`: metrics are METRICS names (llmbench.point), info the rest (datasheet, FLOPs per
step, world size, sparsity report, ...). A result is {"status": "ok" | "oom" | "error",
"metrics", "info", "error": str | None, "environment"}. Out of memory is a result (status "oom"),
so a sweep goes on; any other failure of the measurement is status "error" with a one-line message.
Bad input (unknown model, a precision the device lacks) raises BadInput (a ValueError).
"""
from __future__ import annotations

import gc
import os
import traceback
from dataclasses import fields

from llmbench.errors import BadInput
from llmbench.measure import device as dev
from llmbench.measure.options import RunOptions
from llmbench.layouts import PLAIN
from llmbench.point import LAYOUT_FIELDS, RESIZABLE, WORKLOAD_FIELDS, Workload, hardware_for_device, precision_for

SUITES = ("block", "train", "infer", "genslm", "ceilings")
DISTRIBUTED = ("train", "genslm")  # the suites that run on every torchrun process (DDP)
#: the layout measure runs by default: data parallel over the torchrun processes, nothing sharded or
#: recomputed; training may ask for tp, zero and recompute (measure/parallel.py), nothing else
MEASURED_LAYOUT = {k: v for k, v in PLAIN.items() if k != "ep"}
#: micro-steps a measurement runs at most (steps x grad_accum): a bound on the work any --batch
#: asks for; 2^16 micro-steps of a tiny CPU model are minutes, of GPT-2 small hours
MAX_MEASURED_MICRO_STEPS = 1 << 16
#: tokens one micro-step holds at most: 2^26 tokens' activations exceed any device's memory for
#: any model (the fp32 logits alone of a 256-token vocabulary are 64 GiB)
MAX_MEASURED_MICRO_TOKENS = 1 << 26


def _runner(suite: str):
    if suite == "block":
        from llmbench.measure.block import run_block
        return run_block
    if suite == "train":  # plain data parallel in train.py; FSDP2 / TP / recompute in parallel_train.py
        from llmbench.measure.parallel_train import needs_parallel, run_parallel
        from llmbench.measure.train import run_train
        return lambda w, run, device: (run_parallel if needs_parallel(w) else run_train)(w, run, device)
    if suite == "infer":
        from llmbench.measure.infer import run_infer
        return run_infer
    if suite == "genslm":
        from llmbench.measure.genslm import run_genslm
        return run_genslm
    if suite == "ceilings":
        from llmbench.measure.ceilings import run_ceilings
        return run_ceilings
    raise BadInput(f"unknown suite {suite!r}; one of {', '.join(SUITES)}")


def run_workload(w: Workload, run: RunOptions) -> tuple[Workload, dict]:
    """Measure one Workload here: (the workload as measured, result dict)."""
    runner = _runner(w.suite)
    device = device_for(w, run)
    w = resolve_workload(w, device, run)
    check_measured_work(w, run)
    environment = dev.collect_environment(device)
    if w.suite in DISTRIBUTED and device.type == "cpu":
        environment["host_heap"] = _host_heap(w)
    try:
        metrics, info = runner(w, run, device)
        return w, {"status": "ok", "metrics": metrics, "info": info, "error": None,
                   "environment": environment}
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - a measurement failure is a result
        # only an Exception: Ctrl-C, SIGTERM (studies/runner.py Terminated) and exit stop the sweep
        return w, _failure(exc, environment)
    finally:
        gc.collect()
        dev.empty_cache(device)


def _host_heap(w: Workload) -> str:
    """A CPU training run: the reusing host heap (measure/hostmem) where the machine has room for
    it over every process's footprint (footprint "measure"), the bounded one otherwise."""
    from llmbench.footprint import training
    from llmbench.grid import grid_of
    from llmbench.measure.hostmem import heap_for

    try:
        per_process = float(training(w.spec(), grid_of(w), w.precision, runtime="measure").peak_bytes)
    except ValueError:  # a layout the memory model does not cover: no estimate, the default policy
        return heap_for(None)
    return heap_for(int(per_process * max(int(os.environ.get("WORLD_SIZE", "1")), 1)))


def check_measured_work(w: Workload, run: RunOptions) -> None:
    """BadInput when a resolved training workload asks for more work than a measurement runs:
    a micro-step over MAX_MEASURED_MICRO_TOKENS, or over MAX_MEASURED_MICRO_STEPS micro-steps."""
    if w.suite not in DISTRIBUTED:
        return
    micro, grad_accum = w.micro_batch, w.grad_accum
    if micro * w.seq_len > MAX_MEASURED_MICRO_TOKENS:
        raise BadInput(f"a micro-step of {micro:,} x {w.seq_len:,} tokens exceeds the {MAX_MEASURED_MICRO_TOKENS:,} "
                       f"measure runs at once; give --micro-batch (or --layout auto) to split batch {w.batch:,}")
    if grad_accum * max(run.steps, 1) > MAX_MEASURED_MICRO_STEPS:
        raise BadInput(f"batch {w.batch:,} is {grad_accum:,} micro-steps of {micro} per optimizer step: measure "
                       f"runs every one, at most {MAX_MEASURED_MICRO_STEPS:,} in all (steps x grad_accum); "
                       "predict a batch this large instead")


def _failure(exc: BaseException, environment: dict) -> dict:
    """A failed measurement as a result; out of memory keeps what was measured (the peaks)."""
    status = "oom" if dev.is_oom(exc) else "error"
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    environment["traceback_tail"] = traceback.format_exc().strip().splitlines()[-3:]
    return {"status": status, "metrics": getattr(exc, "metrics", {}), "info": getattr(exc, "info", {}),
            "error": f"{type(exc).__name__}: {line}"[:500], "environment": environment}


def device_for(w: Workload, run: RunOptions):
    """The torch device, resolved once: training under torchrun gets its local rank's device."""
    if w.suite in DISTRIBUTED:
        from llmbench.measure.train import setup_distributed
        return setup_distributed(run.device)[0]
    return dev.resolve(run.device)


def resolve_workload(w: Workload, device, run: RunOptions | None = None) -> Workload:
    """The workload as it runs on `device`: hardware, precision, devices, micro-steps, layout,
    and the sparsity a 2:4 pattern means (0.5: so its results are not keyed as dense ones)."""
    w = w.with_(sparsity=_sparsity(w, run))
    hardware = _hardware(w, device)
    precision = _precision(w, hardware, device)
    if w.suite == "ceilings":
        return w.with_(hardware=hardware, precision=precision, devices=1)
    world = int(os.environ.get("WORLD_SIZE", "1")) if w.suite in DISTRIBUTED else 1
    if w.devices not in (None, world):
        where = "the processes torchrun started" if w.suite in DISTRIBUTED else "one device"
        raise BadInput(f"measure {w.suite} runs on {where} ({world}), not devices={w.devices}")
    w = w.with_(hardware=hardware, precision=precision, devices=world, **_layout(w))
    if w.suite in DISTRIBUTED:
        if world % w.layout.tp:
            raise BadInput(f"--tp {w.layout.tp} does not divide the {world} processes")
        micro, grad_accum = w.micro_steps(dp=world // w.layout.tp)
        return w.with_(micro_batch=micro, grad_accum=grad_accum)
    if w.suite == "infer" and w.spec().head != "lm":
        return w.with_(gen_len=0)  # an encoder generates nothing
    return w


def _sparsity(w: Workload, run: RunOptions | None) -> float:
    if w.suite not in DISTRIBUTED:
        if w.sparsity:
            raise BadInput(f"measure {w.suite} runs dense weights; sparsity is measured by train")
        return 0.0
    if run is None or run.sparsity_pattern != "2:4":
        return w.sparsity
    if w.sparsity not in (0.0, 0.5):
        raise BadInput(f"sparsity pattern 2:4 zeroes half the weights; sparsity {w.sparsity} asks otherwise")
    return 0.5


def _layout(w: Workload) -> dict:
    """The layout as it runs: what was asked, within the runtime's capability (llmbench.layouts:
    training takes tp, zero and recompute), else the plain default."""
    from llmbench.layouts import resolve_knobs

    asked = {k: getattr(w.layout, k) for k in LAYOUT_FIELDS if getattr(w.layout, k) is not None}
    return resolve_knobs(f"measure.{w.suite}", asked)


def _hardware(w: Workload, device) -> str:
    """The catalog entry the user named (canonical name), else the device's (point.hardware_for_device)."""
    if w.hardware:
        from llmbench.hardware import get_hardware
        return get_hardware(w.hardware).name
    return hardware_for_device(device.type, dev.device_name(device))


def _precision(w: Workload, hardware: str, device) -> str | None:
    """The precision asked, if the device runs it; else the hardware's (point.precision_for) where
    this device supports it, else bf16, fp16, fp32. Ceilings with none asked: None (all)."""
    if w.precision:
        if w.precision not in dev.DTYPES:
            raise BadInput(f"precision {w.precision} has no torch dtype here; one of {', '.join(dev.DTYPES)}")
        ok, why = dev.supports_dtype(device, w.precision)
        if not ok:
            raise BadInput(f"precision {w.precision}: {why}")
        return w.precision
    if w.suite == "ceilings":
        return None
    if not dev.is_accelerator(device):
        return "fp32"  # point.precision_for's CPU rule
    from llmbench.hardware import get_hardware
    try:
        first = (precision_for(get_hardware(hardware)),)
    except ValueError:  # an accelerator with no catalog entry or profile
        first = ()
    return next(p for p in first + ("bf16", "fp16", "fp32") if p in dev.DTYPES and dev.supports_dtype(device, p)[0])


# ---------------------------------------------------------------- the study runner's entry

RUN_FIELDS = tuple(f.name for f in fields(RunOptions))


def run_suite(suite: str, config: dict) -> dict:
    """For studies/runner.py until it takes Workloads: a study point's config (flat `batch` =
    sequences per replica per micro-step, `seq`, `resize` as a dict or flat size keys, run keys
    such as `steps` and `device`) measured through run_workload. The result also carries
    `workload`, and its `info` is repeated in `environment["info"]`: the runner records metrics
    and environment only."""
    w, run = workload_from_config(suite, config)
    w, res = run_workload(w, run)
    return {**res, "workload": w.to_dict(), "environment": {**res["environment"], "info": res["info"]}}


def workload_from_config(suite: str, config: dict) -> tuple[Workload, RunOptions]:
    """(Workload, RunOptions) of a study config dict (see run_suite); unknown keys are an error."""
    cfg = dict(config)
    run = RunOptions(**{k: cfg.pop(k) for k in list(cfg) if k in RUN_FIELDS})
    resize = dict(cfg.pop("resize", None) or {})
    resize.update({k: v for k, v in ((k, cfg.pop(k)) for k in list(cfg) if k in RESIZABLE) if v is not None})
    if "seq" in cfg:
        cfg["seq_len"] = cfg.pop("seq")
    unknown = sorted(set(cfg) - set(WORKLOAD_FIELDS))
    if unknown:
        raise BadInput(f"{suite} config: unknown keys {', '.join(unknown)}")
    if suite in DISTRIBUTED:  # the study's batch is per replica per micro-step; the Workload's global
        micro, grad_accum = int(cfg.pop("batch", 1)), int(cfg.pop("grad_accum", None) or 1)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        cfg.update(batch=micro * grad_accum * world, micro_batch=micro, grad_accum=grad_accum)
    return Workload(suite=suite, resize=resize, **cfg), run
