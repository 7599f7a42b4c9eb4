"""Training-step model: roofline per op, recompute, TP/PP/DP, ZeRO, GAS, weight streaming, sparsity.

    from llmbench.perfmodel import predict_train, sweep_train
    predict_train(get_model("gpt2-xl"), get_hardware("a100-40gb"), batch=64, seq=1024, devices=8)

One vectorised core (`train_arrays`) serves a single prediction (arrays of length 1) and a sweep
of many configurations; docs/predict.md gives every equation and its source.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from types import SimpleNamespace

from llmbench.models.counting import RECOMPUTE, activation_bytes_per_layer, dtype_bytes, training_flops

from . import _xp
from ._xp import np
from .params import gemm_efficiency, resolve_params
from .shapes import shape

MODES = ("auto", "resident", "weight_streaming")
OPT_BYTES_PER_PARAM = 28.0  # Adam: read grad, master, m, v (2+4+4+4); write master, m, v, weight (4+4+4+2)


@dataclass(frozen=True)
class TrainPrediction:
    step_time_s: float
    tokens_per_s: float
    samples_per_s: float
    achieved_tflops: float
    """model FLOPs (fwd + bwd, no recompute) per second per device, in TFLOP/s"""
    executed_tflops: float
    """FLOPs executed (with recompute) per second per device"""
    mfu: float | None
    bound: str
    mode: str
    devices: int
    peak_mem_bytes: float
    fits: bool
    breakdown_s: dict
    """seconds per term: compute, memory, network, stream, optimizer, exposed"""

    def to_dict(self) -> dict:
        return asdict(self)


def peak_flops(hw, precision: str) -> float:
    pk = hw.peak(precision)
    if not pk:
        have = ", ".join(hw.peak_flops) or "none"
        raise ValueError(f"{hw.name} has no {precision} peak in its catalog entry (has: {have}); "
                         "choose another --precision")
    return pk


def stream_link_bytes_per_s(hw) -> float:
    """The link weights stream over: the external tier (MemoryX), else the tier just below device
    memory (host DRAM over PCIe), else (a CPU) the device tier's own copy bandwidth."""
    ext = hw.tier("external")
    if ext is not None:
        return ext.bandwidth_bytes_per_s
    tiers = list(hw.memory_tiers)
    i = tiers.index(hw.device_memory)
    if i + 1 < len(tiers):
        return tiers[i + 1].bandwidth_bytes_per_s
    return hw.device_memory.bandwidth_bytes_per_s


def stream_shares_device_memory(hw) -> bool:
    """True when weights stream over the device's own memory (no tier below it: a CPU)."""
    return hw.tier("external") is None and list(hw.memory_tiers).index(hw.device_memory) == len(hw.memory_tiers) - 1


def _links(hw, devices):
    """(intra-node bandwidth, bandwidth of a group spanning `devices`, latency) per device."""
    ic = hw.interconnect
    if ic is None:  # no fabric: go through host memory
        bw = stream_link_bytes_per_s(hw)
        return bw, np.full_like(devices, bw, dtype=float), 10e-6
    # NCCL-style rings cross each node once per channel: a group spanning nodes runs at the node's
    # aggregate NIC bandwidth (per-device NIC x devices per node), capped by the intra-node link
    dpn = max(ic.devices_per_node, 1)
    inter = min((ic.inter_node_bandwidth_bytes_per_s or ic.bandwidth_bytes_per_s) * dpn,
                ic.bandwidth_bytes_per_s)
    span = np.where(devices > dpn, inter, ic.bandwidth_bytes_per_s)
    return ic.bandwidth_bytes_per_s, span, ic.latency_s


def _sparse_factors(hw, sparsity, p, peak, precision):
    """(time factor of dense-layer GEMMs, byte factor of dense-layer weights)."""
    s = np.asarray(sparsity, dtype=float)
    if hw.skips_zero_weights:  # dataflow cores skip zero weights; they are never streamed either
        f = 1.0 - p["sparse"] * s
        return f, f
    sp = hw.peak_flops_sparse.get("bf16" if precision == "cbf16" else precision)
    if hw.structured_sparsity and sp:  # 2:4 at the datasheet's sparse rate, only at s >= 0.5
        return np.where(s >= 0.5, peak / sp, 1.0), np.where(s >= 0.5, 0.5 + 1 / 16, 1.0)
    return np.ones_like(s), np.ones_like(s)


