"""Measured ceilings of the local device: GEMM FLOP/s per dtype and shape, copy bandwidth.

    llmbench measure ceilings [--device auto] [--model gpt2-xl --batch 1 --seq 1024] [--json]

Method (after stas00/ml-engineering mamf-finder.py): each GEMM is timed alone `repeats` times
after a warm-up, with the last-level cache flushed before each repetition (a 256 MiB write on
accelerators; on the CPU the operands are far larger than the cache). We report min/median/max
FLOP/s (`gemm_flops_per_s`) and bytes/s (`copy_bytes_per_s`). A model's *layer ceiling* is the rate its own matmuls (forward and both backward GEMMs
of every projection, and the attention batched matmuls) would reach if each ran at its measured
GEMM rate and nothing else took time: total FLOPs / sum(FLOPs_i / rate_i). That is the fair
yard-stick for the block benchmark, not a large square.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from llmbench.hardware.spec import llmbench_home
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
    """FLOP/s of one GEMM shape: {'min','median','max'} over `repeats` timed runs, the cache
    flushed before each."""
    key = (g.M, g.N, g.K, g.count, g.layout, precision, str(device), repeats)
    if cache and key in _RATE_CACHE:
        return _RATE_CACHE[key]
    dev.set_precision(device, precision)
    fn = _operands(g, dev.dtype_of(precision), device)
    times, _ = dev.time_fn(fn, device, repeats=repeats, warmup=warmup, before=lambda: _flush(device))
    out = {**stats([g.flops / s for s in times]), "flops": g.flops, "time_s_median": statistics.median(times)}
    if cache:
        _RATE_CACHE[key] = out
    return out


def layer_ceiling(spec: ModelSpec, batch: int, seq: int, precision: str, device: torch.device, *,
                  backward: bool = True, repeats: int = 5, stat: str = "median") -> dict:
    """Time-weighted GEMM ceiling of one layer (`flops_per_s`) and the rate of each of its GEMMs."""
    gemms = layer_gemms(spec, batch, seq, backward=backward)
    per = {g.name: gemm_rate(g, precision, device, repeats=repeats) for g in gemms}
    total = sum(g.flops for g in gemms)
    best_time = sum(g.flops / per[g.name][stat] for g in gemms)
    return {"flops_per_s": total / best_time, "gemm_flops": total,
            "gemms": {g.name: {"M": g.M, "N": g.N, "K": g.K, "count": g.count, "flops": g.flops,
                               "flops_per_s": {k: per[g.name][k] for k in ("min", "median", "max")},
                               "time_s_median": per[g.name]["time_s_median"]} for g in gemms}}


def copy_bandwidth(device: torch.device, *, n_bytes: int = 256 * 2**20, repeats: int = 5) -> dict:
    """Bytes/s of dst.copy_(src) for `n_bytes` per tensor, counting bytes read + written."""
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    times, _ = dev.time_fn(lambda: dst.copy_(src), device, repeats=repeats, warmup=1)
    return stats([2 * n_bytes / s for s in times])


def square_size(device: torch.device) -> int:
    """A large square that reaches the plateau: 4096 on the CPU (fp32), 8192 on accelerators."""
    return 8192 if dev.is_accelerator(device) else 4096


def default_precisions(device: torch.device) -> list[str]:
    if not dev.is_accelerator(device):
        return ["fp32"]
    return [p for p in ("fp32", "tf32", "fp16", "bf16") if dev.supports_dtype(device, p)[0]]


def run_ceilings(w, run, device: torch.device) -> tuple[dict, dict]:
    """The ceilings suite: (metrics, info). Square GEMM per precision (w.precision, else every
    one the device has), the GEMMs of w.model's layer at w.batch x w.seq_len (model '-': none),
    copy bandwidth; saved as the local hardware profile unless run.save_profile is False."""
    precisions = [w.precision] if w.precision else default_precisions(device)
    spec = w.spec() if w.model != "-" else None
    n = run.gemm_size or square_size(device)
    metrics = {"gemm_flops_per_s": {}, "layer_gemm_flops_per_s": {}}
    info = {"device": dev.device_name(device), "profile": dev.profile_name(device), "repeats": run.repeats,
            "gemm_shape": [n, n, n], "skipped": {}, "layer_gemms": {}}
    for p in precisions:
        ok, why = dev.supports_dtype(device, p)
        if not ok:
            info["skipped"][p] = why
            continue
        r = gemm_rate(Gemm("square", n, n, n, 1, "nn"), p, device, repeats=run.repeats, cache=False)
        metrics["gemm_flops_per_s"][p] = {k: r[k] for k in ("min", "median", "max")}
        if spec is not None:
            lc = layer_ceiling(spec, w.batch, w.seq_len, p, device, repeats=run.repeats)
            metrics["layer_gemm_flops_per_s"][p] = lc["flops_per_s"]
            info["layer_gemms"][p] = lc["gemms"]
    info["copy_bytes"] = 1 << 30 if dev.is_accelerator(device) else 256 * 2**20
    metrics["copy_bytes_per_s"] = copy_bandwidth(device, n_bytes=info["copy_bytes"], repeats=run.repeats)
    dev.set_precision(device, "fp32")
    if run.save_profile:
        info["saved_to"] = str(save_profile(metrics, info, device))
    return metrics, info


# ---------------------------------------------------------------- the saved profile

def profile_overrides(metrics: dict, info: dict, device: torch.device) -> dict:
    """HardwareSpec fields measured here, each with its source."""
    env = dev.collect_environment(device)
    how = (f"measured by `llmbench measure ceilings` on {env['device_name']} "
           f"({env['date']}, torch {env['torch_version']}, {env['torch_threads']} threads)")
    gemm, runs = metrics["gemm_flops_per_s"], info["repeats"]
    peaks = {p: r["max"] for p, r in gemm.items()}
    sources = {f"peak_flops.{p}": f"{how}: max of {runs} runs of a {info['gemm_shape'][0]}^3 GEMM" for p in gemm}
    tier_name = "hbm" if dev.is_accelerator(device) else "dram"
    capacity = dev.total_memory_bytes(device) or 0
    tiers = [{"name": tier_name, "role": "hbm" if dev.is_accelerator(device) else "dram",
              "capacity_bytes": float(capacity),
              "bandwidth_bytes_per_s": metrics["copy_bytes_per_s"]["max"]}]
    sources[f"memory_tiers.{tier_name}.bandwidth_bytes_per_s"] = (
        f"{how}: max of {runs} copies of {info['copy_bytes']} bytes (read + write)")
    sources[f"memory_tiers.{tier_name}.capacity_bytes"] = f"{how}: total device/host memory reported"
    return {"peak_flops": peaks, "memory_tiers": tiers, "sources": sources}


def save_profile(metrics: dict, info: dict, device: torch.device) -> Path:
    """Save as the local hardware profile (llmbench.hardware.save_profile, under the device's
    slug: llmbench.point.device_slug); the full result (metrics, info) goes next to it."""
    from llmbench.hardware import save_profile as hw_save

    overrides = profile_overrides(metrics, info, device)
    if not dev.is_accelerator(device):
        overrides["display_name"] = f"Local CPU: {info['device']} (measured)"
    path = Path(hw_save(info["profile"], overrides))
    detail = llmbench_home() / "ceilings" / f"{info['profile']}.json"
    detail.parent.mkdir(parents=True, exist_ok=True)
    detail.write_text(json.dumps({"metrics": metrics, "info": info}, indent=2))
    return path


def load_ceilings(device: torch.device) -> dict | None:
    """The metrics of the last ceilings saved for this device, or None (none, or an older format)."""
    path = llmbench_home() / "ceilings" / f"{dev.profile_name(device)}.json"
    if not path.exists():
        return None
    try:
        metrics = json.loads(path.read_text()).get("metrics")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return metrics if isinstance(metrics, dict) else None
