"""What a device holds, kind by kind, for a training step or a serving batch on one runtime: the
one memory model every engine asks (predict, plan, `study run`, `measure --layout auto`, the
stream trainers, serving). docs/architecture.md "Memory".

    from llmbench.footprint import training, serving
    f = training(spec, grid_of(w), "bf16", runtime="autocast")   # measure train's DDP
    f.weights, f.grads, f.master, f.optimizer, f.activations, f.logits, f.peak_bytes

Each runtime declares what it keeps per parameter **as data** (`STATE`): bytes per parameter of
each kind ("s" = the compute precision's bytes) and the ZeRO stage from which that kind is sharded
over the data-parallel replicas. tests/test_footprint.py holds the entries against the tensors
each torch runtime allocates, to the byte. Activations and KV cache come from models/counting (the
per-layer formulas); this module is the only one that turns them, and parameter counts, into
bytes per device. No torch, no numpy at import.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from llmbench._xp import Scalar
from llmbench.point import OFFLOAD, RECOMPUTE

NEVER = 9
"""a ZeRO stage no layout reaches: the kind is never sharded over replicas"""
SELECTIVE, FULL = RECOMPUTE.index("selective"), RECOMPUTE.index("full")
OFF_ACTIVATIONS = OFFLOAD.index("activations")
ACT_SLOTS = 2
"""layers of saved activations an offloading device keeps: the one in use and the one in transfer"""
LOGIT_BYTES = 4.0
"""one fp32 logit per vocabulary entry and token (Megatron-LM keeps the logits in fp32 for the
loss, its vocab-parallel cross-entropy working in place): the "mixed" runtime's loss, and an
inference step's last-token logits"""
LOSS_GRAD_BYTES = 12.0
"""what the house runtimes' loss adds per logit beside the logits themselves (compute precision,
held by the caller): F.cross_entropy(logits.float()) (measure/modeling.py) saves the fp32
log-probabilities for its backward (4), which then holds the fp32 gradient arriving and the one
leaving (4 + 4). An H200 shows it: the peak of measure train above its state and activations is
13.4-15.2 bytes per logit for GPT-2 small, medium and XL in bf16 (docs/results/gpu-h200-2026-12-04),
against 2 + 12 = 14 here and the 4 of the Megatron rule"""
STORE_SLOTS = 2
"""the streamed store keeps two copies of every group (double buffering, streaming/store.py)"""


@dataclass(frozen=True)
class Kind:
    """One kind of model state: bytes per parameter (None: the compute precision's), the ZeRO
    stage from which it is sharded over replicas, and whether only a sub-fp32 precision keeps it."""

    bytes: float | None
    zero: int = NEVER
    below_fp32: bool = False

    def per_param(self, s: float) -> float:
        if self.below_fp32 and s >= 4:
            return 0.0
        return float(s if self.bytes is None else self.bytes)


NONE = Kind(0.0)


@dataclass(frozen=True, kw_only=True)
class State:
    """What one runtime keeps per parameter (the STATE table of docs/architecture.md)."""

    weights: Kind
    grads: Kind
    master: Kind = NONE
    """fp32 master weights beside sub-fp32 ones"""
    master_grads: Kind = NONE
    """fp32 gradients the optimizer reads, beside the compute-precision ones"""
    moments: Kind = Kind(8.0)
    """Adam's two fp32 moments"""
    tensor_bytes: float = 0.0
    """optimizer bytes per parameter tensor: torch.optim.AdamW's `step`, a float32 scalar
    tensor per parameter (torch/optim/adamw.py _init_group); sharded with the moments by
    ZeroRedundancyOptimizer (it keeps its own parameters' state only), on every rank under FSDP2"""
    tensor_zero: int = NEVER
    gathered: bool = False
    """FSDP's unsharded compute-precision copy of the weights (a buffer): every layer from forward
    to backward at ZeRO 2 (reshard_after_forward=False), the layer computed and the one prefetched
    at ZeRO 3"""
    runs: str = ""
    source: str = ""

    def bytes_per_param(self, s: float) -> dict[str, float]:
        """{kind: bytes per parameter} before sharding; optimizer = master grads + moments."""
        return {"weights": self.weights.per_param(s), "grads": self.grads.per_param(s),
                "master": self.master.per_param(s),
                "optimizer": self.master_grads.per_param(s) + self.moments.per_param(s)}

    def zero_stage(self, kind: str) -> int:
        return {"weights": self.weights.zero, "grads": self.grads.zero, "master": self.master.zero,
                "optimizer": self.moments.zero}[kind]


