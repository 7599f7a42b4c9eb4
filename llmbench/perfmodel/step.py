"""The training-step equations, on a Grid of one or many configurations (xp: numpy or Scalar).

    from llmbench.perfmodel.step import step_arrays
    r = step_arrays(spec, hw, "bf16", grid, params, xp)   # StepArrays: times, FLOPs, memory

A micro-batch on one pipeline stage (`Micro`), then the optimizer step around it (`Step`): resident
(pipeline bubble, data-parallel all-reduce, ZeRO gathers, optimizer on the device or offloaded) or
weight streaming (weights in from the store per layer, gradients out, optimizer where the weights
live). docs/predict.md gives every equation and its source.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from llmbench.footprint import act_per_seq, offloaded_per_micro
from llmbench.models.counting import training_flops

from llmbench._xp import is_scalar
from llmbench.grid import FULL, OFF_OPTIMIZER, SELECTIVE, Grid
from .memory import hierarchy, memory_use, swarm_depth
from .moe import ep_time_s, mlp_forward
from .params import gemm_efficiency
from .reserve import usable_bytes
from .shapes import params_per_device, shape

OPT_BYTES_PER_PARAM = 28.0  # Adam: read grad, master, m, v (2+4+4+4); write master, m, v, weight (4+4+4+2)


def peak_flops(hw, precision: str) -> float:
    pk = hw.peak(precision)
    if not pk:
        have = ", ".join(hw.peak_flops) or "none"
        raise ValueError(f"{hw.name} has no {precision} peak in its catalog entry (has: {have}); "
                         "choose another --precision")
    return pk


#: precisions whose GEMMs run on a low-precision peak with scaling; the rest of the layer stays bf16
LOW_PRECISION = ("fp8", "fp4")


def gemm_peak(hw, precision: str, p: dict) -> float:
    """Peak FLOP/s a linear layer's GEMMs see. fp8/fp4 (Transformer Engine style): the bf16 peak
    times (1 + lowp_gemm) per halving of the element width the datasheet ratio gives (fp8: 1 +
    lowp_gemm; fp4: its square), never below bf16 (a framework falls back): measured fp8 training
    gains are far below the datasheet's 2x (docs/predict.md, "Low precision"), and on B200 a
    Llama-8B-shaped GEMM with its activation quantisation runs fp8 at 1.47x bf16 and NVFP4 at
    2.0-2.2x (vllm-project/vllm PRs #19566 and #20578: bf16 1.40-1.51, fp8 2.23, NVFP4 3.04 PFLOP/s
    at M 16384, N 6144, K 4096), the square of the fp8 gain, not the 1 + 3 x 0.47 = 2.4x a gain
    linear in the datasheet ratio gives."""
    pk = peak_flops(hw, precision)
    hi = hw.peak("bf16") if precision in LOW_PRECISION else None
    if not hi:
        return pk
    return hi * max(1.0, (1.0 + p["lowp_gemm"]) ** math.log2(max(pk / hi, 1.0)))


def attn_peak(hw, precision: str) -> float:
    """Peak FLOP/s of the attention core and the LM head: bf16 under fp8/fp4 (FlashAttention and
    the head stay in bf16 in Transformer Engine / torchao float8 training), else the precision's."""
    return (hw.peak("bf16") or peak_flops(hw, precision)) if precision in LOW_PRECISION else peak_flops(hw, precision)


@dataclass(frozen=True, kw_only=True)
class Links:
    """Per-device bandwidths (bytes/s) of the collectives and their latency (s)."""

    intra_bytes_per_s: float
    """inside the scale-up domain (NVLink, IPU-Link)"""
    span_bytes_per_s: Any
    """of a group spanning all the devices (the node's NICs once it crosses nodes)"""
    latency_s: float


