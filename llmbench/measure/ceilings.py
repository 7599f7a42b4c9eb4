"""Measured ceilings of the local device: GEMM FLOP/s per dtype and shape, copy bandwidth.

    llmbench measure ceilings [--device auto] [--model gpt2-xl --batch 1 --seq 1024] [--json]

Method (after stas00/ml-engineering mamf-finder.py): each GEMM is timed alone `repeats` times
after a warm-up, with the last-level cache flushed before each repetition (a 256 MiB write on
accelerators; on the CPU the operands are far larger than the cache). We report min/median/max
TFLOP/s. A model's *layer ceiling* is the rate its own matmuls (forward and both backward GEMMs
of every projection, and the attention batched matmuls) would reach if each ran at its measured
GEMM rate and nothing else took time: total FLOPs / sum(FLOPs_i / rate_i). That is the fair
yard-stick for the block benchmark, not a large square.
"""
from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from llmbench.measure import device as dev
from llmbench.models.counting import layer_ops
from llmbench.models.spec import ModelSpec

_FLUSH: dict[str, torch.Tensor] = {}
_RATE_CACHE: dict[tuple, dict] = {}


@dataclass(frozen=True)
class Gemm:
    """`count` products of (M x K) @ (K x N); layout says which operand is transposed in memory
    as torch lays it out (nn.Linear forward: x @ W^T)."""

    name: str
    M: int
    N: int
    K: int
    count: int = 1
    layout: str = "nt"
    """nn: A @ B; nt: A @ B^T (Linear forward); tn: A^T @ B (Linear weight gradient)"""

    @property
    def flops(self) -> float:
        return 2.0 * self.count * self.M * self.N * self.K


def layer_gemms(spec: ModelSpec, batch: int, seq: int, *, backward: bool = True) -> list[Gemm]:
    """The matmuls of one layer as torch runs them: each Linear's forward (M, N, K), and in the
    backward dX = dY W (M, K, N) and dW = dY^T X (N, K, M); attention's batched products twice
    more in the backward (as counting.py says: bwd = 2 x fwd)."""
    out = []
    for op in layer_ops(spec, batch, seq, "fp32"):
        if op.gemm is None:
            continue
        c, M, N, K = op.gemm
        if op.kind == "matmul":
            out.append(Gemm(op.name, M, N, K, c, "nt"))
            if backward:
                out.append(Gemm(op.name + "_dx", M, K, N, c, "nn"))
                out.append(Gemm(op.name + "_dw", N, K, M, c, "tn"))
        else:  # attention: batched (T x hd) @ (hd x T) and (T x T) @ (T x hd)
            out.append(Gemm(op.name, M, N, K, c, "nn"))
            if backward:
                out.append(Gemm(op.name + "_bwd", M, N, K, 2 * c, "nn"))
    return out


def _operands(g: Gemm, dtype, device):
    count = g.count if g.count > 1 else None
    shape = (lambda *s: (count, *s)) if count else (lambda *s: s)
    a = torch.randn(*(shape(g.K, g.M) if g.layout == "tn" else shape(g.M, g.K)), dtype=dtype, device=device)
    b = torch.randn(*(shape(g.N, g.K) if g.layout == "nt" else shape(g.K, g.N)), dtype=dtype, device=device)
    ta = (lambda t: t.transpose(-1, -2)) if g.layout == "tn" else (lambda t: t)
    tb = (lambda t: t.transpose(-1, -2)) if g.layout == "nt" else (lambda t: t)
    return (lambda: torch.matmul(ta(a), tb(b)))


def _flush(device: torch.device) -> None:
    if not dev.is_accelerator(device):
        return
    key = str(device)
    if key not in _FLUSH:
        _FLUSH[key] = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)
    _FLUSH[key].zero_()