STATE = {
    "mixed": State(weights=Kind(None, 3), grads=Kind(None, 2), master=Kind(4.0, 1, True), moments=Kind(8.0, 1),
                   runs="Megatron-LM, DeepSpeed; predict's default on every hardware",
                   source="ZeRO arXiv:1910.02054 Sec. 3.1 (2 + 2 + 12 bytes/param in bf16) and Sec. 5"),
    "autocast": State(weights=Kind(4.0, 3), grads=Kind(4.0, 2), moments=Kind(8.0, 1), tensor_bytes=4.0,
                      tensor_zero=1,
                      runs="measure train, ZeRO 0-1: fp32 parameters under torch.autocast, DDP, "
                           "ZeroRedundancyOptimizer (measure/parallel_train.py)",
                      source="torch.amp autocast keeps parameters fp32; ZeroRedundancyOptimizer shards "
                             "the optimizer state only"),
    "fsdp2": State(weights=Kind(4.0, 2), grads=Kind(4.0, 2), moments=Kind(8.0, 2), tensor_bytes=4.0,
                   gathered=True,
                   runs="measure train, ZeRO 2-3: FSDP2 fully_shard, MixedPrecisionPolicy(param s, reduce fp32)",
                   source="torch.distributed.fsdp.fully_shard: sharded fp32 parameters, gradients and "
                          "optimizer state; reshard_after_forward=False keeps every layer gathered"),
    "masters": State(weights=Kind(None), grads=Kind(None), master=Kind(4.0, NEVER, True),
                     master_grads=Kind(4.0, NEVER, True), tensor_bytes=4.0,
                     runs="the stream trainers' resident reference, ResidentTrainer (fp32: 16, bf16/fp16: 20 bytes/param)",
                     source="streaming/trainers.py ResidentTrainer: AdamW on fp32 masters fed upcast grads"),
    "streamed": State(weights=Kind(None), grads=Kind(None), master=Kind(4.0), moments=Kind(8.0),
                      runs="stream train's StreamedTrainer: the device holds the ends and prefetch + 1 "
                           "blocks; the store holds fp32 weights and moments in two slots",
                      source="streaming/executor.py DeviceAccount, streaming/store.py ParameterStore.nbytes"),
    "serving": State(weights=Kind(None), grads=NONE, moments=NONE,
                     runs="inference engines: weights at the precision, plus the KV cache",
                     source="vLLM / TensorRT-LLM: no gradient or optimizer state"),
}
#: the runtime `measure train` runs at each ZeRO stage (measure/parallel.py: 0 DDP, 1 DDP +
#: ZeroRedundancyOptimizer, 2-3 FSDP2)
MEASURE_RUNTIME = ("autocast", "autocast", "fsdp2", "fsdp2")


@dataclass(frozen=True, kw_only=True)
class Footprint:
    """Bytes per device of each kind (floats, or arrays over a sweep); named as METRICS."""

    weights: Any = 0.0
    grads: Any = 0.0
    master: Any = 0.0
    """fp32 master weights (sharded with the optimizer state)"""
    optimizer: Any = 0.0
    """optimizer moments (and fp32 master gradients where the runtime keeps them)"""
    activations: Any = 0.0
    """saved for the backward (training) or of the prefill (serving), the logits apart"""
    logits: Any = 0.0
    kv_cache: Any = 0.0
    buffers: Any = 0.0
    """transient copies: FSDP's gathered weights, the streaming double buffer"""
    store: Any = 0.0
    """held off the device for it (weight streaming, offload)"""

    @property
    def state_bytes(self):
        return self.weights + self.grads + self.master + self.optimizer

    @property
    def peak_bytes(self):
        """on the device at the peak: every kind but the store"""
        return self.state_bytes + self.activations + self.logits + self.kv_cache + self.buffers

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**out, "state_bytes": self.state_bytes, "peak_bytes": self.peak_bytes}


# ---------------------------------------------------------------- counts (models/counting)

