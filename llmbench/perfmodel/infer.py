"""Inference model and its layout choice: prefill (compute-bound), decode (weights + KV cache read
per token), KV-cache memory, BERT-style classification latency; modes resident (HBM) and
sram_pipeline (weights and KV cache in on-chip SRAM, layers split over wafers).

    from llmbench.perfmodel.infer import predict_infer
    w = Workload(model="llama-3.1-8b", hardware="cs3", suite="infer", batch=1, seq_len=128, gen_len=256)
    predict_infer(w.spec(), get_hardware("cs3"), w)        # InferPrediction, layout stated

`seq_len` is the prompt length. Layout: on the given devices (or, left out, the fewest that hold
the model: powers of two for GPUs, any count of wafers), every split into tp (within a node,
dividing the heads) x pp (stages, dividing the layers) x dp (replicas, dividing the batch) is
predicted and the lowest request latency that fits wins (ties: fewer stages, less tp). Stages run
one after another for a request (no pipeline concurrency: issue 10 step 3). Python floats only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llmbench.errors import BadInput
from llmbench.footprint import kv_bytes_per_token, serving
from llmbench.models.counting import dtype_bytes
from llmbench.point import Workload

from llmbench._xp import Scalar as xp
from .params import gemm_efficiency, resolve_params
from .plan import check_pp, check_tp_heads, divisors
from .shapes import shape
from .moe import mlp_forward
from .step import gemm_peak, head_forward, layer_forward, ring

MODES = ("auto", "resident", "sram_pipeline")
USABLE = 0.9  # share of device memory for weights + KV cache (the rest: activations, runtime)
MAX_DEVICES = 4096


@dataclass(frozen=True, kw_only=True)
class InferPrediction:
    """A served batch predicted: the workload as it runs (devices, layout) and its metrics, every
    name in llmbench.point.METRICS. to_dict() = {"workload": {...}, **metrics}."""

    workload: Workload
    """resolved: precision, devices and layout (tp, pp, mode) set; replicas = devices / (tp pp)"""
    time_to_first_token_s: float
    decode_tokens_per_s_per_seq: float
    tokens_per_s: float
    """generated tokens per second over the whole batch (encoders: input tokens per second)"""
    latency_s_p50: float
    """end-to-end: prefill + gen_len decode steps + request overhead"""
    bound: str
    kv_cache_bytes: float
    """KV cache per device"""
    weights_bytes: float
    """weights per device"""
    peak_mem_bytes: float
    """weights + KV cache per device"""
    tier_bytes: dict
    mode: str
    fits: bool
    max_batch_x_context: float | None
    """sram_pipeline: the most batch x context tokens a replica's KV cache holds next to its weights"""

    @property
    def devices(self) -> int:
        return self.workload.devices

    def metrics(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "workload"}

    def to_dict(self) -> dict:
        return {"workload": self.workload.to_dict(), **self.metrics()}


@dataclass(frozen=True, kw_only=True)
class Serve:
    """What one serving layout needs: the model's constants at this precision and mode."""

    spec: object
    hw: object
    sh: object
    p: dict
    peak: float
    mode: str
    encoder: bool
    weights_bytes: float
    kv_bytes_per_token: float


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
    """Serve `w.batch` requests of `w.seq_len` prompt tokens generating `w.gen_len` tokens each,
    on the layout with the lowest latency that fits (fits False: none does on w.devices)."""
    from llmbench.point import precision_for

    if w is None:
        w = legacy_infer_workload(spec, hw, **legacy)
    precision = w.precision or precision_for(hw)
    dtype_bytes(precision)
    w = w.with_(precision=precision)
    encoder = check_infer(spec, w)
    mode = w.layout.mode or hw.default_mode_infer
    mode = "resident" if mode == "weight_streaming" else mode
    sh = shape(spec, precision)
    p = params if params is not None else resolve_params(hw)
    s = Serve(spec=spec, hw=hw, sh=sh, p=p, peak=gemm_peak(hw, precision, p), mode=mode, encoder=encoder,
              weights_bytes=serving(spec, precision, batch=0, context=0).weights,
              kv_bytes_per_token=0.0 if encoder else kv_bytes_per_token(spec, precision))
    check_serve_layout(spec, w, mode)
    counts = [w.devices] if w.devices else _counts(hw, mode)
    best = None
    for n in counts:
        if not w.devices and s.weights_bytes / n > _tier(s)[1]:
            continue  # no split of n devices holds the weights
        for tp, pp in serve_layouts(s, w, n):
            pred = serve(s, w.with_(devices=n, tp=tp, pp=pp, mode=mode))
            key = (not pred.fits, pred.latency_s_p50, pp, tp)
            if best is None or key < best[0]:
                best = (key, pred)
        if best is not None and best[1].fits:
            return best[1]
    if not w.devices:
        raise BadInput(f"{spec.name} (batch {w.batch}, {w.seq_len} + {w.gen_len} tokens) does not fit on up to "
                       f"{counts[-1]} x {hw.name}")
    if best is None:
        raise BadInput(f"no tp x pp x replicas split of {w.devices} x {hw.name} serves batch {w.batch} "
                       f"({spec.name}: {spec.n_heads} heads, {spec.n_layers} layers; replicas divide the batch)")
    return best[1]