@dataclass(frozen=True, kw_only=True)
class Micro:
    """Times (s) of one micro-batch on one pipeline stage of one device."""

    compute_s: Any
    """compute-bound op time, forward + backward (2 x forward) + recompute"""
    memory_s: Any
    """memory-bound op time, forward + backward + recompute"""
    fwd_s: Any
    bwd_s: Any
    tp_s: Any
    """tensor-parallel all-reduces (Megatron: 2 forward, 2 backward per layer, +2 with full recompute)"""
    pp_s: Any
    """pipeline send/receive of the boundary activations"""
    ep_s: Any = 0.0
    """expert-parallel all-to-alls (moe.py: dispatch and combine, forward and backward)"""

    @property
    def total_s(self):
        return self.compute_s + self.memory_s + self.tp_s + self.pp_s + self.ep_s


@dataclass(frozen=True, kw_only=True)
class Step:
    """Times (s) of one optimizer step on one device."""

    step_time_s: Any
    network_s: Any
    """every collective, hidden or not"""
    network_exposed_s: Any
    stream_s: Any
    """weights in and gradients out of the store (weight streaming; offload transfers)"""
    stream_exposed_s: Any
    optimizer_s: Any
    exposed_s: Any
    """time not spent in compute or memory-bound ops: exposed collectives, bubble, streaming"""


@dataclass(frozen=True, kw_only=True)
class StepArrays:
    """What step_arrays returns: the micro-batch and step times, FLOPs and memory per device."""

    grid: Grid
    """the configurations, broadcast to one shape"""
    micro: Micro
    step: Step
    micro_steps: Any
    compute_s: Any
    """compute-bound time of the whole step (all micro-batches)"""
    memory_s: Any
    model_flops: Any
    """fwd + bwd FLOPs of the global batch, dense-equivalent (the MFU numerator)"""
    hw_flops: Any
    """FLOPs executed (recompute added, skipped zero weights removed)"""
    peak_flops: float
    memory: Any
    """memory.MemoryUse per device"""


def links(hw, devices, xp) -> Links:
    ic = hw.interconnect
    if ic is None:  # no fabric: go through host memory
        bw = stream_link_bytes_per_s(hw)
        return Links(intra_bytes_per_s=bw, span_bytes_per_s=xp.full_like(devices, bw, dtype=float),
                     latency_s=10e-6)
    # NCCL-style rings cross each node once per channel: a group spanning nodes runs at the node's
    # aggregate NIC bandwidth (per-device NIC x devices per node), capped by the intra-node link
    dpn = max(ic.devices_per_node, 1)
    inter = min((ic.inter_node_bandwidth_bytes_per_s or ic.bandwidth_bytes_per_s) * dpn,
                ic.bandwidth_bytes_per_s)
    return Links(intra_bytes_per_s=ic.bandwidth_bytes_per_s, latency_s=ic.latency_s,
                 span_bytes_per_s=xp.where(devices > dpn, inter, ic.bandwidth_bytes_per_s))


def stream_link_bytes_per_s(hw) -> float:
    """The link weights stream over: the store tier's (memory.hierarchy)."""
    return hierarchy(hw).link_bytes_per_s


def stream_shares_device_memory(hw) -> bool:
    """True when weights stream over the device's own memory (no tier below it: a CPU)."""
    return hierarchy(hw).store_is_device


def sparse_factors(hw, sparsity, p, peak, precision, xp):
    """(time factor of dense-layer GEMMs, byte factor of dense-layer weights)."""
    s = xp.asarray(sparsity, dtype=float)
    if hw.skips_zero_weights:  # dataflow cores skip zero weights; they are never stored or streamed
        # the time saved is the fitted share `sparse` of the zero-weight work; the bytes are the
        # non-zero weights' ("for all zero weights, no computation or memory is required": Cerebras
        # docs, 'Sparsity'), whatever share of their time the cores save
        return 1.0 - p["sparse"] * s, 1.0 - s
    sp = hw.peak_flops_sparse.get("bf16" if precision == "cbf16" else precision)
    if hw.structured_sparsity and sp:  # 2:4 at the datasheet's sparse rate, only at s >= 0.5
        return xp.where(s >= 0.5, peak / sp, 1.0), xp.where(s >= 0.5, 0.5 + 1 / 16, 1.0)
    return xp.ones_like(s), xp.ones_like(s)