@lru_cache(maxsize=256)
def _counts(spec) -> tuple[int, float, float]:
    """(parameters, share that are routed experts, parameters of one representative layer)."""
    from llmbench.models.counting import param_breakdown, param_count

    P = param_count(spec)
    parts = param_breakdown(spec)
    return P, parts.get("experts", 0) / P if P else 0.0, parts["layers"] / max(spec.n_layers, 1)


#: the KV-cache precisions a serving engine may hold its cache in
KV_PRECISIONS = ("bf16", "fp16", "fp8", "fp32")


def precision_bytes(precision: str) -> float:
    from llmbench.models.counting import dtype_bytes

    return float(dtype_bytes(precision))


def stored_precision(precision: str) -> str:
    """What a training step keeps its tensors in: fp8 (and fp4) training casts a linear's operands
    to the 8-bit type for the GEMM only, and keeps the weights, gradients, the residual stream and
    the activations saved for the backward at 16 bits (torchao float8, torchtitan's Float8:
    "output_bf16 = to_fp8(input_bf16) @ to_fp8(weight_bf16.t())",
    docs.pytorch.org/ao/main/workflows/training.html; Transformer Engine's FP8 recipes keep
    bf16 parameters and cast them per GEMM). Inference is different: a quantised checkpoint holds
    fp8 weights, and serving keeps them."""
    return "bf16" if precision in ("fp8", "fp4") else precision


@lru_cache(maxsize=512)
def act_per_seq(spec, T: int, precision: str) -> tuple[float, float, float]:
    """Activation bytes one layer keeps per sequence of T tokens: (none, selective, full
    recompute) (Korthikanti et al. 2022 via models/counting.activation_bytes_per_layer). The layer
    input a full recompute keeps is the residual stream, 16-bit under fp8 training too
    (stored_precision); the tensors saved inside a layer count at the compute precision
    (Transformer Engine keeps its GEMM inputs in fp8 for the backward)."""
    from llmbench.models.counting import activation_bytes_per_layer

    return (activation_bytes_per_layer(spec, 1, T, precision, "none"),
            activation_bytes_per_layer(spec, 1, T, precision, "selective"),
            activation_bytes_per_layer(spec, 1, T, stored_precision(precision), "full"))


def kv_bytes_per_token(spec, precision: str) -> float:
    """KV cache bytes one token of context holds over every layer (models/counting)."""
    from llmbench.models.counting import kv_cache_bytes_per_token

    return float(kv_cache_bytes_per_token(spec, precision))


# ---------------------------------------------------------------- training

def state_totals(spec, precision: str, runtime: str = "mixed") -> dict[str, float]:
    """{kind: bytes} of the whole model's state on `runtime`, before any split or sharding
    ("measure": autocast's, the same totals as fsdp2's; the two shard them differently)."""
    P = _counts(spec)[0]
    st = STATE["autocast" if runtime == "measure" else runtime]
    kept = precision if runtime == "serving" else stored_precision(precision)
    return {k: P * b for k, b in st.bytes_per_param(precision_bytes(kept)).items()}


def sharded(total, expert_share, g, stage: int, xp):
    """Bytes per device of one kind: split by tp x pp; from ZeRO `stage` on, the rest sharded
    over the dp replicas and the routed experts' share over the dp / ep replicas holding the same
    experts, after ep split them (DeepSpeed-MoE arXiv:2201.05596 Sec. 4; ZeRO arXiv:1910.02054 Sec. 5)."""
    z = g.zero >= stage
    dense = total * (1.0 - expert_share) / xp.where(z, g.dp, 1.0)
    experts = total * expert_share / g.ep / xp.where(z, g.dp / g.ep, 1.0)
    return (dense + experts) / (g.tp * g.pp)


def loss_bytes_per_logit(runtime: str, precision: str) -> float:
    """Peak bytes per logit (token x vocabulary entry) of a training step: LOGIT_BYTES for
    Megatron's loss ("mixed"), the compute-precision logits + LOSS_GRAD_BYTES for the house runtimes
    (measure, stream: autocast, fsdp2, masters, streamed)."""
    return LOGIT_BYTES if runtime == "mixed" else precision_bytes(precision) + LOSS_GRAD_BYTES


