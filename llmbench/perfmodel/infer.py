"""Inference model and its layout choice: a static batch served by an engine, every step timed by
the one serving physics (serving.StepModel: prefill, decode, KV cache as the engine holds it);
BERT-style classification latency; modes resident (HBM) and sram_pipeline (weights and KV cache in
on-chip SRAM, layers split over wafers).

    from llmbench.perfmodel.infer import predict_infer
    w = Workload(model="llama-3.1-8b", hardware="cs3", suite="infer", batch=1, seq_len=128, gen_len=256)
    predict_infer(w.spec(), get_hardware("cs3"), w)        # InferPrediction, layout stated

`seq_len` is the prompt length. Layout: on the given devices (or, left out, the fewest that hold
the model: powers of two for GPUs, any count of wafers), every split into tp (within a node,
dividing the heads) x pp (stages, dividing the layers) x dp (replicas, dividing the batch) is
predicted and the lowest request latency that holds the batch wins (ties: fewer stages, less tp);
when no split holds the whole batch, a replica holds as many requests as its KV cache fits (and its
engine release runs at once: Engine.max_num_seqs), the rest queue (`concurrency`, `note`), and the
split that serves the most tokens/s wins. Stages run one after another for a request; on wafers
(sram_pipeline) decoding sequences go round the stages in up to pp groups at once
(serving.StepModel.parts).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llmbench import footprint
from llmbench.errors import BadInput
from llmbench.models.counting import dtype_bytes
from llmbench.point import Workload

from . import serving
from .params import resolve_params
from .plan import check_pp, check_serving_tp, divisors, serving_tp_ok
from .shapes import shape

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
    engine: str = "ideal"
    """the serving engine (serving.Engine) whose efficiencies and KV rules were used"""
    kv_precision: str = "bf16"
    concurrency: int = 0
    """requests held at once over all replicas: the batch, or the most whose KV cache fits (at most
    the engine release's max_num_seqs a replica)"""
    kv_capacity_tokens: int = 0
    """KV-cache tokens one replica holds (engine memory fraction, whole paged blocks)"""
    note: str = ""
    """what the prediction changed from the request (a concurrency that fits, or the engine's cap), else empty"""
    link_bytes_per_token: float = 0.0
    """bytes one generated token moves between a replica's devices (serving.StepModel)"""

    @property
    def devices(self) -> int:
        return self.workload.devices

    def metrics(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "workload"}

    def to_dict(self) -> dict:
        return {"workload": self.workload.to_dict(), **self.metrics()}


@dataclass(frozen=True, kw_only=True)
class Serve:
    """What one serving request needs: the model, hardware, precision, mode and engine."""

    spec: object
    hw: object
    p: dict
    precision: str
    mode: str
    encoder: bool
    weights_bytes: float
    engine: object
    kv_precision: str | None = None


def check_infer(spec, w: Workload) -> bool:
    """BadInput (one line) for a workload the model cannot serve; returns whether it is an encoder."""
    encoder = not spec.causal or spec.head != "lm"
    if encoder and w.gen_len:
        raise BadInput(f"{spec.name} is an encoder (head {spec.head}); use --gen-len 0")
    if w.seq_len + w.gen_len > spec.max_seq_len:
        raise BadInput(f"prompt + gen ({w.seq_len + w.gen_len}) exceeds {spec.name}'s "
                       f"{spec.max_seq_len} positions")
    return encoder


def predict_infer(spec, hw, w: Workload, params=None, *, engine=None, kv_precision=None) -> InferPrediction:
    """Serve `w.batch` requests of `w.seq_len` prompt tokens generating `w.gen_len` tokens each,
    on the layout with the lowest latency that holds the batch (else the one serving the most
    tokens/s with the requests that fit: `concurrency`, `note`); fits False: the weights fit no split of w.devices. engine: a name or a
    serving.Engine (default: serving.default_engine(hw)); kv_precision: the KV cache's."""
    from llmbench.point import precision_for

    precision = w.precision or precision_for(hw)
    dtype_bytes(precision)
    w = w.with_(precision=precision)
    encoder = check_infer(spec, w)
    mode = w.layout.mode or hw.default_mode_infer
    mode = "resident" if mode == "weight_streaming" else mode
    eng = serving.resolve_engine(engine, hw)
    p = params if params is not None else resolve_params(hw)
    s = Serve(spec=spec, hw=hw, p=p, precision=precision, mode=mode, encoder=encoder, engine=eng,
              weights_bytes=float(shape(spec, precision).params) * dtype_bytes(precision), kv_precision=kv_precision)
    check_serve_layout(spec, w, mode)
    return _search(s, w)


def _search(s: Serve, w: Workload) -> InferPrediction:
    """Every (devices, tp, pp) split: the one that holds the whole batch with the lowest latency;
    devices left out: the fewest that hold it (else the fewest that hold the weights)."""
    counts = [w.devices] if w.devices else _counts(s.hw, s.mode)
    best = fallback = None
    for n in counts:
        if not w.devices and s.weights_bytes / n > _capacity(s):
            continue  # no split of n devices holds the weights
        for tp, pp in serve_layouts(s, w, n):
            pred = serve(s, w.with_(devices=n, tp=tp, pp=pp, mode=s.mode))
            short = pred.concurrency < w.batch  # the rest queue: the layout that serves most, not fastest
            key = (not pred.fits, short, -pred.tokens_per_s if short else pred.latency_s_p50, pp, tp)
            if best is None or key < best[0]:
                best = (key, pred)
        if best is not None and best[1].fits and (w.devices or best[1].concurrency >= w.batch):
            return best[1]
        if best is not None and best[1].fits and fallback is None:
            fallback = best[1]
    if fallback is not None:
        return fallback
    if not w.devices:
        raise BadInput(f"{s.spec.name} (batch {w.batch}, {w.seq_len} + {w.gen_len} tokens) does not fit on up to "
                       f"{counts[-1]} x {s.hw.name}")
    if best is None:
        raise BadInput(f"no tp x pp x replicas split of {w.devices} x {s.hw.name} serves batch {w.batch} "
                       f"({s.spec.name}: {s.spec.n_heads} heads, {s.spec.n_layers} layers; replicas divide the batch)")
    return best[1]


def check_serve_layout(spec, w: Workload, mode: str) -> None:
    """BadInput for a knob serving does not run (llmbench.layouts "perfmodel.infer"), or a given tp
    or pp the model cannot be served on (the training rules: tp divides the heads and KV heads, pp
    gives equal stages)."""
    from llmbench.layouts import check_layout_knobs

    check_layout_knobs("perfmodel.infer", {k: v for k, v in w.layout.to_dict().items() if k != "mode"})
    tp, pp = w.layout.tp, w.layout.pp
    if tp:
        check_serving_tp(spec, tp)
        if w.devices and w.devices % tp:
            raise BadInput(f"tp {tp} must divide the devices ({w.devices})")
    if pp and mode != "sram_pipeline":
        check_pp(spec, pp)


def _capacity(s: Serve) -> float:
    """Bytes of weights one device can hold: its memory (wafer: SRAM), plus a DDR tier where the
    vendor serves from it (SambaNova)."""
    tier, ddr = serving._memory_tier(s.hw, s.mode)
    return tier.capacity_bytes * s.engine.kv_mem_fraction + (ddr.capacity_bytes if ddr is not None else 0.0)


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
        tps = [t for t in divisors(n) if t <= dpn and serving_tp_ok(spec, t)]
    tps = [lay.tp] if lay.tp else tps
    out = []
    for tp in tps:  # pp over the divisors of the devices (factorised: bounded for any n)
        for pp in ([lay.pp] if lay.pp else [d for d in divisors(n // tp) if d <= spec.n_layers] if n % tp == 0 else []):
            if n % (tp * pp) == 0 and pp <= spec.n_layers and w.batch % (n // (tp * pp)) == 0:
                out.append((tp, pp))
    return out


def prefill_s(sm, seqs: int, prompt: int, causal: bool = True) -> float:
    """Prefill of `seqs` prompts of `prompt` tokens on one replica: one step, or the engine's
    chunks of chunked_prefill_tokens (each chunk reads the weights again; attention pairs shared
    out over the chunks)."""
    total = seqs * prompt
    budget = sm.engine.chunked_prefill_tokens or total
    steps = max(1, math.ceil(total / budget))
    pairs = seqs * (prompt * (prompt + 1) / 2.0 if causal else float(prompt) * prompt)
    return steps * sm.time_s(total / steps, 0, 0, prefill_seqs=seqs / steps, prefill_attn_pairs=pairs / steps)


def beam_batch_s(sm, batch: int, beams: int, prompt: int, gen: int) -> tuple[float, float]:
    """(prefill, decode) seconds of one static batch of `batch` beam-search requests on one replica
    (StepModel `sm`): each prompt is prefilled once and its KV cache shared by its `beams` beams
    (Saxml's prefix fprop and lazy prefix broadcast; vLLM's copy-on-write blocks), then `gen` steps
    each decode batch x beams sequences, reading every shared prompt once and each beam's own
    tokens so far. BadInput when the shared prompts and the beams' tokens exceed the KV cache."""
    import numpy as np

    need = batch * prompt + batch * beams * gen
    if need > sm.kv_capacity_tokens:
        raise BadInput(f"{batch} beam-search requests ({beams} beams, {prompt} + {gen} tokens) need {need:,} KV "
                       f"tokens; the replica holds {sm.kv_capacity_tokens:,}")
    k = np.arange(gen, dtype=float)
    seqs = float(batch * beams)
    dec = sm.time_s(np.zeros(gen), np.full(gen, seqs), batch * prompt + seqs * k) if gen else np.zeros(0)
    return prefill_s(sm, batch, prompt), float(np.sum(dec))


def serve(s: Serve, w: Workload) -> InferPrediction:
    """One layout: each of dp replicas serves batch / dp requests over tp x pp devices, at most as
    many at once as its KV cache holds (serving.StepModel) and its engine release runs
    (Engine.max_num_seqs)."""
    lay, p = w.layout, s.p
    tp, pp, n = lay.tp, lay.pp, w.devices
    dp = n // (tp * pp)
    b = w.batch // dp
    sm = serving.build_step_model(s.spec, s.hw, precision=s.precision, tp=tp, pp=pp, mode=s.mode, eng=s.engine,
                                  kv_precision=s.kv_precision, params=p)
    T, g = w.seq_len, w.gen_len
    cap = s.engine.max_num_seqs or b  # the engine release's own cap on sequences at once (Engine.max_num_seqs)
    conc = min(b, cap) if s.encoder else max(min(b, cap, sm.seqs_that_fit(T + g)), 0)
    run = max(conc, 1)
    ttft = prefill_s(sm, run, T, causal=not s.encoder)
    if s.encoder or g == 0:
        t_tok, bound = 0.0, sm.parts(run * T, 0, 0, prefill_seqs=run).bound
    else:
        step = sm.parts(0, run, run * (T + g / 2.0))
        t_tok, bound = step.time_s, step.bound
    fixed = p["infer_overhead_s"] + s.engine.request_overhead_s  # once per request (host I/O, tokenizer)
    latency = ttft + g * t_tok + fixed
    # generated tokens over the whole request time: a prompt's prefill holds its batch slot too
    # (offline serving: 2,048-token prompts cut output throughput ~3x against 128; TensorRT-LLM)
    tps = dp * run * (T if s.encoder or g == 0 else g) / latency
    mem = footprint.serving(s.spec, s.precision, batch=run, context=T + g, encoder=s.encoder, tp=tp, pp=pp,
                            kv_precision=sm.kv_precision, mla_replicated=s.engine.mla_replicated_tp,
                            block_tokens=s.engine.block_tokens)
    kv = mem.kv_cache
    w_dev = mem.weights - sm.weights_ddr_bytes_per_device
    tier = serving._memory_tier(s.hw, s.mode)[0]
    tiers = {tier.name: w_dev + kv}
    if sm.weights_ddr_bytes_per_device:
        tiers["ddr"] = sm.weights_ddr_bytes_per_device
    note = "" if conc >= b else (
        f"batch {w.batch} ({b} a replica) exceeds {s.engine.name}'s {cap} sequences at once a replica; the rest "
        "queue" if conc == cap
        else f"batch {w.batch} does not fit: {s.engine.name}'s KV cache holds {sm.kv_capacity_tokens:,} tokens per "
        f"replica, {dp * conc} requests of {T + g} tokens at once; the rest queue")
    return InferPrediction(
        workload=w, time_to_first_token_s=ttft + fixed,
        decode_tokens_per_s_per_seq=0.0 if s.encoder or not t_tok else 1.0 / t_tok, tokens_per_s=tps,
        latency_s_p50=latency, bound=bound, kv_cache_bytes=kv, weights_bytes=mem.weights,
        peak_mem_bytes=w_dev + kv, tier_bytes=tiers, mode=s.mode, fits=sm.fits and conc >= 1,
        max_batch_x_context=float(sm.kv_capacity_tokens) if s.mode == "sram_pipeline" else None,
        engine=s.engine.name, kv_precision=sm.kv_precision, concurrency=dp * conc,
        kv_capacity_tokens=sm.kv_capacity_tokens, note=note, link_bytes_per_token=sm.link_bytes_per_token())


def sram_wafers(W, kv, cap):
    """Fewest wafers whose SRAM holds the weights and the KV cache."""
    return max(1, math.ceil((W + kv) / cap))
