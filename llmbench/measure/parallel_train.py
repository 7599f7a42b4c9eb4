"""Pre-training steps under a ParallelLayout (DDP, ZeRO-1, FSDP2, TP, TP x FSDP, checkpointing,
micro-batching): tokens/s, step time, model TFLOP/s, MFU and the memory of every rank.

    torchrun --standalone --nproc-per-node 2 -m llmbench measure train \
        --model gpt2-small --n-layers 4 --layout fsdp --recompute full --batch 4 --seq 128 --steps 4

`llmbench measure train` comes here (measure/train.py) when its Workload's layout shards, splits
or recomputes (zero >= 1, tp > 1, recompute != none); plain data parallelism stays in train.py.

Every rank draws the same global batch (one seed) and keeps its replica's rows, so a layout sees
exactly the tokens a single process would (tests/test_measure_parallel.py checks the losses).
FLOPs per step are `counting.training_flops(spec, micro_batch, seq)["model"]` x grad_accum x
replicas: recomputation is not counted in `achieved_tflops` or `mfu` (it is in `hardware_tflops`).
Step time is the slowest rank's. Memory is gathered from every rank to all: peak allocated on an
accelerator, the process's RSS high-water mark on the CPU (since the process started: it includes
the interpreter and anything run before), and the exact bytes of this rank's parameters, gradients
and optimizer state. Out of memory is a result (status "oom" with the peak measured so far).
"""
from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass

import torch

from llmbench.errors import BadInput
from llmbench.measure import device as dev
from llmbench.measure.common import summarize_times
from llmbench.measure.modeling import build_model
from llmbench.measure.parallel import (BatchPlan, ParallelLayout, build_mesh, check_layout, parallelize,
                                       plan_batch)
from llmbench.measure.train import DATA, Batches, make_adamw
from llmbench.models.counting import training_flops

PRECISIONS = ("fp32", "tf32", "bf16")


@dataclass(frozen=True, kw_only=True)
class TrainRun:
    """What one measurement runs, whatever the layout (from the Workload and RunOptions)."""

    batch: int
    """global batch: sequences per optimizer step, over all replicas"""
    seq: int
    """tokens per sequence"""
    steps: int = 10
    warmup_steps: int = 2
    precision: str = "fp32"
    """fp32 | tf32 | bf16 (bf16: FSDP2 MixedPrecisionPolicy, else autocast; fp32 master weights)"""
    data: str = "synthetic"
    seed: int = 0
    """weights and data; the same on every rank"""
    lr: float = 3e-4

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise BadInput(f"--precision must be one of {', '.join(PRECISIONS)} for sharded or split "
                           f"training, got {self.precision!r} (fp16 needs a sharded grad scaler: use bf16)")
        if self.data not in DATA:
            raise BadInput(f"--data must be one of {', '.join(DATA)}, got {self.data!r}")


def layout_of(w) -> ParallelLayout:
    """The torch layout of a resolved Workload (measure/suites.resolve_workload filled its knobs)."""
    lay = w.layout
    return ParallelLayout(tp=lay.tp, zero=lay.zero, recompute=lay.recompute, micro_batch=w.micro_batch,
                          grad_accum=w.grad_accum)


def needs_parallel(w) -> bool:
    """A layout train.py's plain DDP loop does not run: sharded, tensor parallel or recomputed."""
    lay = w.layout
    return (lay.tp or 1) > 1 or (lay.zero or 0) > 0 or (lay.recompute or "none") != "none"


class OutOfMemory(RuntimeError):
    """Every rank ran out of memory (or one did, and all know it); carries the measured memory."""

    def __init__(self, message: str, metrics: dict, info: dict):
        super().__init__(f"out of memory: {message}")
        self.metrics, self.info = metrics, info


def run_parallel(w, run, device: torch.device) -> tuple[dict, dict]:
    """Measure a resolved training Workload under its layout on every rank: (metrics, info), the
    same on every rank; out of memory raises OutOfMemory with the measured peaks."""
    if w.sparsity or run.baseline:
        raise BadInput("--sparsity and --baseline run with plain data parallelism (--zero 0, --tp 1, "
                       "--recompute none)")
    if run.compile and (w.layout.tp or 1) > 1:
        raise BadInput("--compile with --tp is not supported here; compile data-parallel layouts")
    layout = ParallelLayout(**{**layout_of(w).to_dict(), "compile": run.compile})
    result = run_parallel_train(w.spec(), layout, batch=w.batch, seq=w.seq_len, steps=run.steps,
                                warmup_steps=run.warmup_steps, precision=w.precision, device=device,
                                data=run.data, seed=run.seed, lr=run.lr)
    metrics, info = _split(w, result["metrics"])
    if result["status"] == "oom":
        raise OutOfMemory(result["error"], metrics, info)
    return metrics, info