def _roof(flops, nbytes, peak, eff, bw):
    tc = flops / (peak * eff)
    tm = nbytes / bw
    return np.where(tc >= tm, tc, 0.0), np.where(tc < tm, tm, 0.0)


def layer_forward(sh, b, T, tp, p, peak, bw, sf, wf):
    """(compute-bound s, memory-bound s, attention-core s) of one layer's forward on one device."""
    n = b * T
    comp = np.zeros_like(n)
    mem = np.zeros_like(n)
    for N, K, split_n in sh.gemms:
        Nn, Kk = (N / tp, K) if split_n else (N, K / tp)
        c, m = _roof(2.0 * n * Nn * Kk * sf, (n * Kk + Kk * Nn * wf + n * Nn) * sh.s, peak,
                     gemm_efficiency(n, Nn, Kk, p), bw)
        comp, mem = comp + c, mem + m
    # attention core over the full T x T square (as Megatron Eq. 3 counts it), fused (FlashAttention)
    heads = sh.h / tp
    c, m = _roof(4.0 * b * heads * T * T * sh.hd, (n * (sh.d + 2 * sh.kvd) + n * sh.d) * sh.s / tp,
                 peak, gemm_efficiency(T, T, sh.hd, p), bw)
    attn = c + m
    comp, mem = comp + c, mem + m
    mem = mem + n * sh.ew_bytes_tok / tp / bw + p["layer_overhead_s"]
    return comp, mem, attn


def head_forward(sh, b, T, tp, p, peak, bw):
    n = b * T
    comp = np.zeros_like(n)
    mem = n * sh.outer_bytes_tok / bw
    for (N, K), M in [(g, n) for g in sh.head_tok] + [(g, b) for g in sh.head_seq]:
        Nn = N / tp
        c, m = _roof(2.0 * M * Nn * K, (M * K + K * Nn + M * Nn) * sh.s, peak,
                     gemm_efficiency(M, Nn, K, p), bw)
        comp, mem = comp + c, mem + m
    return comp, mem


def _ring(nbytes, group, bw, lat, net):
    g = np.maximum(group, 1.0)
    return np.where(g > 1, 2.0 * (g - 1) / g * nbytes / (bw * net) + 2.0 * (g - 1) * lat, 0.0)


def train_arrays(spec, hw, *, batch, seq, devices=1, precision="bf16", grad_accum=1, tp=1, pp=1,
                 recompute="none", sparsity=0.0, mode="resident", zero=0, params=None) -> dict:
    """Vectorised step model: every numeric argument may be a numpy array (broadcast together).

    Returns arrays: step_time_s, compute, memory, network, stream, stream_exposed, optimizer,
    exposed, network_exposed, peak_mem_bytes, fits, model_flops, hw_flops, micro_batch,
    micro_batches, peak.
    """
    _xp.use_for(batch, seq, devices, grad_accum, tp, pp, sparsity)
    p = params if params is not None else resolve_params(hw)
    sh = shape(spec, precision)
    B, T, D, G, TP, PP, S = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in
                                                  (batch, seq, devices, grad_accum, tp, pp, sparsity)))
    c = SimpleNamespace(sh=sh, p=p, hw=hw, peak=peak_flops(hw, precision), T=T, D=D, TP=TP, PP=PP,
                        bw=hw.device_memory.bandwidth_bytes_per_s * p["memory"], dp=D / (TP * PP))
    # Megatron practice: with pipelining and no GAS given, micro-batch 1 (m = batch / dp)
    c.m = np.where((PP > 1) & (G == 1), np.maximum(B / c.dp, 1.0), G)
    c.b = B / (c.dp * c.m)
    c.sf, c.wf = _sparse_factors(hw, S, p, c.peak, precision)
    _micro_batch(c, recompute)
    streaming = mode == "weight_streaming"
    out = _streaming_step(c) if streaming else _resident_step(c, zero)

    model_fl, hw_fl = _flops(spec, T, recompute)
    # FLOPs executed: zero weights skipped (wafer) or 2:4 halves (GPU) leave out that share of the
    # dense-layer GEMMs (fwd + bwd + full recompute); model FLOPs stay dense-equivalent
    skipped = (S if hw.skips_zero_weights else np.where(S >= 0.5, 0.5, 0.0) if hw.structured_sparsity
               else 0.0)
    hw_fl = hw_fl - skipped * 2.0 * T * sh.dense_params * (3.0 + (1.0 if recompute == "full" else 0.0))
    mem_dev = memory_per_device(spec, hw, c.b, T, c.m, TP, PP, c.dp, precision, recompute, zero, streaming)
    out.update(compute=c.m * c.comp, memory=c.m * c.mem, peak_mem_bytes=mem_dev,
               fits=mem_dev <= _capacity(hw, streaming, float(sh.params)), model_flops=model_fl * B,
               hw_flops=hw_fl * B, micro_batch=c.b, micro_batches=c.m, peak=c.peak)
    return out


