"""Can this workload run here? Device facts, a memory estimate from models/ counting, skip reasons.

    from llmbench.studies.feasibility import local_device, skip_reason
    skip_reason(w, local_device("cpu"))   # a resolved Workload -> None, or one line saying why not

No torch import for the CPU (the facts come from /proc and os); an accelerator is described through
llmbench.measure.device, which imports torch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

# CPU matmul in half precision has no fast kernels here: bf16 ~250x slower than fp32 (measured,
# docs/measure.md), so such points are skipped unless --force.
SLOW_ON_CPU = ("bf16", "fp16")
UNSUPPORTED = {"cbf16": "cbf16 is the Cerebras CS-2 format; no PyTorch device runs it",
               "fp8": "fp8 training is not measured by the PyTorch suites"}
MEMORY_HEADROOM = 0.9  # use at most 90% of the free memory: allocator slack, fragmentation


@dataclass(frozen=True, kw_only=True)
class LocalDevice:
    device: str
    """torch device string: cpu, cuda:0, ..."""
    type: str
    hardware: str
    """the `hardware` of measured points: point.hardware_for_device ('cpu', the catalog entry
    of an accelerator, else its name as a slug)"""
    name: str
    memory_bytes: float | None
    """memory one point may use: free RAM on a CPU, device memory on an accelerator"""
    count: int
    """processes/devices a data-parallel point may use"""


def _meminfo_available() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def local_device(device: str | None = None) -> LocalDevice:
    """Facts about the device the study runs on ('auto'/None picks the accelerator if any)."""
    if device and device.split(":")[0] == "cpu":
        from llmbench.results.environment import cpu_model

        return LocalDevice(device="cpu", type="cpu", hardware="cpu", name=cpu_model(),
                           memory_bytes=_meminfo_available(), count=os.cpu_count() or 1)
    try:
        from llmbench.measure import device as dev  # torch
    except ImportError as e:
        if device in (None, "auto"):
            return local_device("cpu")
        raise ValueError(f"device {device!r} needs torch ({e})") from None

    d = dev.resolve(device or "auto")
    if d.type == "cpu":
        return local_device("cpu")
    import torch

    from llmbench.point import hardware_for_device

    mod = getattr(torch, d.type, None)
    count = int(mod.device_count()) if mod is not None and hasattr(mod, "device_count") else 1
    total = dev.total_memory_bytes(d)
    return LocalDevice(device=str(d), type=d.type, hardware=hardware_for_device(d.type, dev.device_name(d)),
                       name=dev.device_name(d), memory_bytes=total, count=count)


def memory_bytes(w) -> float:
    """Bytes one device of a resolved Workload holds at its peak, as footprint says for the
    runtime that measures it: measure train's ("measure": autocast DDP / ZeroRedundancyOptimizer,
    FSDP2 from ZeRO 2), its one-layer block, or serving (weights and KV cache)."""
    from llmbench import footprint
    from llmbench.grid import Grid, code

    spec, p = w.spec(), w.precision or "fp32"
    devices = w.devices or 1
    if w.suite == "infer":
        return footprint.serving(spec, p, batch=w.batch, context=w.seq_len + (w.gen_len or 0),
                                 encoder=not spec.causal or spec.head != "lm").peak_bytes
    if w.suite == "block":  # one layer forward and backward, as predict's block
        spec = spec.with_(n_layers=1, vocab_size=64)
    lay = w.layout
    tp, pp = lay.tp or 1, lay.pp or 1
    g = Grid(batch=float(w.batch), seq=float(w.seq_len), devices=float(devices), tp=float(tp), pp=float(pp),
             micro_batch=float(w.micro_steps(dp=devices // (tp * pp))[0]), sparsity=0.0,
             zero=float(lay.zero or 0), recompute=float(code("recompute", lay.recompute or "none")), offload=0.0)
    return footprint.training(spec, g, p, "measure").peak_bytes


def skip_reason(w, local: LocalDevice, *, force: bool = False) -> str | None:
    """None when the (resolved) Workload can run here, else one line saying why not."""
    p = w.precision or "fp32"
    if p in UNSUPPORTED:
        return UNSUPPORTED[p]
    if local.type == "cpu" and p == "tf32":
        return "tf32 is a tensor-core mode; the CPU has none"
    devices = w.devices or 1
    if devices > local.count:
        unit = "CPU cores" if local.type == "cpu" else f"{local.type} devices"
        return f"needs {devices} data-parallel processes; this machine has {local.count} {unit}"
    if local.memory_bytes:
        need = memory_bytes(w)
        # on a CPU the replicas share the RAM; on accelerators each has its own memory
        need_here = need * (devices if local.type == "cpu" else 1)
        have = local.memory_bytes * MEMORY_HEADROOM
        if need_here > have:
            return (f"needs ~{need_here / 2**30:,.1f} GiB (model state + activations, llmbench.footprint), "
                    f"{have / 2**30:,.1f} GiB usable on {local.hardware}")
    if local.type == "cpu" and p in SLOW_ON_CPU and not force:
        return f"{p} on a CPU is ~250x slower than fp32 (no fast half-precision GEMM); --force runs it"
    return None