#: parallel_train's names -> METRICS names (everything else goes to info)
RENAMES = {"hardware_tflops": "executed_tflops", "param_bytes_max_rank": "weights_bytes",
           "grad_bytes_max_rank": "grads_bytes", "optimizer_state_bytes_max_rank": "optimizer_bytes"}


def _split(w, m: dict) -> tuple[dict, dict]:
    from llmbench.measure.common import mfu
    from llmbench.point import METRICS

    m = {RENAMES.get(k, k): v for k, v in m.items()}
    if "achieved_tflops" in m:  # METRICS: per device
        m["achieved_tflops"] /= w.devices
        m["executed_tflops"] /= w.devices
        m["mfu"] = mfu(w, m["achieved_tflops"] * 1e12)
    metrics = {k: v for k, v in m.items() if k in METRICS}
    return metrics, {k: v for k, v in m.items() if k not in METRICS}


class ShardedBatches:
    """The global batch, drawn alike on every rank; this replica's rows cut into micro-batches."""

    def __init__(self, spec, run: TrainRun, plan: BatchPlan, dp_rank: int, device: torch.device):
        n_classes = spec.n_classes if spec.head == "cls" else 0
        self.source = Batches(run.data, spec.vocab_size, run.batch, run.seq, torch.device("cpu"),
                              seed=run.seed, n_classes=n_classes)
        self.plan, self.device = plan, device
        self.first = dp_rank * plan.micro_batch * plan.grad_accum

    def next(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        x, y = self.source.next()  # (batch, T) inputs, (batch, T) or (batch,) targets
        mb, out = self.plan.micro_batch, []
        for i in range(self.plan.grad_accum):
            lo = self.first + i * mb
            out.append((x[lo:lo + mb].to(self.device), y[lo:lo + mb].to(self.device)))
        return out


def make_optimizer(model: torch.nn.Module, layout: ParallelLayout, mesh, lr: float):
    """AdamW as train.py's; for zero 1 wrapped in ZeroRedundancyOptimizer (each replica keeps and
    updates 1/dp of the optimizer state, then broadcasts its parameters)."""
    if layout.zero == 1 and mesh is not None and mesh["dp"].size() > 1:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        kwargs = {"optimizer_class": torch.optim.AdamW, "process_group": mesh["dp"].get_group(),
                  "lr": lr, "betas": (0.9, 0.95), "weight_decay": 0.1}
        try:
            return ZeroRedundancyOptimizer(list(model.parameters()), fused=True, **kwargs)
        except (RuntimeError, TypeError, ValueError):
            return ZeroRedundancyOptimizer(list(model.parameters()), foreach=True, **kwargs)
    return make_adamw(param_groups(model), lr=lr)


def param_groups(model: torch.nn.Module) -> list[dict]:
    """DTensor parameters (sharded by TP or FSDP2) and plain ones (replicated over the TP group:
    embeddings, norms, head) in separate groups: a fused or foreach kernel takes one kind at a time."""
    from torch.distributed.tensor import DTensor
    params = list(model.parameters())
    groups = [[p for p in params if isinstance(p, DTensor)], [p for p in params if not isinstance(p, DTensor)]]
    return [{"params": g} for g in groups if g]


def _grad_sync(net, last: bool):
    """Reduce gradients on the last micro-batch only: DDP's no_sync, FSDP2's
    set_requires_gradient_sync (gradients accumulate unsharded until then)."""
    from torch.distributed.fsdp import FSDPModule
    from torch.nn.parallel import DistributedDataParallel as DDP
    if isinstance(net, FSDPModule):
        net.set_requires_gradient_sync(last)
    elif isinstance(net, DDP) and not last:
        return net.no_sync()
    return contextlib.nullcontext()


def _autocast(net, device: torch.device, precision: str):
    """bf16 by autocast unless FSDP2's MixedPrecisionPolicy already casts the parameters."""
    from torch.distributed.fsdp import FSDPModule
    if precision == "bf16" and not isinstance(net, FSDPModule):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def train_step(net, opt, batches: ShardedBatches, device: torch.device, precision: str) -> torch.Tensor:
    """One optimizer step over grad_accum micro-batches; the replica's mean loss (a tensor)."""
    opt.zero_grad(set_to_none=True)
    micro = batches.next()
    G, total = len(micro), torch.zeros((), device=device)
    for i, (x, y) in enumerate(micro):
        with _grad_sync(net, last=i == G - 1):
            with _autocast(net, device, precision):
                _, loss = net(x, y)
            (loss / G).backward()
        total += loss.detach() / G
    opt.step()
    return total


def _local_bytes(tensors) -> int:
    total = 0
    for t in tensors:
        t = t.to_local() if hasattr(t, "to_local") else t
        total += t.numel() * t.element_size()
    return total


def state_bytes(model: torch.nn.Module, opt) -> dict:
    """This rank's parameter, gradient and optimizer-state bytes (its shards under FSDP2 / TP)."""
    params = list(model.parameters())
    inner = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer keeps its shard's optimizer here
    states = [v for s in inner.state.values() for v in s.values() if torch.is_tensor(v)]
    return {"param_bytes": _local_bytes(params),
            "grad_bytes": _local_bytes(p.grad for p in params if p.grad is not None),
            "optimizer_state_bytes": _local_bytes(states)}


def measure(spec, layout: ParallelLayout, run: TrainRun, plan: BatchPlan, device: torch.device, *,
            mesh=None, dp_rank: int = 0) -> dict:
    """Build, lay out, warm up and time `run.steps` steps on this rank (no collective of its own)."""
    torch.manual_seed(run.seed)
    model = build_model(spec, device=device)  # fp32 master weights, the same on every rank
    net = parallelize(model, layout, mesh, precision=run.precision)
    opt = make_optimizer(model, layout, mesh, run.lr)
    batches = ShardedBatches(spec, run, plan, dp_rank, device)
    losses, times = [], []

    def step():
        losses.append(train_step(net, opt, batches, device, run.precision))

    dev.reset_peak_memory(device)
    warmup_s = dev.time_fn(step, device, repeats=0, warmup=run.warmup_steps)[1]
    for _ in range(run.steps):
        with dev.Timer(device) as t:
            step()
        times.append(t.elapsed_s)
    return {"times": times, "warmup_s": warmup_s, "losses": [float(v) for v in losses],
            **state_bytes(model, opt)}


# ---------------------------------------------------------------- one job, every rank

def teardown() -> None:
    """Leave the process group together (a barrier, then destroy_process_group), so that no rank
    exits while another still talks to it."""
    import torch.distributed as tdist
    if tdist.is_initialized():
        tdist.barrier()
        tdist.destroy_process_group()


def _needs_group(layout: ParallelLayout, world: int) -> bool:
    return world > 1 or layout.tp > 1 or layout.fsdp


def setup(device_name: str, layout: ParallelLayout) -> tuple[torch.device, int, int]:
    """torchrun's process group and this rank's device (train.setup_distributed), and a
    one-process group when FSDP2 or a mesh runs without torchrun. (device, world, rank)."""
    from llmbench.measure.train import setup_distributed
    device, world, rank = setup_distributed(device_name)
    if _needs_group(layout, world):
        _ensure_group(device)
    return device, world, rank


def _ensure_group(device: torch.device) -> None:
    """A one-process group when FSDP2 or a mesh runs without torchrun (torchrun's group is made by
    train.setup_distributed: gloo on CPU, NCCL on CUDA, as the device helper says)."""
    import torch.distributed as tdist
    if not tdist.is_initialized():
        tdist.init_process_group(dev.backend(device), store=tdist.HashStore(), rank=0, world_size=1)


def _dp_rank(mesh) -> int:
    return mesh["dp"].get_local_rank() if mesh is not None else 0


def _memory_of_rank(device: torch.device, r: dict | None) -> dict:
    mem = {"peak_mem_bytes": dev.peak_memory_bytes(device), **dev.memory_stats(device)}
    if r is not None:  # None: out of memory before the model was laid out
        mem.update({k: r[k] for k in ("param_bytes", "grad_bytes", "optimizer_state_bytes")})
    return mem


def _gather(obj, world: int) -> list:
    """Every rank's object, on every rank (one all_gather_object)."""
    if world == 1:
        return [obj]
    import torch.distributed as tdist
    out = [None] * world
    tdist.all_gather_object(out, obj)
    return out


def _reduce(values: list[float], device: torch.device, world: int, op: str) -> list[float]:
    if world == 1:
        return values
    import torch.distributed as tdist
    t = torch.tensor(values, dtype=torch.float64, device=device)
    tdist.all_reduce(t, op=tdist.ReduceOp.MAX if op == "max" else tdist.ReduceOp.SUM)
    return (t / (1 if op == "max" else world)).tolist()


def run_parallel_train(spec, layout: ParallelLayout, *, batch: int, seq: int, steps: int = 10,
                       warmup_steps: int = 2, precision: str = "fp32", device="auto",
                       data: str = "synthetic", seed: int = 0, lr: float = 3e-4) -> dict:
    """Measure one layout; call it on every rank (under torchrun, or alone). `device`: a name, or
    the torch.device train.setup_distributed gave. Returns {"status": "ok" | "oom", "metrics":
    {...}, "error": str | None}, the same on every rank. Bad input raises BadInput before any
    work; a failure other than out-of-memory propagates."""
    run = TrainRun(batch=batch, seq=seq, steps=steps, warmup_steps=warmup_steps, precision=precision,
                   data=data, seed=seed, lr=lr)
    if seq > spec.max_seq_len:
        raise BadInput(f"--seq {seq} exceeds {spec.name}'s max_seq_len {spec.max_seq_len}")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    plan = plan_batch(layout, world, batch)
    check_layout(spec, layout, plan)
    if not isinstance(device, torch.device):
        device = setup(device, layout)[0]
    elif _needs_group(layout, world):
        _ensure_group(device)
    rank = int(os.environ.get("RANK", "0"))
    ok, why = dev.supports_dtype(device, precision)
    if not ok:
        raise BadInput(f"--precision {precision}: {why}")
    dev.set_precision(device, precision)
    mesh = build_mesh(layout, world, device)
    r, error = None, None
    try:
        r = measure(spec, layout, run, plan, device, mesh=mesh, dp_rank=_dp_rank(mesh))
    except Exception as exc:  # noqa: BLE001 - out of memory is a result; anything else is not
        if not dev.is_oom(exc):
            raise
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
    gc.collect()
    ranks = _gather({"rank": rank, "error": error, **_memory_of_rank(device, r)}, world)
    dev.empty_cache(device)
    failed = [g["error"] for g in ranks if g["error"]]
    if failed:  # every rank returns oom, so a sweep goes on in step
        return {"status": "oom", "metrics": _memory_metrics(ranks, device), "error": failed[0]}
    return {"status": "ok", "metrics": summarize(spec, layout, run, plan, device, r, ranks), "error": None}


def _memory_metrics(ranks: list[dict], device: torch.device) -> dict:
    m = {"peak_mem_bytes": max(g["peak_mem_bytes"] for g in ranks),
         "peak_mem_kind": "allocated" if dev.is_accelerator(device) else "rss_high_water_mark",
         "memory_per_rank": ranks}
    for key in ("param_bytes", "grad_bytes", "optimizer_state_bytes"):
        if all(key in g for g in ranks):
            m[f"{key}_max_rank"] = max(g[key] for g in ranks)
    return m


def summarize(spec, layout, run: TrainRun, plan: BatchPlan, device, r: dict, ranks: list[dict]) -> dict:
    """Job-wide figures: slowest rank's step times, global tokens and FLOPs, loss averaged over ranks."""
    world = len(ranks)
    times = _reduce(r["times"], device, world, "max")
    losses = _reduce(r["losses"], device, world, "mean")
    m = summarize_times(times)
    step_s = m["step_time_s"]
    flops = training_flops(spec, plan.micro_batch, run.seq, recompute=layout.recompute)
    per_step = plan.grad_accum * plan.dp
    model_flops, hw_flops = flops["model"] * per_step, flops["hardware"] * per_step
    m.update({
        "tokens_per_s": run.batch * run.seq / step_s, "samples_per_s": run.batch / step_s,
        "achieved_tflops": model_flops / step_s / 1e12, "hardware_tflops": hw_flops / step_s / 1e12,
        "flops_per_step": model_flops, "hardware_flops_per_step": hw_flops,
        "tokens_per_step": run.batch * run.seq, "batch": run.batch, "world_size": world, "dp": plan.dp, "tp": layout.tp,
        "micro_batch": plan.micro_batch, "grad_accum": plan.grad_accum, "layout": layout.to_dict(),
        "warmup_s": r["warmup_s"], "steps": len(times), "losses": losses,
        "loss_first": losses[0], "loss_last": losses[-1],
    })
    m.update(_memory_metrics(ranks, device))
    return m
