"""The GEMMs of one serving step, timed on the device by rows: a StepModel's GemmTimes.

    from llmbench.measure.kernels import time_gemms
    gt = time_gemms(spec, torch.device("cpu"))            # perfmodel.serving.GemmTimes
    sm = replace(build_step_model(spec, hw, precision="fp32"), gemm_times=gt)

Each weight matrix of every layer (perfmodel/shapes.py: QKV, attention out, MLP up and down) and
then the LM head is run by F.linear on M rows for every M in `rows`, in a step's order, each call
timed alone (measure/device.Timer); a step's body time at M rows is the median over `repeats`
passes of the layers' calls summed, the head's the median of its own. No roofline: on a CPU a BLAS runs
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


#: distinct weights of the layers timed in a step's order, at most this many bytes (beyond it the
#: layers' sets repeat): more than the caches they pass through, less than a large model's weights
STEP_WEIGHT_BYTES = 1 << 30


def time_gemms(spec, device: torch.device, *, precision: str = "fp32", rows=ROWS, repeats: int = 7) -> GemmTimes:
    """The step's GEMMs of `spec` on `device` at `precision`, timed at each of `rows` in a step's
    order: every layer's matrices (each layer its own weights, up to STEP_WEIGHT_BYTES), then the
    LM head, so each weight meets the cache as in a step; each call timed alone, the median over
    `repeats` passes (after two untimed) of the body's sum and of the head."""
    sh = shape(spec, precision)
    if sh.moe is not None:
        raise ValueError(f"{spec.name}: measured GEMM times cover dense models only (a MoE's experts are not timed)")
    dtype = dev.dtype_of(precision)
    layer = [(n, k) for n, k, _ in sh.gemms]
    per_layer = sum(n * k for n, k in layer) * torch.finfo(dtype).bits // 8
    sets = max(1, min(sh.L, STEP_WEIGHT_BYTES // max(per_layer, 1)))
    weights = [[torch.randn(n, k, device=device, dtype=dtype) for n, k in layer] for _ in range(sets)]
    head_w = [torch.randn(n, k, device=device, dtype=dtype) for n, k in sh.head_tok]
    body, head = [], []
    for m in rows:
        xs = {k: torch.randn(m, k, device=device, dtype=dtype) for _, k in layer + list(sh.head_tok)}
        passes = [_step_pass(xs, [weights[i % sets] for i in range(sh.L)], head_w, device)
                  for _ in range(repeats + 2)][2:]
        body.append(float(statistics.median(b for b, _ in passes)))
        head.append(float(statistics.median(h for _, h in passes)))
    return GemmTimes(rows=tuple(float(m) for m in rows), body_s=tuple(body), head_s=tuple(head))


def _step_pass(xs: dict, layers: list, head_w: list, device: torch.device) -> tuple[float, float]:
    """(seconds of every layer's GEMMs, of the head's) in one pass, each call timed alone."""
    def timed(w) -> float:
        with dev.Timer(device) as t:
            F.linear(xs[w.shape[1]], w)
        return t.elapsed_s

    return sum(timed(w) for ws in layers for w in ws), sum(timed(w) for w in head_w)