def check_serve_layout(spec, w: Workload, mode: str) -> None:
    """BadInput for a knob serving does not run (llmbench.layouts "perfmodel.infer"), or a given tp
    or pp the model cannot be served on (the training rules: tp divides the heads and KV heads, pp
    gives equal stages)."""
    from llmbench.layouts import check_layout_knobs

    check_layout_knobs("perfmodel.infer", {k: v for k, v in w.layout.to_dict().items() if k != "mode"})
    tp, pp = w.layout.tp, w.layout.pp
    if tp:
        check_tp_heads(spec, tp)
        if w.devices and w.devices % tp:
            raise BadInput(f"tp {tp} must divide the devices ({w.devices})")
    if pp and mode != "sram_pipeline":
        check_pp(spec, pp)


def _counts(hw, mode: str) -> list[int]:
    """Device counts tried when none is given: wafers one by one, others in powers of two."""
    if mode == "sram_pipeline":
        return list(range(1, 257))
    return [1 << k for k in range(MAX_DEVICES.bit_length())]


def serve_layouts(s: Serve, w: Workload, n: int) -> list[tuple[int, int]]:
    """(tp, pp) splits of n devices: dp = n / (tp pp) replicas must divide the batch; tp within a
    node and dividing the heads (none on wafers); pp dividing... at most the layers."""
    spec, lay = s.spec, w.layout
    dpn = max(s.hw.interconnect.devices_per_node, 1) if s.hw.interconnect else 1
    if s.mode == "sram_pipeline":
        tps = [1]
    else:
        kv = getattr(spec, "n_kv_heads", spec.n_heads) or spec.n_heads
        tps = [t for t in divisors(n) if t <= dpn and spec.n_heads % t == 0 and kv % t == 0]
    tps = [lay.tp] if lay.tp else tps
    out = []
    for tp in tps:  # pp over the divisors of the devices (factorised: bounded for any n)
        for pp in ([lay.pp] if lay.pp else [d for d in divisors(n // tp) if d <= spec.n_layers] if n % tp == 0 else []):
            if n % (tp * pp) == 0 and pp <= spec.n_layers and w.batch % (n // (tp * pp)) == 0:
                out.append((tp, pp))
    return out


def serve(s: Serve, w: Workload) -> InferPrediction:
    """One layout: each of dp replicas serves batch / dp requests over tp x pp devices."""
    sh, p, lay = s.sh, s.p, w.layout
    tp, pp, n = lay.tp, lay.pp, w.devices
    dp = n // (tp * pp)
    b = w.batch // dp
    mem = serving(s.spec, w.precision, batch=b, context=w.seq_len + w.gen_len, split=tp * pp,
                  encoder=s.encoder)
    on_chip = s.mode == "sram_pipeline"
    tier, cap = _tier(s)
    per_dev = mem.peak_bytes
    mbc = max(0.0, (pp * tier.capacity_bytes - s.weights_bytes) / s.kv_bytes_per_token) \
        if on_chip and s.kv_bytes_per_token else None
    bw = tier.bandwidth_bytes_per_s * p["memory"]
    T = float(w.seq_len)
    lc, lm, _ = layer_forward(sh, float(b), T, tp, p, s.peak, bw, 1.0, 1.0, xp)
    hc, hm = head_forward(sh, float(b), 1.0 if not s.encoder else T, tp, p, s.peak, bw, xp)
    ttft = sh.L * (lc + lm) + hc + hm + _tp_allreduce(sh, b * T, tp, s.hw, p) + _hops(s, pp, n, b * T)
    dc, dm = _decode_step(sh, b, w.seq_len + w.gen_len / 2.0, tp, p, s.peak, bw)
    t_tok = dc + dm + _tp_allreduce(sh, b, tp, s.hw, p) + _hops(s, pp, n, b)
    if s.encoder or w.gen_len == 0:
        bound = "compute" if sh.L * lc + hc >= sh.L * lm + hm else "memory"
    else:
        bound = "compute" if dc >= dm else "memory"
    latency = ttft + w.gen_len * t_tok + p["infer_overhead_s"]
    # generated tokens over the whole request time: a prompt's prefill holds its batch slot too
    # (offline serving: 2,048-token prompts cut output throughput ~3x against 128; TensorRT-LLM)
    tps = w.batch * (w.seq_len if s.encoder or w.gen_len == 0 else w.gen_len) / latency
    return InferPrediction(workload=w, time_to_first_token_s=ttft + p["infer_overhead_s"],
                           decode_tokens_per_s_per_seq=0.0 if s.encoder else 1.0 / t_tok, tokens_per_s=tps,
                           latency_s_p50=latency, bound=bound, kv_cache_bytes=mem.kv_cache,
                           weights_bytes=mem.weights, peak_mem_bytes=per_dev,
                           tier_bytes={tier.name: per_dev}, mode=s.mode, fits=per_dev <= cap,
                           max_batch_x_context=mbc)


def _tier(s: Serve):
    """(the tier that holds weights and KV cache, its usable bytes per device): on-chip SRAM in
    sram_pipeline, else device memory less what activations and the runtime take (USABLE)."""
    if s.mode == "sram_pipeline":
        t = s.hw.tier("sram") or s.hw.memory_tiers[0]
        return t, t.capacity_bytes
    return s.hw.device_memory, s.hw.device_memory.capacity_bytes * USABLE


def _hops(s: Serve, pp: int, n: int, tokens: float) -> float:
    """Pipeline stages pass the boundary activations one after another: (pp - 1) hops over the
    fabric (a wafer's SwarmX/Ethernet link; between GPU nodes, the per-device NIC)."""
    if pp <= 1:
        return 0.0
    ic = s.hw.interconnect
    if ic is None:
        bw, lat = s.hw.device_memory.bandwidth_bytes_per_s, 0.0
    else:
        cross = n > max(ic.devices_per_node, 1) and s.mode != "sram_pipeline"
        bw = (ic.inter_node_bandwidth_bytes_per_s or ic.bandwidth_bytes_per_s) if cross else ic.bandwidth_bytes_per_s
        lat = ic.latency_s
    return (pp - 1) * (lat + tokens * s.sh.d * s.sh.s / bw)


def _decode_step(sh, batch, ctx, tp, p, peak, bw):
    """(compute part, memory part) of one generated token for `batch` sequences. A MoE model reads
    the weights of the experts its batch touches (moe.mlp_forward: E (1 - (1 - k/E)^batch) per
    layer, uniform routing); the attention reads the KV cache (MLA: the latent, absorbed form)."""
    comp = mem = 0.0
    for N, K, split_n in sh.gemms:
        Nn, Kk = (N / tp, K) if split_n else (N, K / tp)
        tc = 2.0 * batch * Nn * Kk / (peak * gemm_efficiency(batch, Nn, Kk, p, xp))
        tm = (batch * Kk + Kk * Nn + batch * Nn) * sh.s / bw
        comp, mem = (comp + tc, mem) if tc >= tm else (comp, mem + tm)
    if sh.moe is not None:
        mc, mm = mlp_forward(sh, float(batch), tp, 1.0, p, peak, bw, xp)
        comp, mem = comp + mc, mem + mm
    # q . K^T and p . V over the cache
    tc = batch * sh.decode_attn_flops_ctx / tp * ctx / (peak * gemm_efficiency(1, ctx, sh.hd, p, xp))
    tm = batch * ctx * sh.kv_elems_tok * sh.s / tp / bw
    comp, mem = (comp + tc, mem) if tc >= tm else (comp, mem + tm)
    mem += batch * sh.ew_bytes_tok / tp / bw + p["token_layer_latency_s"]
    hc, hm = head_forward(sh, float(batch), 1.0, tp, p, peak, bw, xp)
    return sh.L * comp + hc, sh.L * mem + hm


def _tp_allreduce(sh, tokens, tp, hw, p):
    if tp <= 1 or hw.interconnect is None:
        return 0.0
    ic = hw.interconnect
    size = tokens * sh.d * sh.s
    return sh.L * 2 * ring(size, float(tp), ic.bandwidth_bytes_per_s, ic.latency_s, p["network"], xp)


def sram_wafers(W, kv, cap):
    """Fewest wafers whose SRAM holds the weights and the KV cache."""
    return max(1, math.ceil((W + kv) / cap))


def legacy_infer_workload(spec, hw, *, batch, prompt_len, gen_len, devices=None, precision="bf16",
                          mode="auto") -> Workload:
    """The Workload of a keyword predict_infer call (callers outside perfmodel, until they move)."""
    if mode not in MODES:
        raise BadInput(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return Workload(model=spec.name, hardware=hw.name, suite="infer", batch=batch, seq_len=prompt_len,
                    gen_len=gen_len, devices=devices, precision=precision,
                    layout={"mode": None if mode == "auto" else mode})