def _roof(flops, nbytes, peak, eff, bw, xp):
    tc = flops / (peak * eff)
    tm = nbytes / bw
    return xp.where(tc >= tm, tc, 0.0), xp.where(tc < tm, tm, 0.0)


def layer_forward(sh, b, T, tp, p, peak, bw, sf, wf, xp, ep=1.0, peak_attn=None):
    """(compute-bound s, memory-bound s, attention-core s) of one layer's forward on one device;
    peak: the GEMMs' (gemm_peak), peak_attn: the attention core's (attn_peak; default peak); a MoE
    model: its MLP part per layer on average (moe.mlp_forward, ep the expert parallelism)."""
    n = b * T
    comp = xp.zeros_like(n)
    mem = xp.zeros_like(n)
    for N, K, split_n in sh.gemms:
        Nn, Kk = (N / tp, K) if split_n else (N, K / tp)
        c, m = _roof(2.0 * n * Nn * Kk * sf, (n * Kk + Kk * Nn * wf + n * Nn) * sh.s, peak,
                     gemm_efficiency(n, Nn, Kk, p, xp), bw, xp)
        comp, mem = comp + c, mem + m
    # attention core over the full T x T square (as Megatron Eq. 3 counts it), fused (FlashAttention)
    heads = sh.h / tp
    c, m = _roof(4.0 * b * heads * T * T * sh.hd, (n * (sh.d + 2 * sh.kvd) + n * sh.d) * sh.s / tp,
                 peak_attn or peak, gemm_efficiency(T, T, sh.hd, p, xp), bw, xp)
    # an unfused attention (no FlashAttention) also writes and reads the T x T scores in memory
    # attn_score_passes times per forward (params.PARAMS; 0 when fused; backward: micro_times)
    m = m + p.get("attn_score_passes", 0.0) * score_bytes(sh, b, T, tp) / bw
    attn = c + m
    comp, mem = comp + c, mem + m
    if sh.moe is not None:
        c, m = mlp_forward(sh, n, tp, ep, p, peak, bw, xp)
        comp, mem = comp + c, mem + m
    # element-wise work: inside the TP regions split over the group; the norms and residual adds on
    # the hidden state split only with sequence parallelism (else every TP rank repeats them)
    sp = p.get("sequence_parallel", 1.0)
    ew = (sh.ew_bytes_tok - sh.ew_rep_bytes_tok) / tp + sh.ew_rep_bytes_tok * (sp / tp + 1.0 - sp)
    mem = mem + n * ew / bw + p["layer_overhead_s"]
    return comp, mem, attn


def score_bytes(sh, b, T, tp):
    """Bytes of one pass over the T x T attention scores of a micro-batch on one device."""
    return b * (sh.h / tp) * T * T * sh.s


def head_forward(sh, b, T, tp, p, peak, bw, xp):
    n = b * T
    comp = xp.zeros_like(n)
    mem = n * sh.outer_bytes_tok / bw
    for (N, K), M in [(g, n) for g in sh.head_tok] + [(g, b) for g in sh.head_seq]:
        Nn = N / tp
        c, m = _roof(2.0 * M * Nn * K, (M * K + K * Nn + M * Nn) * sh.s, peak,
                     gemm_efficiency(M, Nn, K, p, xp), bw, xp)
        comp, mem = comp + c, mem + m
    return comp, mem


