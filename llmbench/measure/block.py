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
from llmbench.measure.common import datasheet_peak_flops, model_from_config
from llmbench.measure.modeling import build_block
from llmbench.models.counting import layer_ops

DEFAULTS = {"batch": 1, "seq": 1024, "precision": "fp32", "device": "auto", "repeats": 5,
            "warmup": 1, "ceiling": "shapes", "hardware": None, "compile": False}
CEILINGS = ("shapes", "profile", "none")


def _zero_grads(module: torch.nn.Module, x: torch.Tensor) -> None:
    for p in module.parameters():
        p.grad = None
    x.grad = None


def run_block(config: dict) -> dict:
    cfg = {**DEFAULTS, **config}
    if cfg["ceiling"] not in CEILINGS:
        raise ValueError(f"ceiling must be one of {', '.join(CEILINGS)}, got {cfg['ceiling']!r}")
    spec = model_from_config(cfg)
    device = dev.resolve(cfg["device"])
    precision, B, T = cfg["precision"], int(cfg["batch"]), int(cfg["seq"])
    ok, why = dev.supports_dtype(device, precision)
    if not ok:
        raise ValueError(why)
    dev.set_precision(device, precision)
    dtype = dev.dtype_of(precision)
    torch.manual_seed(0)
    block = build_block(spec, device=device, dtype=dtype)
    fn = torch.compile(block) if cfg["compile"] else block
    x = torch.randn(B, T, spec.d_model, device=device, dtype=dtype, requires_grad=True)
    dy = torch.randn(B, T, spec.d_model, device=device, dtype=dtype)

    def fwd():
        return fn(x)

    def fwd_bwd():
        _zero_grads(block, x)
        fn(x).backward(dy)

    dev.reset_peak_memory(device)
    t_fwd, warm_fwd = dev.time_fn(fwd, device, repeats=cfg["repeats"], warmup=cfg["warmup"])
    t_fb, warm_fb = dev.time_fn(fwd_bwd, device, repeats=cfg["repeats"], warmup=cfg["warmup"])
    flops_fwd = sum(o.flops for o in layer_ops(spec, B, T, precision))
    flops_fb = 3.0 * flops_fwd
    fwd_s, fb_s = statistics.median(t_fwd), statistics.median(t_fb)
    metrics = {
        "fwd_time_s": fwd_s, "fwd_bwd_time_s": fb_s,
        "fwd_time_s_min": min(t_fwd), "fwd_bwd_time_s_min": min(t_fb),
        "fwd_tflops": flops_fwd / fwd_s / 1e12, "fwd_bwd_tflops": flops_fb / fb_s / 1e12,
        "flops_fwd": flops_fwd, "flops_fwd_bwd": flops_fb,
        "warmup_s": warm_fwd + warm_fb, "peak_mem_bytes": dev.peak_memory_bytes(device),
    }
    metrics.update(_ceiling(cfg, spec, B, T, precision, device, metrics["fwd_bwd_tflops"]))
    peak, hw = datasheet_peak_flops(device, precision, cfg["hardware"])
    metrics["mfu"] = metrics["fwd_bwd_tflops"] * 1e12 / peak if peak else None
    metrics["datasheet"] = hw
    return metrics


def _ceiling(cfg, spec, B, T, precision, device, achieved_tflops) -> dict:
    if cfg["ceiling"] == "none":
        return {"ceiling_tflops": None, "frac_of_ceiling": None, "ceiling_kind": "none"}
    if cfg["ceiling"] == "profile":
        saved = ceil.load_ceilings(device) or {}
        rate = saved.get("gemm", {}).get(precision, {}).get("median")
        if rate is None:
            return {"ceiling_tflops": None, "frac_of_ceiling": None,
                    "ceiling_kind": "profile (none saved: run 'llmbench measure ceilings')"}
        return {"ceiling_tflops": rate, "frac_of_ceiling": achieved_tflops / rate,
                "ceiling_kind": "profile square GEMM (median)"}
    lc = ceil.layer_ceiling(spec, B, T, precision, device, repeats=max(3, cfg["repeats"]))
    rate = lc["ceiling_tflops"]
    return {"ceiling_tflops": rate, "frac_of_ceiling": achieved_tflops / rate,
            "ceiling_kind": "layer GEMM shapes fwd+bwd (median, same run)"}
