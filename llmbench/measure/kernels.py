"""The GEMMs of one serving step, timed on the device by rows: a StepModel's GemmTimes.

    from llmbench.measure.kernels import time_gemms
    gt = time_gemms(spec, torch.device("cpu"))            # perfmodel.serving.GemmTimes
    sm = replace(build_step_model(spec, hw, precision="fp32"), gemm_times=gt)

Each distinct weight matrix of a layer (perfmodel/shapes.py: QKV, attention out, MLP up and down)
and the LM head is run by F.linear on M rows for every M in `rows` (median of `repeats` after two
warm-up calls, the device synchronised around each call: measure/device.time_fn); a step's body
time at M rows is the layer's matrices summed, times the layers. No roofline: on a CPU a BLAS runs
one row as a matrix-vector kernel and a few rows as a packed GEMM whose time is no simple function
of bytes or FLOPs (benchmarks/cpu_small_m.py; docs/serve.md "Measured kernels"), which is why the
simulator is offered the device's own kernel times, as Vidur (Agrawal et al., MLSys 2024) profiles
each operator before simulating. Dense models only (the routed experts of a MoE are not timed).
"""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from llmbench.measure import device as dev
from llmbench.perfmodel.serving import GemmTimes
from llmbench.perfmodel.shapes import shape

#: rows timed: one sequence's decode to a prompt of a few hundred tokens (beyond the last: its rate)
ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512)


def time_linear(m: int, k: int, n: int, device: torch.device, dtype: torch.dtype, repeats: int) -> float:
    """Median seconds of F.linear of an (m, k) input against an (n, k) weight on `device`."""
    x = torch.randn(m, k, device=device, dtype=dtype)
    w = torch.randn(n, k, device=device, dtype=dtype)
    times, _ = dev.time_fn(lambda: F.linear(x, w), device, repeats=repeats, warmup=2)
    return float(statistics.median(times))


def time_gemms(spec, device: torch.device, *, precision: str = "fp32", rows=ROWS, repeats: int = 7) -> GemmTimes:
    """The step's GEMMs of `spec` on `device` at `precision`, timed at each of `rows`."""
    sh = shape(spec, precision)
    if sh.moe is not None:
        raise ValueError(f"{spec.name}: measured GEMM times cover dense models only (a MoE's experts are not timed)")
    dtype = dev.dtype_of(precision)
    layer = [(n, k) for n, k, _ in sh.gemms]
    body, head = [], []
    for m in rows:
        body.append(sh.L * sum(time_linear(m, k, n, device, dtype, repeats) for n, k in layer))
        head.append(sum(time_linear(m, k, n, device, dtype, repeats) for n, k in sh.head_tok))
    return GemmTimes(rows=tuple(float(m) for m in rows), body_s=tuple(body), head_s=tuple(head))