def ring(nbytes, group, bw, lat, net, xp):
    """All-reduce time, the faster of a ring (2(g-1)/g x bytes at the link bandwidth x efficiency,
    2(g-1) latency hops) and a one-shot all-reduce (each device reads the g-1 peers' buffers over
    its links at once: (g-1) x bytes, 2 latency hops), which small messages use inside a node:
    NCCL's LL protocols, vLLM's and TensorRT-LLM's custom one-shot all-reduce for decode."""
    g = xp.maximum(group, 1.0)
    ring_s = 2.0 * (g - 1) / g * nbytes / (bw * net) + 2.0 * (g - 1) * lat
    one_s = (g - 1) * nbytes / (bw * net) + 2.0 * lat
    return xp.where(g > 1, xp.minimum(ring_s, one_s), 0.0)


def micro_times(sh, g: Grid, hw, p, peak, bw, sf, wf, xp, peak_attn=None) -> Micro:
    """One micro-batch on one pipeline stage: roofline per op, recompute, TP and PP traffic.
    peak: the linear GEMMs' peak; peak_attn: attention core and LM head (default: peak)."""
    L, PP, TP, b, T = sh.L, g.pp, g.tp, g.micro_batch, g.seq
    lc, lm, la = layer_forward(sh, b, T, TP, p, peak, bw, sf, wf, xp, g.ep, peak_attn)
    hc, hm = head_forward(sh, b, T, TP, p, peak_attn or peak, bw, xp)
    fwd_c, fwd_m = (L * lc + hc) / PP, (L * lm + hm) / PP
    full, sel = g.recompute == FULL, g.recompute == SELECTIVE
    # backward = 2 x forward; full recompute reruns every layer's forward, selective the attention core
    comp = 3.0 * fwd_c + full * (L * lc / PP) + sel * (L * la / PP)
    mem = 3.0 * fwd_m + full * (L * lm / PP)
    # unfused attention: its backward passes over the scores attn_score_passes_bwd times, not the
    # 2 x forward the line above assumes (frameworks.py counts both)
    fs, bs = p.get("attn_score_passes", 0.0), p.get("attn_score_passes_bwd", 0.0)
    mem = mem + L / PP * (bs - 2.0 * fs) * score_bytes(sh, b, T, TP) / bw
    lk = links(hw, g.devices, xp)
    act_bytes = b * T * sh.d * sh.s
    n_ar = 4.0 + 2.0 * full  # Megatron: 2 all-reduces forward, 2 backward per layer
    tp_s = L / PP * n_ar * ring(act_bytes, TP, lk.intra_bytes_per_s, lk.latency_s, p["network"], xp)
    # overlapped (Megatron-Core --tp-comm-overlap): what the GEMMs' time does not cover stays exposed
    tp_s = xp.maximum(0.0, tp_s - p.get("tp_comm_overlap", 0.0) * comp)
    pp_s = xp.where(PP > 1, 2.0 * act_bytes / TP / (lk.span_bytes_per_s * p["network"]) + 2 * lk.latency_s, 0.0)
    return Micro(compute_s=comp, memory_s=mem, fwd_s=fwd_c + fwd_m, bwd_s=2.0 * (fwd_c + fwd_m),
                 tp_s=tp_s, pp_s=pp_s, ep_s=ep_time_s(sh, g, hw, p, xp))


