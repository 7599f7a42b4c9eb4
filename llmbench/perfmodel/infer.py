"""Inference model: prefill (compute-bound), decode (weights + KV cache read per token), KV-cache
memory, BERT-style classification latency; modes resident and sram_pipeline (weights and KV cache
in on-chip SRAM, layers split over the fewest wafers that hold them).

    from llmbench.perfmodel.infer import predict_infer
    w = Workload(model="llama-3.1-8b", hardware="cs3", suite="infer", batch=1, seq_len=128, gen_len=256)
    predict_infer(w.spec(), get_hardware("cs3"), w)        # InferPrediction

`seq_len` is the prompt length. Runs on Python floats (xp = Scalar): no numpy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llmbench.errors import BadInput
from llmbench.models.counting import dtype_bytes, kv_cache_bytes_per_token
from llmbench.point import Workload

from ._xp import Scalar as xp
from .params import gemm_efficiency, resolve_params
from .shapes import shape
from .step import head_forward, layer_forward, peak_flops

MODES = ("auto", "resident", "sram_pipeline")
USABLE = 0.9  # share of device memory for weights + KV cache (the rest: activations, runtime)


@dataclass(frozen=True, kw_only=True)
class InferPrediction:
    """A served batch predicted: the workload as it runs (devices, layout) and its metrics, every
    name in llmbench.point.METRICS. to_dict() = {"workload": {...}, **metrics}."""

    workload: Workload
    """resolved: precision, devices and layout (tp, pp, mode) set"""
    time_to_first_token_s: float
    decode_tokens_per_s_per_seq: float
    tokens_per_s: float
    """generated tokens per second over the whole batch (encoders: input tokens per second)"""
    latency_s_p50: float
    """end-to-end: prefill + gen_len decode steps + request overhead"""
    bound: str
    kv_cache_bytes: float
    """KV cache of the whole batch (bytes)"""
    weights_bytes: float
    """weights per device"""
    peak_mem_bytes: float
    """weights + KV cache per device"""
    mode: str
    fits: bool
    max_batch_x_context: float | None
    """sram_pipeline: the most batch x context tokens whose KV cache fits next to the weights"""

    @property
    def devices(self) -> int:
        return self.workload.devices

    def metrics(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "workload"}

    def to_dict(self) -> dict:
        return {"workload": self.workload.to_dict(), **self.metrics()}


def _fewest_devices(need, cap, heads, limit=4096):
    n = 1
    while need / n > cap * USABLE:
        n *= 2
        if n > limit:
            raise ValueError(f"needs more than {limit} devices")
    while heads % n and n < limit:  # tensor parallel must split the heads
        n *= 2
    return n


def _decode_step(sh, batch, ctx, tp, p, peak, bw):
    """(time, compute part, memory part) of one generated token for `batch` sequences."""
    comp = mem = 0.0
    for N, K, split_n in sh.gemms:
        Nn, Kk = (N / tp, K) if split_n else (N, K / tp)
        tc = 2.0 * batch * Nn * Kk / (peak * gemm_efficiency(batch, Nn, Kk, p, xp))
        tm = (batch * Kk + Kk * Nn + batch * Nn) * sh.s / bw
        comp, mem = (comp + tc, mem) if tc >= tm else (comp, mem + tm)
    heads = sh.h / tp  # q . K^T and p . V over the cache
    tc = 4.0 * batch * heads * sh.hd * ctx / (peak * gemm_efficiency(1, ctx, sh.hd, p, xp))
    tm = batch * ctx * 2 * sh.kvd * sh.s / tp / bw
    comp, mem = (comp + tc, mem) if tc >= tm else (comp, mem + tm)
    mem += batch * sh.ew_bytes_tok / tp / bw + p["token_layer_latency_s"]
    hc, hm = head_forward(sh, float(batch), 1.0, tp, p, peak, bw, xp)
    return sh.L * comp + hc, sh.L * mem + hm


def _tp_allreduce(sh, tokens, tp, hw, p):
    if tp <= 1 or hw.interconnect is None:
        return 0.0
    ic = hw.interconnect
    size = tokens * sh.d * sh.s
    return sh.L * 2 * (2.0 * (tp - 1) / tp * size / (ic.bandwidth_bytes_per_s * p["network"])
                       + 2 * (tp - 1) * ic.latency_s)


def check_infer(spec, w: Workload) -> bool:
    """BadInput (one line) for a workload the model cannot serve; returns whether it is an encoder."""
    encoder = not spec.causal or spec.head != "lm"
    if encoder and w.gen_len:
        raise BadInput(f"{spec.name} is an encoder (head {spec.head}); use --gen-len 0")
    if w.seq_len + w.gen_len > spec.max_seq_len:
        raise BadInput(f"prompt + gen ({w.seq_len + w.gen_len}) exceeds {spec.name}'s "
                       f"{spec.max_seq_len} positions")
    return encoder


def predict_infer(spec, hw, w: Workload | None = None, params=None, **legacy) -> InferPrediction:
    """Serve `w.batch` requests of `w.seq_len` prompt tokens generating `w.gen_len` tokens each."""
    from llmbench.point import precision_for

    if w is None:
        w = legacy_infer_workload(spec, hw, **legacy)
    precision = w.precision or precision_for(hw)
    dtype_bytes(precision)
    w = w.with_(precision=precision)
    encoder = check_infer(spec, w)
    mode = w.layout.mode or hw.default_mode_infer
    if mode == "weight_streaming":
        mode = "resident"
    p = params if params is not None else resolve_params(hw)
    sh = shape(spec, precision)
    peak = peak_flops(hw, precision)
    W = sh.params * sh.s
    kv_tok = 0.0 if encoder else kv_cache_bytes_per_token(spec, precision)
    kv = kv_tok * w.batch * (w.seq_len + w.gen_len)
    if mode == "sram_pipeline":
        return _sram_pipeline(spec, hw, sh, p, peak, W, kv, kv_tok, w, encoder)
    cap = hw.device_memory.capacity_bytes
    n = w.devices or _fewest_devices(W + kv, cap, spec.n_heads)
    fits = (W + kv) / n <= cap * USABLE
    bw = hw.device_memory.bandwidth_bytes_per_s * p["memory"]
    batch, T = float(w.batch), float(w.seq_len)
    lc, lm, _ = layer_forward(sh, batch, T, n, p, peak, bw, 1.0, 1.0, xp)
    hc, hm = head_forward(sh, batch, 1.0 if not encoder else T, n, p, peak, bw, xp)
    ttft = sh.L * (lc + lm) + hc + hm + _tp_allreduce(sh, batch * T, n, hw, p)
    ctx = w.seq_len + w.gen_len / 2.0
    dc, dm = _decode_step(sh, w.batch, ctx, n, p, peak, bw)
    t_tok = dc + dm + _tp_allreduce(sh, w.batch, n, hw, p)
    if encoder or w.gen_len == 0:
        bound = "compute" if sh.L * lc + hc >= sh.L * lm + hm else "memory"
    else:
        bound = "compute" if dc >= dm else "memory"
    w = w.with_(devices=int(n), tp=int(n), pp=1, mode=mode)
    return _result(w, ttft, t_tok, bound, kv, fits, None, p, encoder, W / n)


def legacy_infer_workload(spec, hw, *, batch, prompt_len, gen_len, devices=None, precision="bf16",
                          mode="auto") -> Workload:
    """The Workload of a keyword predict_infer call (callers outside perfmodel, until they move)."""
    if mode not in MODES:
        raise BadInput(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return Workload(model=spec.name, hardware=hw.name, suite="infer", batch=batch, seq_len=prompt_len,
                    gen_len=gen_len, devices=devices, precision=precision,
                    layout={"mode": None if mode == "auto" else mode})


def _result(w, ttft, t_tok, bound, kv, fits, mbc, p, encoder, weights_per_dev):
    latency = ttft + w.gen_len * t_tok + p["infer_overhead_s"]
    tps = w.batch * w.seq_len / latency if encoder or w.gen_len == 0 else w.batch / t_tok
    n = w.devices
    return InferPrediction(workload=w, time_to_first_token_s=ttft + p["infer_overhead_s"],
                           decode_tokens_per_s_per_seq=0.0 if encoder else 1.0 / t_tok,
                           tokens_per_s=tps, latency_s_p50=latency, bound=bound,
                           kv_cache_bytes=kv, mode=w.layout.mode, fits=bool(fits), max_batch_x_context=mbc,
                           weights_bytes=weights_per_dev, peak_mem_bytes=weights_per_dev + kv / n)


def sram_wafers(W, kv, cap):
    """Fewest wafers whose SRAM holds the weights and the KV cache."""
    return max(1, math.ceil((W + kv) / cap))


def _sram_pipeline(spec, hw, sh, p, peak, W, kv, kv_tok, w, encoder):
    sram = hw.tier("sram") or hw.memory_tiers[0]
    cap = sram.capacity_bytes
    n = w.devices or sram_wafers(W, kv, cap)
    fits = W + kv <= n * cap
    mbc = max(0.0, (n * cap - W) / kv_tok) if kv_tok else None
    bw = sram.bandwidth_bytes_per_s * p["memory"]
    ic = hw.interconnect
    hop_bw = ic.bandwidth_bytes_per_s if ic else sram.bandwidth_bytes_per_s
    hop_lat = ic.latency_s if ic else 0.0

    def hops(tokens):  # only activations cross between wafers
        return (n - 1) * (hop_lat + tokens * sh.d * sh.s / hop_bw)

    batch, T = float(w.batch), float(w.seq_len)
    lc, lm, _ = layer_forward(sh, batch, T, 1, p, peak, bw, 1.0, 1.0, xp)
    hc, hm = head_forward(sh, batch, 1.0 if not encoder else T, 1, p, peak, bw, xp)
    ttft = sh.L * (lc + lm) + hc + hm + hops(batch * T)
    dc, dm = _decode_step(sh, w.batch, w.seq_len + w.gen_len / 2.0, 1, p, peak, bw)
    t_tok = dc + dm + hops(batch)
    bound = "compute" if (sh.L * lc + hc >= sh.L * lm + hm if encoder or not w.gen_len
                          else dc >= dm) else "memory"
    w = w.with_(devices=int(n), tp=1, pp=int(n), mode="sram_pipeline")
    return _result(w, ttft, t_tok, bound, kv, fits, mbc, p, encoder, W / n)