def _micro_batch(c, recompute) -> None:
    """Times of one micro-batch on one pipeline stage: compute-bound (c.comp), memory-bound
    (c.mem), forward (c.fwd), backward (c.bwd), TP and PP communication, their sum (c.t_micro)."""
    sh, p, L = c.sh, c.p, c.sh.L
    lc, lm, la = layer_forward(sh, c.b, c.T, c.TP, p, c.peak, c.bw, c.sf, c.wf)
    hc, hm = head_forward(sh, c.b, c.T, c.TP, p, c.peak, c.bw)
    fwd_c, fwd_m = (L * lc + hc) / c.PP, (L * lm + hm) / c.PP
    c.comp, c.mem = 3.0 * fwd_c, 3.0 * fwd_m  # backward = 2 x forward
    if recompute == "full":
        c.comp, c.mem = c.comp + L * lc / c.PP, c.mem + L * lm / c.PP
    elif recompute == "selective":
        c.comp = c.comp + L * la / c.PP
    c.fwd, c.bwd = fwd_c + fwd_m, 2.0 * (fwd_c + fwd_m)
    c.intra, c.span_bw, c.lat = _links(c.hw, c.D)
    act_bytes = c.b * c.T * sh.d * sh.s
    n_ar = 4 + (2 if recompute == "full" else 0)  # Megatron: 2 all-reduces fwd, 2 bwd per layer
    c.t_tp = L / c.PP * n_ar * _ring(act_bytes, c.TP, c.intra, c.lat, p["network"])
    c.t_pp = np.where(c.PP > 1, 2.0 * act_bytes / c.TP / (c.span_bw * p["network"]) + 2 * c.lat, 0.0)
    c.t_micro = c.comp + c.mem + c.t_tp + c.t_pp


def _resident_step(c, zero) -> dict:
    """Weights on the device: pipeline, gradient all-reduce overlapped with the last backward,
    ZeRO-3 weight gathers, optimizer on the device."""
    sh, p, m = c.sh, c.p, c.m
    P = float(sh.params)
    gs = 4.0 if sh.s >= 4 else sh.s
    bubble = (c.PP - 1) * c.t_micro
    t_ar = _ring(P / (c.TP * c.PP) * gs, c.dp, c.span_bw, c.lat, p["network"])
    exposed_dp = np.maximum(0.0, t_ar - p["overlap"] * c.bwd)
    # ZeRO-3: all-gather the weights in forward and backward, (g-1)/g each = one ring volume
    t_z3 = m * _ring(P / (c.TP * c.PP) * sh.s, c.dp, c.span_bw, c.lat, p["network"]) if zero >= 3 else 0.0
    t_opt = P / (c.TP * c.PP) / (c.dp if zero >= 1 else 1.0) * OPT_BYTES_PER_PARAM / c.bw
    comm = m * (c.t_tp + c.t_pp)
    zero_t = np.zeros_like(c.b)
    return {"step_time_s": (m + c.PP - 1) * c.t_micro + exposed_dp + t_z3 + t_opt + p["step_overhead_s"],
            "network": comm + t_ar + t_z3, "exposed": comm + exposed_dp + t_z3 + bubble,
            "network_exposed": comm + exposed_dp + t_z3, "stream": zero_t, "stream_exposed": zero_t,
            "optimizer": t_opt}