def stats(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def gemm_rate(g: Gemm, precision: str, device: torch.device, *, repeats: int = 5,
              warmup: int = 1, cache: bool = True) -> dict:
    """TFLOP/s of one GEMM shape: {'min','median','max'} over `repeats` timed runs."""
    key = (g.M, g.N, g.K, g.count, g.layout, precision, str(device), repeats)
    if cache and key in _RATE_CACHE:
        return _RATE_CACHE[key]
    dev.set_precision(device, precision)
    fn = _operands(g, dev.dtype_of(precision), device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        _flush(device)
        with dev.Timer(device) as t:
            fn()
        times.append(t.elapsed_s)
    rates = [g.flops / s / 1e12 for s in times]
    out = {**stats(rates), "flops": g.flops, "time_s_median": statistics.median(times)}
    if cache:
        _RATE_CACHE[key] = out
    return out


def layer_ceiling(spec: ModelSpec, batch: int, seq: int, precision: str, device: torch.device, *,
                  backward: bool = True, repeats: int = 5, stat: str = "median") -> dict:
    """Time-weighted GEMM ceiling of one layer (TFLOP/s) and the rate of each of its GEMMs."""
    gemms = layer_gemms(spec, batch, seq, backward=backward)
    per = {g.name: gemm_rate(g, precision, device, repeats=repeats) for g in gemms}
    total = sum(g.flops for g in gemms)
    best_time = sum(g.flops / (per[g.name][stat] * 1e12) for g in gemms)
    return {"ceiling_tflops": total / best_time / 1e12, "gemm_flops": total,
            "gemms": {g.name: {"M": g.M, "N": g.N, "K": g.K, "count": g.count,
                               "tflops": per[g.name]} for g in gemms}}


def copy_bandwidth(device: torch.device, *, n_bytes: int = 256 * 2**20, repeats: int = 5) -> dict:
    """GB/s of dst.copy_(src) for `n_bytes` per tensor, counting bytes read + written."""
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        with dev.Timer(device) as t:
            dst.copy_(src)
        times.append(t.elapsed_s)
    return {**stats([2 * n_bytes / s / 1e9 for s in times]), "bytes": n_bytes}


def square_size(device: torch.device, precision: str) -> int:
    """A large square that reaches the plateau: 4096 on the CPU (fp32), 8192 on accelerators."""
    return 8192 if dev.is_accelerator(device) else 4096


def default_precisions(device: torch.device) -> list[str]:
    if not dev.is_accelerator(device):
        return ["fp32"]
    return [p for p in ("fp32", "tf32", "fp16", "bf16") if dev.supports_dtype(device, p)[0]]


def measure_ceilings(device: torch.device, *, precisions: list[str] | None = None,
                     spec: ModelSpec | None = None, batch: int = 1, seq: int = 1024,
                     repeats: int = 5, size: int | None = None,
                     copy_bytes: int | None = None) -> dict:
    """All ceilings: square GEMM per precision, the model layer's GEMMs per precision, copy."""
    precisions = precisions or default_precisions(device)
    out = {"device": dev.device_name(device), "profile": dev.profile_name(device),
           "repeats": repeats, "gemm": {}, "layer": {}}
    for p in precisions:
        ok, why = dev.supports_dtype(device, p)
        if not ok:
            out["gemm"][p] = {"skipped": why}
            continue
        n = size or square_size(device, p)
        out["gemm"][p] = {"shape": [n, n, n], **gemm_rate(Gemm("square", n, n, n, 1, "nn"), p, device,
                                                            repeats=repeats, cache=False)}
        if spec is not None:
            lc = layer_ceiling(spec, batch, seq, p, device, repeats=repeats)
            out["layer"][p] = {"model": spec.name, "batch": batch, "seq": seq, **lc}
    nb = copy_bytes or (1 << 30 if dev.is_accelerator(device) else 256 * 2**20)
    out["copy"] = copy_bandwidth(device, n_bytes=nb, repeats=repeats)
    dev.set_precision(device, "fp32")
    return out


# ---------------------------------------------------------------- the saved profile

def home() -> Path:
    return Path(os.environ.get("LLMBENCH_HOME") or Path.home() / ".llmbench")


def profile_overrides(result: dict, device: torch.device) -> dict:
    """HardwareSpec fields measured here, each with its source."""
    env = dev.collect_environment(device)
    how = (f"measured by `llmbench measure ceilings` on {env['device_name']} "
           f"({env['date']}, torch {env['torch_version']}, {env['torch_threads']} threads)")
    peaks = {p: r["max"] * 1e12 for p, r in result["gemm"].items() if "max" in r}
    sources = {f"peak_flops.{p}": f"{how}: max of {result['repeats']} runs of a "
               f"{r['shape'][0]}^3 GEMM" for p, r in result["gemm"].items() if "max" in r}
    tier_name = "hbm" if dev.is_accelerator(device) else "dram"
    capacity = dev.total_memory_bytes(device) or 0
    tiers = [{"name": tier_name, "role": "hbm" if dev.is_accelerator(device) else "dram",
              "capacity_bytes": float(capacity),
              "bandwidth_bytes_per_s": result["copy"]["max"] * 1e9}]
    sources[f"memory_tiers.{tier_name}.bandwidth_bytes_per_s"] = (
        f"{how}: max of {result['repeats']} copies of {result['copy']['bytes']} bytes (read + write)")
    sources[f"memory_tiers.{tier_name}.capacity_bytes"] = f"{how}: total device/host memory reported"
    return {"peak_flops": peaks, "memory_tiers": tiers, "sources": sources}


def save_profile(result: dict, device: torch.device) -> Path:
    """Save as the local hardware profile, through llmbench.hardware.spec.save_profile when the
    hardware package has it; the full per-shape result goes next to it."""
    name = result["profile"]
    overrides = profile_overrides(result, device)
    if not dev.is_accelerator(device):
        overrides["display_name"] = f"Local CPU: {result['device']} (measured)"
    try:
        from llmbench.hardware.spec import save_profile as hw_save
    except ImportError:
        hw_save = None
    if hw_save is not None:
        path = Path(hw_save(name, overrides))
    else:
        path = home() / "hardware" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(overrides, indent=2))
    detail = home() / "ceilings" / f"{name}.json"
    detail.parent.mkdir(parents=True, exist_ok=True)
    detail.write_text(json.dumps(result, indent=2))
    return path


def load_ceilings(device: torch.device) -> dict | None:
    """The last full ceilings result saved for this device, or None."""
    path = home() / "ceilings" / f"{dev.profile_name(device)}.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