def activations(spec, g, acts, xp, logit_bytes: float = LOGIT_BYTES):
    """(saved activations on the device, logits, saved activations offloaded to the host) per
    device of one micro-batch step. 1F1B keeps min(m, pp) micro-batches in flight on the first
    stage (arXiv:2104.04473 Sec. 2.2); full recompute rebuilds one layer in full during its
    backward. Offloaded (offload "activations": DeepSpeed activation_checkpointing
    cpu_checkpointing, Megatron-Core / Transformer Engine CPU offloading, MaxText remat policies
    that offload decoder-layer inputs): each layer's saved tensors go to the host after its
    forward and come back before its backward; the device keeps ACT_SLOTS layers of them.
    acts: act_per_seq of g.seq."""
    full = g.recompute == FULL
    act_layer = _act_layer(g, acts, xp)
    inflight = xp.minimum(g.micro_steps, g.pp)
    saved = spec.n_layers / g.pp * act_layer * inflight
    kept = xp.where(g.offload == OFF_ACTIVATIONS, xp.minimum(saved, ACT_SLOTS * act_layer), saved)
    act = kept + full * (g.micro_batch * acts[0] / g.tp)
    logits = g.micro_batch * g.seq * spec.vocab_size * logit_bytes / g.tp if spec.head == "lm" else 0.0
    return act, logits, saved - kept


def _act_layer(g, acts, xp):
    """Saved activation bytes of one layer for one micro-batch, per device, under g.recompute."""
    none, sel, full_act = acts
    per_seq = xp.where(g.recompute == FULL, full_act, xp.where(g.recompute == SELECTIVE, sel, none))
    return g.micro_batch * per_seq / g.tp


def offloaded_per_micro(n_layers: int, g, acts, xp):
    """Saved-activation bytes one micro-batch sends to the host after its forward and brings back
    for its backward, per device, under offload "activations" (0 otherwise): its stage's layers
    but the ACT_SLOTS the device keeps."""
    rest = xp.maximum(n_layers / g.pp - ACT_SLOTS, 0.0)
    return xp.where(g.offload == OFF_ACTIVATIONS, rest * _act_layer(g, acts, xp), 0.0)


def _gathered(st: State, spec, g, s: float, xp):
    """FSDP's gathered copy per device (ZeRO 2: every layer of the stage; 3: two layers)."""
    if not st.gathered:
        return 0.0
    P, _, layer = _counts(spec)
    every = P * s / (g.tp * g.pp)
    return xp.where(g.zero >= 3, xp.minimum(2.0 * layer * s / g.tp, every), xp.where(g.zero >= 2, every, 0.0))


def training(spec, g, precision: str, runtime: str = "mixed", xp=Scalar, *, acts=None,
             stream_layer_params=None, tensors: int = 0, logit_bytes: float | None = None) -> Footprint:
    """Bytes per device of one training step of grid `g` (a llmbench.grid.Grid, floats or arrays)
    on `runtime` (a STATE name, or "measure": what measure train runs at g.zero). Weight
    streaming (g.streaming): two layers' weights double-buffered on the device
    (stream_layer_params each, default the mean layer), the state in the store (this device's
    data-parallel share). tensors: the runtime's parameter tensors (what its per-tensor optimizer
    bytes count; 0 leaves them out: a few KB). logit_bytes: the loss's bytes per logit when the
    framework's loss is not the runtime's (frameworks.FRAMEWORKS; None: loss_bytes_per_logit)."""
    if runtime == "measure":
        a, f = (training(spec, g, precision, r, xp, acts=acts, tensors=tensors) for r in ("autocast", "fsdp2"))
        from_zero = MEASURE_RUNTIME.index("fsdp2")
        return Footprint(**{k.name: xp.where(g.zero >= from_zero, getattr(f, k.name), getattr(a, k.name))
                            for k in fields(Footprint)})
    st, s = STATE[runtime], precision_bytes(stored_precision(precision))
    totals = state_totals(spec, precision, runtime)
    fe = _counts(spec)[1]
    kinds = {k: sharded(v, fe, g, st.zero_stage(k), xp) for k, v in totals.items()}
    kinds["optimizer"] = kinds["optimizer"] + tensors * st.tensor_bytes / xp.where(g.zero >= st.tensor_zero, g.dp, 1.0)
    act, logits, host = activations(spec, g, acts or act_per_seq(spec, int(g.seq), precision), xp,
                                    loss_bytes_per_logit(runtime, precision) if logit_bytes is None else logit_bytes)
    layer = _counts(spec)[2] if stream_layer_params is None else stream_layer_params
    on = g.streaming
    zero = xp.where(on, 0.0, 1.0)
    return Footprint(weights=xp.where(on, 2.0 * layer * s, kinds["weights"]), grads=zero * kinds["grads"],
                     master=zero * kinds["master"], optimizer=zero * kinds["optimizer"], activations=act,
                     logits=logits, buffers=zero * _gathered(st, spec, g, s, xp),
                     store=xp.where(on, sum(totals.values()) / g.dp, 0.0) + host)