def _streaming_step(c) -> dict:
    """Weights stream from the store per micro-batch (MemoryX/SwarmX); see docs/predict.md."""
    sh, p, m, hw = c.sh, c.p, c.m, c.hw
    P = float(sh.params)
    W = (sh.dense_params * c.wf + (P - sh.dense_params)) * sh.s  # weight bytes (sparse: compressed)
    link = stream_link_bytes_per_s(hw) * p["stream"]
    t_stream = 3.0 * W / link  # weights in (fwd, bwd), gradients out
    # coarse-grained pipelining: layer i+1 streams while layer i computes. When the link is the
    # device's own memory (a CPU copying from a DRAM store), only compute-bound time hides it
    shared = stream_shares_device_memory(hw)
    exp_stream = np.maximum(0.0, t_stream - (c.comp if shared else c.t_micro)) + t_stream / sh.L
    depth = np.ceil(np.log2(np.maximum(c.D, 1.0)))  # SwarmX tree: broadcast and reduce fill/drain
    t_swarm = np.where(c.D > 1, 2.0 * depth * (W / sh.L / link + c.lat), 0.0)
    # the optimizer runs where the weights live: MemoryX (prior 4x its link), or the device's own
    # memory when streaming from it; its updates overlap the next forward (fine-grained)
    opt_bw = p["optimizer_bytes_per_s"] or (c.bw if shared else 4.0 * stream_link_bytes_per_s(hw))
    t_opt = P * OPT_BYTES_PER_PARAM / opt_bw
    exposed_opt = np.maximum(0.0, t_opt - c.fwd)
    return {"step_time_s": m * (c.t_micro + exp_stream) + t_swarm + exposed_opt + p["step_overhead_s"],
            "network": t_swarm, "exposed": m * exp_stream + t_swarm + exposed_opt, "network_exposed": t_swarm,
            "stream": m * t_stream, "stream_exposed": m * exp_stream, "optimizer": t_opt}


def _flops(spec, T, recompute):
    """(model, hardware) training FLOPs per sequence, from models/counting (linear in batch)."""
    if _xp.is_scalar():
        f = training_flops(spec, 1, int(T), recompute)
        return f["model"], f["hardware"]
    Tu, inv = np.unique(np.asarray(T, dtype=int), return_inverse=True)
    out = np.array([[training_flops(spec, 1, int(t), recompute)[k] for k in ("model", "hardware")]
                    for t in Tu])
    return out[inv.reshape(np.shape(T)), 0], out[inv.reshape(np.shape(T)), 1]


def _act_per_seq(spec, T, precision, recompute):
    if _xp.is_scalar():
        return activation_bytes_per_layer(spec, 1, int(T), precision, recompute)
    Tu, inv = np.unique(np.asarray(T, dtype=int), return_inverse=True)
    v = np.array([activation_bytes_per_layer(spec, 1, int(t), precision, recompute) for t in Tu])
    return v[inv.reshape(np.shape(T))]


def memory_per_device(spec, hw, b, T, m, TP, PP, dp, precision, recompute, zero, streaming):
    """Model state (ZeRO arXiv:1910.02054 Sec. 3.1, partitioned by stage) + activations (1F1B:
    the first stage keeps min(m, pp) micro-batches in flight) + fp32 logits."""
    sh = shape(spec, precision)
    P = float(sh.params)
    act_layer = b * _act_per_seq(spec, T, precision, recompute) / TP
    if streaming:  # weights live off-device; two layers' weights double-buffered
        return spec.n_layers * act_layer + 2.0 * sh.layer_params * sh.s
    s = sh.s
    w, g = s * P, (4.0 if s >= 4 else s) * P
    opt = (8.0 + (0.0 if s >= 4 else 4.0)) * P
    state = (w / (dp if zero >= 3 else 1.0) + g / (dp if zero >= 2 else 1.0)
             + opt / (dp if zero >= 1 else 1.0)) / (TP * PP)
    inflight = np.minimum(m, PP)
    act = spec.n_layers / PP * act_layer * inflight
    if recompute == "full":  # one layer rebuilt in full during its backward
        act = act + b * _act_per_seq(spec, T, precision, "none") / TP
    logits = b * T * spec.vocab_size * 4.0 / TP if spec.head == "lm" else 0.0
    return state + act + logits


