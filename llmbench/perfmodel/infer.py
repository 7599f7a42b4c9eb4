"""Inference model: prefill (compute-bound), decode (weights + KV cache read per token), KV-cache
memory, BERT-style classification latency; modes resident and sram_pipeline (weights and KV cache
in on-chip SRAM, layers split over the fewest wafers that hold them).

    from llmbench.perfmodel import predict_infer
    predict_infer(get_model("llama-3.1-8b"), get_hardware("cs3"), batch=1, prompt_len=128, gen_len=256)
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from llmbench.models.counting import dtype_bytes, kv_cache_bytes_per_token

from . import _xp
from ._xp import np
from .params import gemm_efficiency, resolve_params
from .shapes import shape
from .train import head_forward, layer_forward, peak_flops

MODES = ("auto", "resident", "sram_pipeline")
USABLE = 0.9  # share of device memory for weights + KV cache (the rest: activations, runtime)


@dataclass(frozen=True)
class InferPrediction:
    time_to_first_token_s: float
    decode_tokens_per_s_per_seq: float
    tokens_per_s: float
    """generated tokens per second over the whole batch (encoders: input tokens per second)"""
    latency_s_p50: float
    """end-to-end: prefill + gen_len decode steps + request overhead"""
    devices: int
    bound: str
    kv_cache_bytes: float
    mode: str
    fits: bool
    max_batch_x_context: float | None
    """sram_pipeline: the most batch x context tokens whose KV cache fits next to the weights"""

    def to_dict(self) -> dict:
        return asdict(self)


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
        tc = 2.0 * batch * Nn * Kk / (peak * float(gemm_efficiency(batch, Nn, Kk, p)))
        tm = (batch * Kk + Kk * Nn + batch * Nn) * sh.s / bw
        comp, mem = (comp + tc, mem) if tc >= tm else (comp, mem + tm)
    heads = sh.h / tp  # q . K^T and p . V over the cache
    tc = 4.0 * batch * heads * sh.hd * ctx / (peak * float(gemm_efficiency(1, ctx, sh.hd, p)))
    tm = batch * ctx * 2 * sh.kvd * sh.s / tp / bw
    comp, mem = (comp + tc, mem) if tc >= tm else (comp, mem + tm)
    mem += batch * sh.ew_bytes_tok / tp / bw + p["token_layer_latency_s"]
    hc, hm = head_forward(sh, np.asarray(float(batch)), np.asarray(1.0), tp, p, peak, bw)
    return sh.L * comp + float(hc), sh.L * mem + float(hm)


def _tp_allreduce(sh, tokens, tp, hw, p):
    if tp <= 1 or hw.interconnect is None:
        return 0.0
    ic = hw.interconnect
    size = tokens * sh.d * sh.s
    return sh.L * 2 * (2.0 * (tp - 1) / tp * size / (ic.bandwidth_bytes_per_s * p["network"])
                       + 2 * (tp - 1) * ic.latency_s)


def predict_infer(spec, hw, *, batch, prompt_len, gen_len, devices=None, precision="bf16",
                  mode="auto", params=None) -> InferPrediction:
    """Serve `batch` requests of `prompt_len` input tokens generating `gen_len` tokens each."""
    dtype_bytes(precision)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    for name, v in (("batch", batch), ("prompt-len", prompt_len)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    if gen_len < 0 or (devices is not None and devices < 1):
        raise ValueError("gen-len must be >= 0 and devices >= 1")
    encoder = not spec.causal or spec.head != "lm"
    if encoder and gen_len:
        raise ValueError(f"{spec.name} is an encoder (head {spec.head}); use --gen-len 0")
    if prompt_len + gen_len > spec.max_seq_len:
        raise ValueError(f"prompt + gen ({prompt_len + gen_len}) exceeds {spec.name}'s "
                         f"{spec.max_seq_len} positions")
    _xp.use_for(batch, prompt_len, gen_len)
    mode = hw.default_mode_infer if mode == "auto" else mode
    if mode == "weight_streaming":
        mode = "resident"
    p = params if params is not None else resolve_params(hw)
    sh = shape(spec, precision)
    peak = peak_flops(hw, precision)
    W = sh.params * sh.s
    kv_tok = 0.0 if encoder else kv_cache_bytes_per_token(spec, precision)
    kv = kv_tok * batch * (prompt_len + gen_len)
    if mode == "sram_pipeline":
        return _sram_pipeline(spec, hw, sh, p, peak, W, kv, kv_tok, batch, prompt_len, gen_len,
                              devices, encoder)
    cap = hw.device_memory.capacity_bytes
    n = devices or _fewest_devices(W + kv, cap, spec.n_heads)
    fits = (W + kv) / n <= cap * USABLE
    bw = hw.device_memory.bandwidth_bytes_per_s * p["memory"]
    T = float(prompt_len)
    lc, lm, _ = layer_forward(sh, np.asarray(float(batch)), np.asarray(T), n, p, peak, bw, 1.0, 1.0)
    hc, hm = head_forward(sh, np.asarray(float(batch)), np.asarray(1.0 if not encoder else T), n, p, peak, bw)
    ttft = float(sh.L * (lc + lm) + hc + hm) + _tp_allreduce(sh, batch * T, n, hw, p)
    ctx = prompt_len + gen_len / 2.0
    dc, dm = _decode_step(sh, batch, ctx, n, p, peak, bw)
    t_tok = dc + dm + _tp_allreduce(sh, batch, n, hw, p)
    if encoder or gen_len == 0:
        bound = "compute" if float(sh.L * lc + hc) >= float(sh.L * lm + hm) else "memory"
    else:
        bound = "compute" if dc >= dm else "memory"
    return _result(ttft, t_tok, batch, prompt_len, gen_len, n, bound, kv, mode, fits, None, p, encoder)


def _result(ttft, t_tok, batch, prompt_len, gen_len, n, bound, kv, mode, fits, mbc, p, encoder):
    latency = ttft + gen_len * t_tok + p["infer_overhead_s"]
    tps = batch * prompt_len / latency if encoder or gen_len == 0 else batch / t_tok
    return InferPrediction(time_to_first_token_s=ttft + p["infer_overhead_s"],
                           decode_tokens_per_s_per_seq=0.0 if encoder else 1.0 / t_tok,
                           tokens_per_s=tps, latency_s_p50=latency, devices=int(n), bound=bound,
                           kv_cache_bytes=kv, mode=mode, fits=bool(fits), max_batch_x_context=mbc)


def sram_wafers(W, kv, cap):
    """Fewest wafers whose SRAM holds the weights and the KV cache."""
    return max(1, math.ceil((W + kv) / cap))


def _sram_pipeline(spec, hw, sh, p, peak, W, kv, kv_tok, batch, prompt_len, gen_len, devices, encoder):
    sram = hw.tier("sram") or hw.memory_tiers[0]
    cap = sram.capacity_bytes
    n = devices or sram_wafers(W, kv, cap)
    fits = W + kv <= n * cap
    mbc = max(0.0, (n * cap - W) / kv_tok) if kv_tok else None
    bw = sram.bandwidth_bytes_per_s * p["memory"]
    ic = hw.interconnect
    hop_bw = ic.bandwidth_bytes_per_s if ic else sram.bandwidth_bytes_per_s
    hop_lat = ic.latency_s if ic else 0.0

    def hops(tokens):  # only activations cross between wafers
        return (n - 1) * (hop_lat + tokens * sh.d * sh.s / hop_bw)

    T = float(prompt_len)
    lc, lm, _ = layer_forward(sh, np.asarray(float(batch)), np.asarray(T), 1, p, peak, bw, 1.0, 1.0)
    hc, hm = head_forward(sh, np.asarray(float(batch)), np.asarray(1.0 if not encoder else T), 1, p, peak, bw)
    ttft = float(sh.L * (lc + lm) + hc + hm) + hops(batch * T)
    dc, dm = _decode_step(sh, batch, prompt_len + gen_len / 2.0, 1, p, peak, bw)
    t_tok = dc + dm + hops(batch)
    bound = "compute" if (float(sh.L * lc + hc) >= float(sh.L * lm + hm) if encoder or not gen_len
                          else dc >= dm) else "memory"
    return _result(ttft, t_tok, batch, prompt_len, gen_len, n, bound, kv, "sram_pipeline", fits, mbc,
                   p, encoder)