def resident_step(sh, g: Grid, mi: Micro, hw, p, bw, xp, act_off=0.0) -> Step:
    """Weights on the device: pipeline (1F1B bubble), gradient all-reduce overlapped with the last
    backward, ZeRO-3 weight gathers, optimizer on the device or (offload) in the lower tier.
    act_off: saved-activation bytes a micro-batch offloads to the host (footprint.offloaded_per_micro):
    down over the link during its forward, up during its backward, each hidden under that pass."""
    m, dp, shard = g.micro_steps, g.dp, params_per_device(sh, g)
    lk = links(hw, g.devices, xp)
    t_micro = mi.total_s
    gs = 4.0 if sh.s >= 4 else sh.s
    bubble = (g.pp - 1) * t_micro
    t_ar = ring(shard * gs, dp, lk.span_bytes_per_s, lk.latency_s, p["network"], xp)
    exposed_dp = xp.maximum(0.0, t_ar - p["overlap"] * mi.bwd_s)
    # ZeRO-3: all-gather the weights in forward and backward, (g-1)/g each = one ring volume
    t_z3 = xp.where(g.zero >= 3, m * ring(shard * sh.s, dp, lk.span_bytes_per_s, lk.latency_s,
                                          p["network"], xp), 0.0)
    per_dev = shard / xp.where(g.zero >= 1, dp, 1.0)
    t_opt, t_moved, exp_moved = _optimizer(sh, g, mi, hw, p, bw, per_dev, xp)
    hier = hierarchy(hw)
    if hier.weights_from_resident:  # RDU: weights in from DDR per micro-batch (fwd, bwd), gradients out
        fetch = 3.0 * shard * sh.s / (hier.link_bytes_per_s * p["stream"])
        t_moved, exp_moved = t_moved + m * fetch, exp_moved + m * xp.maximum(0.0, fetch - t_micro)
    if hier.store is not None:
        way = act_off / (hier.link_bytes_per_s * p["stream"])
        t_moved = t_moved + m * 2.0 * way
        exp_moved = exp_moved + m * (xp.maximum(0.0, way - mi.fwd_s) + xp.maximum(0.0, way - mi.bwd_s))
    comm = m * (mi.tp_s + mi.pp_s + mi.ep_s)
    return Step(step_time_s=(m + g.pp - 1) * t_micro + exposed_dp + t_z3 + t_opt + exp_moved
                + p["step_overhead_s"],
                network_s=comm + t_ar + t_z3, exposed_s=comm + exposed_dp + t_z3 + bubble + exp_moved,
                network_exposed_s=comm + exposed_dp + t_z3, stream_s=t_moved,
                stream_exposed_s=exp_moved, optimizer_s=t_opt)


def _optimizer(sh, g: Grid, mi: Micro, hw, p, bw, params_per_dev, xp):
    """(optimizer time, offload transfer time, its exposed part) of a resident step.

    On the device: Adam's 28 bytes per parameter at the working memory's bandwidth (on an RDU the
    state lives in DDR: memory.hierarchy). Offloaded to a host (ZeRO-Offload, arXiv:2101.06840):
    gradients go down the link during the backward, the optimizer runs beside the store (prior: 4x
    the link, as MemoryX), updated weights come back up; only the downward copy overlaps the
    backward. Offloaded on an IPU (optimizer_state_offchip): the device updates, streaming the
    state in and out over the link."""
    hier = hierarchy(hw)
    on_dev = params_per_dev * OPT_BYTES_PER_PARAM / (hier.state_bytes_per_s * p["memory"]
                                                     if hier.state_bytes_per_s else bw)
    off = g.offload == OFF_OPTIMIZER
    if not (off if is_scalar(xp) else off.any()):
        return on_dev, 0.0, 0.0
    link = hier.link_bytes_per_s * p["stream"]
    if hier.offload_on_device:
        return xp.where(off, params_per_dev * OPT_BYTES_PER_PARAM / link, on_dev), 0.0, 0.0
    host = p["optimizer_bytes_per_s"] or 4.0 * hier.link_bytes_per_s
    moved = 2.0 * params_per_dev * sh.s / link  # gradients down, weights up
    exposed = xp.maximum(0.0, moved / 2 - p["overlap"] * mi.bwd_s) + moved / 2
    t_host = params_per_dev * OPT_BYTES_PER_PARAM / host
    return xp.where(off, t_host, on_dev), off * moved, off * exposed


