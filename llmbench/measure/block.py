"""Block micro-benchmark: one transformer layer, forward and forward+backward.

    llmbench measure block --model gpt2-xl --batch 1 --seq 1024 --precision fp32

FLOPs come from llmbench.models.counting (layer_ops; forward+backward = 3 x forward), which
tests/test_measure_modeling.py checks against FlopCounterMode on this very module. The ceiling
is, by default, the layer's own GEMM shapes measured in the same process (ceilings.layer_ceiling):
`frac_of_ceiling` = achieved / what those GEMMs alone would reach.
"""
from __future__ import annotations

import statistics

import torch

from llmbench.measure import ceilings as ceil
from llmbench.measure import device as dev
from llmbench.measure.common import datasheet_peak_flops, mfu
from llmbench.measure.modeling import build_block
from llmbench.models.counting import layer_ops


def _zero_grads(module: torch.nn.Module, x: torch.Tensor) -> None:
    for p in module.parameters():
        p.grad = None
    x.grad = None


def run_block(w, run, device: torch.device) -> tuple[dict, dict]:
    """One layer of w.spec() on w.batch x w.seq_len: (metrics, info)."""
    spec, B, T = w.spec(), w.batch, w.seq_len
    dev.set_precision(device, w.precision)
    dtype = dev.dtype_of(w.precision)
    torch.manual_seed(run.seed)
    block = build_block(spec, device=device, dtype=dtype)
    fn = torch.compile(block) if run.compile else block
    x = torch.randn(B, T, spec.d_model, device=device, dtype=dtype, requires_grad=True)
    dy = torch.randn(B, T, spec.d_model, device=device, dtype=dtype)

    def fwd_bwd():
        _zero_grads(block, x)
        fn(x).backward(dy)

    dev.reset_peak_memory(device)
    t_fwd, warm_fwd = dev.time_fn(lambda: fn(x), device, repeats=run.repeats, warmup=run.warmup)
    t_fb, warm_fb = dev.time_fn(fwd_bwd, device, repeats=run.repeats, warmup=run.warmup)
    flops_fwd = sum(o.flops for o in layer_ops(spec, B, T, w.precision))
    fwd_s, fb_s = statistics.median(t_fwd), statistics.median(t_fb)
    metrics = {"fwd_time_s": fwd_s, "fwd_bwd_time_s": fb_s, "fwd_tflops": flops_fwd / fwd_s / 1e12,
               "fwd_bwd_tflops": 3.0 * flops_fwd / fb_s / 1e12, "warmup_s": warm_fwd + warm_fb,
               "peak_mem_bytes": dev.peak_memory_bytes(device),
               "mfu": mfu(w, 3.0 * flops_fwd / fb_s)}
    info = {"flops_fwd": flops_fwd, "flops_fwd_bwd": 3.0 * flops_fwd, "fwd_time_s_min": min(t_fwd),
            "fwd_bwd_time_s_min": min(t_fb), "datasheet": datasheet_peak_flops(w)[1]}
    ceiling_tflops, info["ceiling_kind"] = _ceiling(w, run, spec, device)
    metrics["ceiling_tflops"] = ceiling_tflops
    metrics["frac_of_ceiling"] = metrics["fwd_bwd_tflops"] / ceiling_tflops if ceiling_tflops else None
    return metrics, info


def _ceiling(w, run, spec, device) -> tuple[float | None, str]:
    """(ceiling TFLOP/s, what it is) for frac_of_ceiling, as run.ceiling asks."""
    if run.ceiling == "none":
        return None, "none"
    if run.ceiling == "profile":
        rate = ((ceil.load_ceilings(device) or {}).get("gemm_flops_per_s", {}).get(w.precision) or {}).get("median")
        if rate is None:
            return None, "profile (none saved: run 'llmbench measure ceilings')"
        return rate / 1e12, "profile square GEMM (median)"
    lc = ceil.layer_ceiling(spec, w.batch, w.seq_len, w.precision, device, repeats=max(3, run.repeats))
    return lc["flops_per_s"] / 1e12, "layer GEMM shapes fwd+bwd (median, same run)"