def _capacity(hw, streaming, P):
    if streaming:  # fits when the stream tier holds weights + optimizer state (activations: see docs)
        ext = hw.tier("external") or hw.memory_tiers[-1]
        return np.inf if ext.capacity_bytes >= 16.0 * P else -1.0
    return hw.device_memory.capacity_bytes


def check_train_args(spec, hw, *, batch, seq, devices, precision, grad_accum, tp, pp, recompute,
                     sparsity, mode, zero) -> str:
    """Validate one configuration; returns the resolved mode. Raises ValueError (one line)."""
    dtype_bytes(precision)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    for name, v in (("batch", batch), ("seq", seq), ("devices", devices), ("grad-accum", grad_accum),
                    ("tp", tp), ("pp", pp)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {zero}")
    if seq > spec.max_seq_len and spec.position == "learned":
        raise ValueError(f"seq {seq} exceeds {spec.name}'s {spec.max_seq_len} learned positions")
    if devices % (tp * pp):
        raise ValueError(f"devices ({devices}) must be a multiple of tp x pp ({tp * pp})")
    dp = devices // (tp * pp)
    if batch % (dp * grad_accum):
        raise ValueError(f"batch {batch} must divide into {dp} replicas x {grad_accum} micro-batches")
    if spec.n_heads % tp:
        raise ValueError(f"tp {tp} must divide {spec.name}'s {spec.n_heads} heads")
    if pp > spec.n_layers:
        raise ValueError(f"pp {pp} exceeds {spec.name}'s {spec.n_layers} layers")
    if spec.n_layers % pp:
        from llmbench.errors import BadInput

        # the step model gives every stage n_layers / pp layers (_micro_batch): with uneven stages
        # the slowest stage, ceil(n_layers / pp) layers, sets the pace, which it does not model
        below = max(d for d in range(1, pp) if spec.n_layers % d == 0)
        above = [d for d in range(pp + 1, spec.n_layers + 1) if spec.n_layers % d == 0][:1]
        near = " or ".join(str(d) for d in [below] + above)
        raise BadInput(f"pp {pp} does not split {spec.name}'s {spec.n_layers} layers into equal "
                       f"pipeline stages; nearest valid pp: {near}")
    mode = hw.default_mode_train if mode == "auto" else mode
    if mode == "sram_pipeline":
        mode = "resident"
    if mode == "weight_streaming" and (tp > 1 or pp > 1):
        raise ValueError("weight_streaming runs data parallel only; use --tp 1 --pp 1")
    return mode


def predict_train(spec, hw, *, batch, seq, devices=1, precision="bf16", grad_accum=1, tp=1, pp=1,
                  recompute="none", sparsity=0.0, mode="auto", zero=0, params=None) -> TrainPrediction:
    """One training step of `batch` (global) sequences of `seq` tokens on `devices` devices."""
    mode = check_train_args(spec, hw, batch=batch, seq=seq, devices=devices, precision=precision,
                            grad_accum=grad_accum, tp=tp, pp=pp, recompute=recompute,
                            sparsity=sparsity, mode=mode, zero=zero)
    r = train_arrays(spec, hw, batch=batch, seq=seq, devices=devices, precision=precision,
                     grad_accum=grad_accum, tp=tp, pp=pp, recompute=recompute, sparsity=sparsity,
                     mode=mode, zero=zero, params=params)
    f = {k: float(v) for k, v in r.items()}
    step = f["step_time_s"]
    cands = {"compute": f["compute"], "memory": f["memory"],
             "network": f["network_exposed"], "stream": f["stream_exposed"]}
    return TrainPrediction(
        step_time_s=step, tokens_per_s=batch * seq / step, samples_per_s=batch / step,
        achieved_tflops=f["model_flops"] / step / devices / 1e12,
        executed_tflops=f["hw_flops"] / step / devices / 1e12,
        mfu=f["model_flops"] / step / devices / f["peak"], bound=max(cands, key=cands.get),
        mode=mode, devices=devices, peak_mem_bytes=f["peak_mem_bytes"],
        fits=bool(f["fits"]),
        breakdown_s={k: f[k] for k in ("compute", "memory", "network", "stream", "optimizer", "exposed")},
    )


def fit_advice(spec, hw, pred: TrainPrediction, **kw) -> str:
    """One line: the point does not fit, and what would."""
    cap = hw.device_memory.capacity_bytes
    need = pred.peak_mem_bytes
    tips = []
    if kw.get("recompute", "none") != "full":
        tips.append("--recompute full")
    if kw.get("zero", 0) < 3 and kw.get("mode") != "weight_streaming":
        tips.append("--zero 3")
    tips.append("a smaller batch or more --grad-accum")
    more = math.ceil(need / cap) * pred.devices
    return (f"{spec.name} does not fit on {hw.name}: needs {need / 1e9:,.1f} GB per device, has "
            f"{cap / 1e9:,.1f} GB; try {', '.join(tips)}, or about {more} devices with --tp/--pp")


def sweep_train(spec, hw, *, batch, seq, devices=1, precision="bf16", grad_accum=1, tp=1, pp=1,
                recompute="none", sparsity=0.0, mode="auto", zero=0, params=None) -> dict:
    """Vectorised predict_train over numpy arrays (no per-point validation): dict of arrays with
    step_time_s, tokens_per_s, samples_per_s, achieved_tflops, mfu, fits and the breakdown."""
    mode = hw.default_mode_train if mode == "auto" else mode
    r = train_arrays(spec, hw, batch=batch, seq=seq, devices=devices, precision=precision,
                     grad_accum=grad_accum, tp=tp, pp=pp, recompute=recompute, sparsity=sparsity,
                     mode=mode, zero=zero, params=params)
    B, T, D = np.broadcast_arrays(np.asarray(batch, dtype=float), np.asarray(seq, dtype=float),
                                  np.asarray(devices, dtype=float))
    step = r["step_time_s"]
    r["tokens_per_s"] = B * T / step
    r["samples_per_s"] = B / step
    r["achieved_tflops"] = r["model_flops"] / step / D / 1e12
    r["executed_tflops"] = r["hw_flops"] / step / D / 1e12
    r["mfu"] = r["model_flops"] / step / D / r["peak"]
    return r


def streaming_crossover_tokens(spec, hw, precision="bf16", seq=None, params=None) -> float:
    """Tokens per step above which weight streaming stops being exposed: the step's compute
    (fwd + bwd) equals the time to stream the weights in twice and the gradients out once.

    Searched over fractional batches of `seq`-token sequences (default min(max_seq_len, 1024)), so
    the answer may be below one sequence on slow compute (a CPU): then streaming is always hidden.
    """
    import numpy as np

    T = int(seq or min(spec.max_seq_len, 1024))
    batches = np.logspace(-4, 6, 2000)
    r = train_arrays(spec, hw, batch=batches, seq=T, precision=precision, mode="weight_streaming",
                     params=params)
    over = r["stream_exposed"] - r["stream"] / spec.n_layers  # exposed beyond pipeline fill
    hidden = np.nonzero(over <= 0)[0]
    if not len(hidden):
        return float("inf")
    i = hidden[0]
    if i == 0:
        return float(batches[0] * T)
    # linear interpolation of the exposed part between the last exposed and first hidden batch
    x0, x1, y0, y1 = batches[i - 1], batches[i], over[i - 1], over[i]
    return float((x0 + (x1 - x0) * y0 / (y0 - y1)) * T)


def streaming_ratio(spec, hw, *, batch, seq, precision="bf16", params=None) -> float:
    """Predicted step time streamed / resident on one device: what a streaming runtime measures
    side by side (1.0 = streaming fully hidden; it can dip below 1 because the streamed optimizer
    update overlaps the next forward while the resident one does not)."""
    kw = dict(batch=batch, seq=seq, precision=precision, params=params)
    s = train_arrays(spec, hw, mode="weight_streaming", **kw)["step_time_s"]
    r = train_arrays(spec, hw, mode="resident", **kw)["step_time_s"]
    return s / r