def streaming_step(sh, g: Grid, mi: Micro, hw, p, bw, wf, xp) -> Step:
    """Weights stream from the store per micro-batch (MemoryX/SwarmX); see docs/predict.md.
    wf: byte factor of the dense-layer weights (sparse weights stream compressed)."""
    m, hier = g.micro_steps, hierarchy(hw)
    P = float(sh.params)
    kept = sh.kept_params(wf)  # parameters a sparse store keeps (the dense layers at wf)
    W = kept * sh.s  # weight bytes (sparse: compressed)
    link = hier.link_bytes_per_s * p["stream"]
    t_stream = 3.0 * W / link  # weights in (fwd, bwd), gradients out
    # coarse-grained pipelining: layer i+1 streams while layer i computes. When the link is the
    # device's own memory (a CPU copying from a DRAM store), only compute-bound time hides it
    shared = hier.store_is_device
    exp_stream = xp.maximum(0.0, t_stream - (mi.compute_s if shared else mi.total_s)) + t_stream / sh.L
    lat = links(hw, g.devices, xp).latency_s
    depth = swarm_depth(g.devices, hier.fanout, xp)  # SwarmX tree: broadcast and reduce fill/drain
    t_swarm = 2.0 * depth * (W / sh.L / link + lat)
    # the optimizer runs where the weights live: MemoryX (prior 4x its link), or the device's own
    # memory when streaming from it; its updates overlap the next forward (fine-grained). Where the
    # hardware skips zero weights it updates the non-zero ones only ("for all zero weights, no
    # computation or memory is required": Cerebras docs, 'Sparsity'; seed 002 Sec. V-B4, "fewer
    # parameters updated in each optimizer step"; seed 001, sparsity lightens the optimization)
    opt_bw = p["optimizer_bytes_per_s"] or (bw if shared else 4.0 * hier.link_bytes_per_s)
    t_opt = (kept if hw.skips_zero_weights else P) * OPT_BYTES_PER_PARAM / opt_bw
    exposed_opt = xp.maximum(0.0, t_opt - mi.fwd_s)
    return Step(step_time_s=m * (mi.total_s + exp_stream) + t_swarm + exposed_opt + p["step_overhead_s"],
                network_s=t_swarm, exposed_s=m * exp_stream + t_swarm + exposed_opt,
                network_exposed_s=t_swarm, stream_s=m * t_stream, stream_exposed_s=m * exp_stream,
                optimizer_s=t_opt)


def _step(sh, g: Grid, mi: Micro, hw, p, bw, wf, xp, act_off=0.0) -> Step:
    """The streaming step where the grid streams weights, the resident step elsewhere (each
    computed only when some configuration needs it)."""
    st = g.streaming
    if is_scalar(xp) or not st.any() or st.all():
        stream = bool(st) if is_scalar(xp) else bool(st.all())
        return (streaming_step(sh, g, mi, hw, p, bw, wf, xp) if stream
                else resident_step(sh, g, mi, hw, p, bw, xp, act_off))
    a, b = streaming_step(sh, g, mi, hw, p, bw, wf, xp), resident_step(sh, g, mi, hw, p, bw, xp, act_off)
    return Step(**{k: xp.where(st, getattr(a, k), getattr(b, k)) for k in Step.__dataclass_fields__})


@lru_cache(maxsize=512)
def flops_per_seq(spec, T: int) -> tuple[float, float, float]:
    """(model, selective recompute, full recompute) training FLOPs of one sequence of T tokens."""
    f = {rc: training_flops(spec, 1, T, rc) for rc in ("none", "selective", "full")}
    return f["none"]["model"], f["selective"]["recompute"], f["full"]["recompute"]


def per_seq(fn, T, xp):
    """fn(int T) -> tuple of floats, applied per unique T (arrays: gathered back)."""
    if is_scalar(xp):
        return fn(int(T))
    Tu, inv = xp.unique(xp.asarray(T, dtype=int), return_inverse=True)
    table = xp.array([fn(int(t)) for t in Tu])
    idx = inv.reshape(xp.shape(T))
    return tuple(table[idx, j] for j in range(table.shape[1]))