def one_device(batch: int, seq: int, recompute: str = "none"):
    """The Grid of a whole-batch step on one device (what the stream trainers run)."""
    from llmbench.grid import Grid

    return Grid(batch=float(batch), seq=float(seq), devices=1.0, tp=1.0, pp=1.0, micro_batch=float(batch),
                sparsity=0.0, zero=0.0, recompute=float(RECOMPUTE.index(recompute)), offload=0.0)


# ---------------------------------------------------------------- streaming

@lru_cache(maxsize=64)
def _groups(spec) -> tuple[int, int]:
    """(parameters of the ends: embeddings, final norm and head; of the largest block)."""
    from llmbench.models.counting import layer_params, param_count

    blocks = [sum(layer_params(spec, i).values()) for i in range(spec.n_layers)]
    return param_count(spec) - sum(blocks), max(blocks)


def streamed(spec, *, batch: int, seq: int, precision: str, prefetch: int = 1,
             recompute: bool = False) -> Footprint:
    """What a StreamedTrainer step holds: on the device the ends and up to prefetch + 1 blocks of
    weights and the gradients of the ends and one block (compute precision), every layer's
    activations (with recompute: every block's input plus one block rebuilt) and the logits; in
    the store fp32 weights and Adam moments in STORE_SLOTS slots (STATE["streamed"])."""
    from llmbench.models.counting import activation_bytes_per_layer

    L, s = spec.n_layers, precision_bytes(precision)
    ends, block = _groups(spec)
    acts = activation_bytes_per_layer(spec, batch, seq, precision, "none") * L
    if recompute:
        acts = (activation_bytes_per_layer(spec, batch, seq, precision, "full") * L
                + activation_bytes_per_layer(spec, batch, seq, precision, "none"))
    per = STATE["streamed"].bytes_per_param(s)
    return Footprint(weights=(ends + min(prefetch + 1, L) * block) * s, grads=(ends + block) * s,
                     activations=acts, logits=_logits(spec, batch * seq, precision),
                     store=STORE_SLOTS * _counts(spec)[0] * (per["master"] + per["optimizer"]))


def _logits(spec, tokens: float, precision: str) -> float:
    return tokens * spec.vocab_size * loss_bytes_per_logit("streamed", precision) if spec.head == "lm" else 0.0


# ---------------------------------------------------------------- serving

def stage_kv_bytes_per_token(spec, layers: int, precision: str) -> int:
    """KV cache bytes per token of a pipeline stage of `layers` layers (keys and values)."""
    return int(2 * layers * spec.kv_dim * precision_bytes(precision))


