"""One entry point for every measurement: `run_suite(suite, config) -> result`.

    from llmbench.measure.suites import run_suite
    run_suite("block", {"model": "gpt2-xl", "batch": 1, "seq": 1024, "precision": "fp32"})

A result is {"status": "ok" | "oom" | "error", "metrics": {...}, "error": str | None,
"environment": {...}}. Out-of-memory is a result (status "oom"), so a sweep goes on; any other
failure of the measurement is status "error" with a one-line message. Bad configuration (unknown
model, unsupported precision) raises ValueError: the caller asked for something impossible.
"""
from __future__ import annotations

import gc
import traceback

SUITES = ("block", "train", "infer", "ceilings", "genslm")


def _runner(suite: str):
    if suite == "block":
        from llmbench.measure.block import run_block
        return run_block
    if suite == "train":
        from llmbench.measure.train import run_train
        return run_train
    if suite == "infer":
        from llmbench.measure.infer import run_infer
        return run_infer
    if suite == "genslm":
        from llmbench.measure.genslm import run_genslm
        return run_genslm
    if suite == "ceilings":
        return _run_ceilings
    raise ValueError(f"unknown suite {suite!r}; one of {', '.join(SUITES)}")


def _run_ceilings(config: dict) -> dict:
    from llmbench.measure import ceilings as ceil
    from llmbench.measure import device as dev
    from llmbench.measure.common import model_from_config
    device = dev.resolve(config.get("device", "auto"))
    spec = model_from_config(config) if config.get("model") else None
    result = ceil.measure_ceilings(device, precisions=config.get("precisions"), spec=spec,
                                   batch=int(config.get("batch", 1)), seq=int(config.get("seq", 1024)),
                                   repeats=int(config.get("repeats", 5)), size=config.get("size"))
    if config.get("save", True):
        result["saved_to"] = str(ceil.save_profile(result, device))
    return result


def run_suite(suite: str, config: dict) -> dict:
    runner = _runner(suite)
    from llmbench.measure import device as dev
    device = dev.resolve(config.get("device", "auto"))
    environment = dev.collect_environment(device)
    try:
        metrics = runner(dict(config))
        return {"status": "ok", "metrics": metrics, "error": None, "environment": environment}
    except ValueError:
        raise
    except BaseException as exc:  # noqa: BLE001 - a measurement failure is a result
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        status = "oom" if dev.is_oom(exc) else "error"
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        environment["traceback_tail"] = traceback.format_exc().strip().splitlines()[-3:]
        return {"status": status, "metrics": {}, "error": f"{type(exc).__name__}: {line}"[:500],
                "environment": environment}
    finally:
        gc.collect()
        dev.empty_cache(device)


def resolve_workload(w, run, device) -> "Workload":  # noqa: F821
    """The workload as measured here: hardware from the device (point.hardware_for_device),
    precision from the hardware (point.precision_for), devices = processes under torchrun."""
    import os

    from llmbench.hardware import get_hardware
    from llmbench.measure import device as dev
    from llmbench.point import hardware_for_device, precision_for

    hardware = w.hardware or hardware_for_device(device.type, dev.device_name(device))
    precision = w.precision
    if precision is None:
        try:
            precision = precision_for(get_hardware(hardware))
        except ValueError:  # an accelerator with no catalog entry
            precision = "fp32" if device.type == "cpu" else "bf16"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return w.with_(hardware=hardware, precision=precision, devices=w.devices or world)


def run_workload(w, run) -> tuple:
    """Measure one Workload with RunOptions here: (the workload as measured, result dict)."""
    from dataclasses import asdict

    from llmbench.measure import device as dev

    device = dev.resolve(run.device)
    datasheet = w.hardware  # a catalog entry the user named for MFU; else detected from the device
    w = resolve_workload(w, run, device)
    micro, grad_accum = w.micro_steps(dp=w.devices) if w.suite in ("train", "genslm") else (w.batch, 1)
    config = {**asdict(run), "model": w.model, "batch": micro, "grad_accum": grad_accum,
              "seq": w.seq_len, "gen_len": w.gen_len, "precision": w.precision,
              "sparsity": w.sparsity, "hardware": datasheet,
              **w.resize, **({"head": w.head} if w.head else {})}
    w = w.with_(micro_batch=micro, grad_accum=grad_accum) if w.suite in ("train", "genslm") else w
    return w, run_suite(w.suite, config)