def step_arrays(spec, hw, precision: str, g: Grid, p: dict, xp, runtime: str | None = None) -> StepArrays:
    """Every term of one training step for each configuration of the grid; memory as `runtime`
    holds it (a footprint.STATE name; None: the hardware's stack)."""
    sh = shape(spec, precision)
    vals = xp.broadcast_arrays(*(xp.asarray(getattr(g, k), dtype=float) for k in Grid.__dataclass_fields__))
    g = Grid(**dict(zip(Grid.__dataclass_fields__, vals)))
    peak = peak_flops(hw, precision)
    bw = hierarchy(hw).working_bytes_per_s * p["memory"]
    sf, wf = sparse_factors(hw, g.sparsity, p, peak, precision, xp)
    mi = micro_times(sh, g, hw, p, gemm_peak(hw, precision, p), bw, sf, wf, xp, attn_peak(hw, precision))
    acts = per_seq(lambda t: act_per_seq(spec, t, precision), g.seq, xp)
    step = _step(sh, g, mi, hw, p, bw, wf, xp, offloaded_per_micro(spec.n_layers, g, acts, xp))
    model, re_sel, re_full = per_seq(lambda t: flops_per_seq(spec, t), g.seq, xp)
    full, sel = g.recompute == FULL, g.recompute == SELECTIVE
    hw_fl = model + sel * re_sel + full * re_full
    # FLOPs executed: zero weights skipped (wafer) or 2:4 halves (GPU) leave out that share of the
    # dense-layer GEMMs (fwd + bwd + full recompute); model FLOPs stay dense-equivalent
    S = g.sparsity
    skipped = (S if hw.skips_zero_weights else xp.where(S >= 0.5, 0.5, 0.0) if hw.structured_sparsity else 0.0)
    hw_fl = hw_fl - skipped * 2.0 * g.seq * sh.dense_params * (3.0 + 1.0 * full)
    mem = memory_use(spec, sh, precision, hw, g, acts, xp, runtime, p.get("loss_bytes_per_logit") or None)
    # a layout runs only under the memory reserve (reserve.py; --memory-fraction)
    mem = replace(mem, fits=mem.fits & (mem.peak_mem_bytes <= usable_bytes(hw, p.get("memory_fraction"))))
    m = g.micro_steps
    return StepArrays(grid=g, micro=mi, step=step, micro_steps=m, compute_s=m * mi.compute_s,
                      memory_s=m * mi.memory_s, model_flops=model * g.batch, hw_flops=hw_fl * g.batch,
                      peak_flops=peak, memory=mem)


def sweep_metrics(r, xp) -> dict:
    """The dict of arrays a sweep returns, from step_arrays' output."""
    st, mem, mi = r.step, r.memory, r.micro
    g_batch, g_seq, g_dev = r.grid.batch, r.grid.seq, r.grid.devices
    step = st.step_time_s
    out = {"step_time_s": step, "tokens_per_s": g_batch * g_seq / step, "samples_per_s": g_batch / step,
           "achieved_tflops": r.model_flops / step / g_dev / 1e12,
           "executed_tflops": r.hw_flops / step / g_dev / 1e12,
           "mfu": r.model_flops / step / g_dev / r.peak_flops,
           "compute": r.compute_s, "memory": r.memory_s, "network": st.network_s,
           "network_exposed": st.network_exposed_s, "stream": st.stream_s, "stream_exposed": st.stream_exposed_s,
           "optimizer": st.optimizer_s, "exposed": st.exposed_s, "micro_batches": r.micro_steps,
           "micro_batch": r.grid.micro_batch, "model_flops": r.model_flops, "hw_flops": r.hw_flops,
           "peak": r.peak_flops, "fits": mem.fits, "peak_mem_bytes": mem.peak_mem_bytes,
           "weights_bytes": mem.weights_bytes, "grads_bytes": mem.grads_bytes,
           "optimizer_bytes": mem.optimizer_bytes, "activations_bytes": mem.activations_bytes,
           "t_micro": mi.total_s}
    if is_scalar(xp):
        return out
    shape = xp.shape(g_batch)
    return {k: v if xp.shape(v) == shape else xp.array(xp.broadcast_to(v, shape)) for k, v in out.items()}


# ---------------------------------------------------------------- keyword callers (until they move)