def stage(spec, layers: int, *, first: bool, last: bool, micro_batch: int, seqs: int, context: int,
          prompt_len: int, precision: str) -> Footprint:
    """One inference pipeline stage (streaming/pipeline.py): its layers' weights, the embedding on
    the first stage, the final norm and head on the last (which keeps its own copy of a tied token
    matrix unless it is also the first, as the runtime does); the KV cache of `seqs` sequences of
    `context` tokens; one layer's prefill activations of a micro-batch plus its input and output,
    and on the last stage the last token's fp32 logits."""
    from llmbench.models.counting import activation_bytes_per_layer, param_breakdown

    s = int(precision_bytes(precision))
    parts, tied = param_breakdown(spec), spec.vocab_size * spec.d_model if spec.tied_embeddings else 0
    head = parts["final_norm"] + parts["lm_head"] + tied
    params = layers * (parts["layers"] // spec.n_layers) + (parts["embedding"] if first else 0)
    params += head - (tied if first else 0) if last else 0
    acts = activation_bytes_per_layer(spec, micro_batch, prompt_len, precision, "none") \
        + 2 * micro_batch * prompt_len * spec.d_model * s
    return Footprint(weights=params * s, kv_cache=stage_kv_bytes_per_token(spec, layers, precision) * seqs * context,
                     activations=acts, logits=micro_batch * spec.vocab_size * LOGIT_BYTES if last else 0)


def serving(spec, precision: str, *, batch: float, context: float, split: float = 1.0,
            encoder: bool = False, tp: int | None = None, pp: int = 1, kv_precision: str | None = None,
            mla_replicated: bool = True, block_tokens: int = 1) -> Footprint:
    """Bytes per device of serving: inputs are the requests one replica holds (`batch`), the
    tokens each keeps in its KV cache (`context` = prompt + generated), the devices one replica
    is split over (`split` = tp x pp) and whether the model is an encoder (no KV cache). Weights
    at the precision split evenly. The KV cache as engines hold it when `tp` is given: at
    `kv_precision` (default the precision), split by kv_split (MLA latent replicated per rank when
    `mla_replicated`, KV heads never split) and by pp, each sequence in whole blocks of
    `block_tokens` (paged attention); else split evenly as the weights (no activations yet)."""
    weights = _counts(spec)[0] * precision_bytes(precision)
    if tp is None:
        kv = 0.0 if encoder else kv_bytes_per_token(spec, kv_precision or precision) * batch * context
        return Footprint(weights=weights / split, kv_cache=kv / split)
    per_tok = 0.0 if encoder else kv_bytes_per_token_device(spec, kv_precision or precision, tp, pp, mla_replicated)
    held = batch * paged_tokens(context, block_tokens)
    return Footprint(weights=weights / (tp * pp), kv_cache=per_tok * held)


# ---------------------------------------------------------------- KV cache as serving engines hold it

def kv_split(spec, tp: int, mla_replicated: bool = True) -> float:
    """By how much tensor parallelism divides one device's share of the KV cache. MLA: 1 when the
    engine keeps the whole latent on every rank (vLLM, SGLang and TensorRT-LLM under plain TP),
    tp under data-parallel attention (SGLang --enable-dp-attention); GQA/MHA: the KV heads are
    split, but a head never is: with fewer KV heads than ranks each rank holds one (vLLM, Megatron
    replicate KV heads)."""
    if spec.is_mla:
        return 1.0 if mla_replicated else float(tp)
    kv = spec.n_kv_heads or spec.n_heads
    return kv / math.ceil(kv / tp)


def kv_bytes_per_token_device(spec, kv_precision: str, tp: int, pp: int = 1, mla_replicated: bool = True) -> float:
    """KV-cache bytes one device of a tp x pp replica holds per token of context."""
    return kv_bytes_per_token(spec, kv_precision) / (kv_split(spec, tp, mla_replicated) * pp)


def paged_tokens(context: float, block_tokens: int = 1) -> float:
    """Tokens of cache a sequence of `context` tokens occupies: whole blocks (paged attention)."""
    return math.ceil(max(context, 0) / block_tokens) * block_tokens


def kv_budget_bytes(capacity_bytes: float, weights_bytes: float, fraction: float, basis: str = "total") -> float:
    """Bytes a device gives its KV cache: `fraction` of its memory less the weights ('total': vLLM
    gpu_memory_utilization) or of the memory the weights leave ('free': TensorRT-LLM
    free_gpu_memory_fraction)."""
    if basis == "free":
        return max(0.0, fraction * (capacity_bytes - weights_bytes))
    return max(0.0, fraction * capacity_bytes - weights_bytes)


#: the KV capacity of a model that keeps no KV cache (an encoder): no bound on tokens held
NO_KV_BOUND = 2 ** 62


def kv_capacity_tokens(budget_bytes: float, kv_bytes_per_token_dev: float, block_tokens: int = 1) -> int:
    """Tokens of KV cache that fit in `budget_bytes`, in whole blocks of `block_tokens`."""
    if kv_bytes_per_token_dev <= 0:
        return NO_KV_BOUND
    return int(budget_bytes // (kv_bytes_per_token_dev * block_tokens)) * block_tokens


def seqs_that_fit(capacity_tokens: int, context: float, block_tokens: int = 1) -> int:
    """Sequences of `context` tokens a paged cache of `capacity_tokens` holds at once."""
    return int(capacity_tokens // paged_tokens(max(context, 1), block_tokens))
