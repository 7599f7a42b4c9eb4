"""Exact counting for a ModelSpec: parameters, FLOPs and bytes per op, memory. No torch.

    from llmbench.models import get_model
    from llmbench.models.counting import param_count, training_flops
    training_flops(get_model("mixtral-8x7b"), batch=1, seq=4096)["model"]

Conventions (docs/models.md says why):
- A matmul of (M x K) @ (K x N) is 2*M*N*K FLOPs, as torch.utils.flop_counter counts it; a bias add
  is M*N more, counted in the op's `flops` but not in its `matmul_flops`.
- Attention scores and values are counted over the full T x T square even when causal or windowed
  (as PaLM Appendix B, Megatron arXiv:2104.04473 Eq. 3 and FlopCounterMode do); `causal_fraction`
  on an op says what share a causal (windowed) kernel really computes.
- Backward = 2 x forward FLOPs for every op (input-gradient + weight-gradient GEMMs for matmuls;
  both operands' gradients for the attention matmuls; an approximation for element-wise ops).
- Non-matmul ops per element: layernorm 7, rmsnorm 4, gelu 8 (tanh form), silu*mul 5, gelu*mul 9,
  softmax 5, sigmoid 4, soft-cap 3, residual add 1, rotary 3 per rotated element, cross-entropy 4
  per logit.
- Layers differ when the model has MoE layers (models/moe.py) or sliding-window layers: every
  total sums the layers one kind at a time; `layer_ops(..., layer=i)` gives layer i.
"""
from __future__ import annotations

from collections import Counter

from .mla import (
    mla_activation_elems, mla_decode_extra_flops, mla_kv_elems_per_token, mla_params, mla_projection_ops,
)
from .moe import expert_params, mlp_params, moe_activation_elems, moe_layer_params, moe_mlp_ops
from .ops import (  # noqa: F401  (re-exported: the public names of counting)
    ACT_FLOPS, DTYPE_BYTES, NORM_FLOPS, ROTARY_FLOPS, SOFTCAP_FLOPS, SOFTMAX_FLOPS, XENT_FLOPS, Op,
    causal_pairs, dtype_bytes, ew, matmul, norm, norm_params,
)
from .spec import ModelSpec

ATTN_CORE = ("attn_scores", "softmax", "attn_values")


# ---------------------------------------------------------------- ops of one layer

def _attention_core(spec: ModelSpec, B: int, T: int, s: float, fused: bool, window: int) -> list[Op]:
    """Scores, softmax and values over the full T x T square for B sequences."""
    n, h, hd, hv = B * T, spec.n_heads, spec.d_head, spec.d_head_v
    cf = causal_pairs(T, window) / (T * T) if spec.causal else 1.0
    scores = B * h * T * T
    qk = matmul("attn_scores", "layer", T, T, hd, s, weight=False, count=B * h, causal_fraction=cf)
    pv = matmul("attn_values", "layer", T, hv, T, s, weight=False, count=B * h, causal_fraction=cf)
    per_score = SOFTMAX_FLOPS + 1 + (SOFTCAP_FLOPS if spec.attn_logit_softcap else 0)  # + the scale
    sm = Op("softmax", "softmax", "layer", float(scores * per_score), 0.0, scores * s, scores * s,
            causal_fraction=cf)
    if fused:  # FlashAttention / SDPA: Q, K, V read once, output written once; scores stay on chip
        k_heads = h if spec.is_mla else spec.n_kv_heads
        qk = Op(qk.name, qk.kind, qk.where, qk.flops, qk.matmul_flops,
                (n * h * hd + n * k_heads * hd) * s, 0.0, gemm=qk.gemm, causal_fraction=cf)
        sm = Op(sm.name, sm.kind, sm.where, sm.flops, 0.0, 0.0, 0.0, causal_fraction=cf)
        pv = Op(pv.name, pv.kind, pv.where, pv.flops, pv.matmul_flops, n * k_heads * hv * s,
                n * h * hv * s, gemm=pv.gemm, causal_fraction=cf)
    return [qk, sm, pv]


def attention_ops(spec: ModelSpec, B: int, T: int, s: float, fused: bool = True,
                  window: int = 0) -> list[Op]:
    """Projections, core and output projection of one attention block (its input norm excluded)."""
    n, h, hd = B * T, spec.n_heads, spec.d_head
    if spec.is_mla:
        ops = mla_projection_ops(spec, n, s)
    else:
        ops = [matmul("qkv", "layer", n, spec.q_dim + 2 * spec.kv_dim, spec.d_model, s,
                      bias=spec.attn_biases)]
        if spec.qk_norm:  # one RMSNorm of width d_head over every query and key head
            heads = h + spec.n_kv_heads
            ops.append(ew("qk_norm", "norm", "layer", n * heads * hd, NORM_FLOPS[spec.norm], s,
                          params=2 * norm_params(spec, hd)))
        if spec.position == "rotary":
            rot = int(round(spec.rotary_pct * hd))
            ops.append(ew("rotary", "elementwise", "layer", n * (h + spec.n_kv_heads) * rot, ROTARY_FLOPS, s))
    ops += _attention_core(spec, B, T, s, fused, window)
    ops.append(matmul("attn_out", "layer", n, spec.d_model, h * spec.d_head_v, s, bias=spec.attn_out_bias))
    return ops


def mlp_ops(spec: ModelSpec, n: int, s: float) -> list[Op]:
    """The dense MLP over n tokens: gated (SwiGLU, GeGLU: gate and up fused) or GELU."""
    f, gated = spec.d_ff, spec.activation in ("swiglu", "geglu")
    return [matmul("mlp_up", "layer", n, 2 * f if gated else f, spec.d_model, s, bias=spec.biases),
            ew("act", "elementwise", "layer", n * f, ACT_FLOPS[spec.activation], s, reads=2 if gated else 1),
            matmul("mlp_down", "layer", n, spec.d_model, f, s, bias=spec.biases)]


def representative_layer(spec: ModelSpec) -> int:
    """The layer `layer_ops(spec, ...)` describes by default: the first MoE layer, else layer 0."""
    return next((i for i in range(spec.n_layers) if spec.is_moe_layer(i)), 0)


def layer_ops(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16",
              fused_attention: bool = True, *, layer: int | None = None) -> list[Op]:
    """Forward ops of transformer layer `layer` (default: `representative_layer`) for `batch`
    sequences of `seq` tokens.

    fused_attention: scores and probabilities stay on chip (FlashAttention / SDPA) — they cost
    FLOPs but no memory traffic; False writes and reads the B*h*T*T scores as eager PyTorch does.
    """
    i = representative_layer(spec) if layer is None else layer
    s = dtype_bytes(dtype)
    n, d = batch * seq, spec.d_model
    ops = [norm("norm_attn", "layer", spec, n, s)]
    ops += attention_ops(spec, batch, seq, s, fused_attention, spec.window(i))
    if spec.post_norms:
        ops.append(norm("post_attn_norm", "layer", spec, n, s))
    if not spec.parallel_residual:
        ops.append(ew("residual_attn", "elementwise", "layer", n * d, 1, s, reads=2))
    if not spec.single_norm:
        ops.append(norm("norm_mlp", "layer", spec, n, s))
    ops += moe_mlp_ops(spec, n, s) if spec.is_moe_layer(i) else mlp_ops(spec, n, s)
    if spec.post_norms:
        ops.append(norm("post_mlp_norm", "layer", spec, n, s))
    if spec.parallel_residual:  # x + attn + mlp
        ops.append(ew("residual", "elementwise", "layer", n * d, 2, s, reads=3))
    else:
        ops.append(ew("residual_mlp", "elementwise", "layer", n * d, 1, s, reads=2))
    return ops


def layer_groups(spec: ModelSpec) -> list[tuple[int, int]]:
    """(first layer, count) for each kind of layer (MoE or dense, window), in layer order."""
    first: dict[tuple[bool, int], int] = {}
    count: Counter = Counter()
    for i in range(spec.n_layers):
        key = (spec.is_moe_layer(i), spec.window(i))
        first.setdefault(key, i)
        count[key] += 1
    return [(first[key], count[key]) for key in first]


def embed_ops(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16") -> list[Op]:
    s = dtype_bytes(dtype)
    n, d = batch * seq, spec.d_model
    ops = [Op("tok_embed", "embedding", "embed", 0.0, 0.0, n * d * s + n * 4, n * d * s,
              weight_params=spec.vocab_size * d)]
    if spec.position == "learned":
        ops.append(ew("pos_embed", "elementwise", "embed", n * d, 1, s, reads=2, params=0))
    if spec.n_token_types:
        ops.append(ew("type_embed", "elementwise", "embed", n * d, 1, s, reads=2))
    if spec.embedding_norm:
        ops.append(norm("embed_norm", "embed", spec, n, s))
    return ops


def head_ops(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16", *,
             loss: bool = False, last_token_only: bool = False) -> list[Op]:
    """Ops after the last layer. last_token_only: logits of the last position only (generation)."""
    s = dtype_bytes(dtype)
    B, d, V = batch, spec.d_model, spec.vocab_size
    n = B if last_token_only else B * seq
    ops = [norm("final_norm", "head", spec, n, s)] if spec.final_norm else []
    if spec.head == "lm":
        ops.append(matmul("lm_head", "head", n, V, d, s, bias=spec.lm_head_bias))
        if spec.final_logit_softcap:
            ops.append(ew("logit_softcap", "elementwise", "head", n * V, SOFTCAP_FLOPS, s))
        if loss:
            ops.append(ew("loss", "loss", "head", n * V, XENT_FLOPS, s))
    elif spec.head == "mlm":
        ops.append(matmul("mlm_dense", "head", n, d, d, s, bias=True))
        ops.append(ew("mlm_act", "elementwise", "head", n * d, ACT_FLOPS["gelu"], s))
        ops.append(norm("mlm_norm", "head", spec, n, s))
        ops.append(matmul("mlm_decoder", "head", n, V, d, s, bias=True))
        if loss:
            ops.append(ew("loss", "loss", "head", n * V, XENT_FLOPS, s))
    elif spec.head == "cls":
        ops.append(matmul("pooler", "head", B, d, d, s, bias=True))
        ops.append(ew("pooler_act", "elementwise", "head", B * d, ACT_FLOPS["gelu"], s))
        ops.append(matmul("classifier", "head", B, spec.n_classes, d, s, bias=True))
        if loss:
            ops.append(ew("loss", "loss", "head", B * spec.n_classes, XENT_FLOPS, s))
    return ops


def model_ops(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16", *,
              fused_attention: bool = True, loss: bool = False) -> list[Op]:
    """All forward ops of the model; layer ops appear once per layer, in layer order."""
    kinds: dict[tuple[bool, int], list[Op]] = {}
    layers: list[Op] = []
    for i in range(spec.n_layers):
        key = (spec.is_moe_layer(i), spec.window(i))
        if key not in kinds:
            kinds[key] = layer_ops(spec, batch, seq, dtype, fused_attention, layer=i)
        layers += kinds[key]
    return embed_ops(spec, batch, seq, dtype) + layers + head_ops(spec, batch, seq, dtype, loss=loss)


# ---------------------------------------------------------------- parameters

def layer_params(spec: ModelSpec, layer: int) -> dict[str, int]:
    """Parameters of layer `layer` by part: norms, attention, mlp (dense), router, experts,
    shared_experts."""
    d = spec.d_model
    if spec.is_mla:
        attn = mla_params(spec)
    else:
        attn = d * (spec.q_dim + 2 * spec.kv_dim) + spec.q_dim * d
        attn += (spec.q_dim + 2 * spec.kv_dim) if spec.attn_biases else 0
        attn += d if spec.attn_out_bias else 0
        attn += 2 * norm_params(spec, spec.d_head) if spec.qk_norm else 0
    out = {"norms": spec.norms_per_layer * norm_params(spec), "attention": attn, "mlp": 0,
           "router": 0, "experts": 0, "shared_experts": 0}
    if spec.is_moe_layer(layer):
        out.update(moe_layer_params(spec))
    else:
        out["mlp"] = mlp_params(spec, spec.d_ff)
    return out


def param_breakdown(spec: ModelSpec) -> dict[str, int]:
    """Parameters by part; they sum to param_count. `layers` holds the norms, attention and dense
    MLPs of all layers; `router`, `experts` (routed) and `shared_experts` the MoE layers' rest.
    Tied LM heads add nothing; the learned-position table counts in full."""
    d, V = spec.d_model, spec.vocab_size
    norm_p = norm_params(spec)
    out = {
        "embedding": V * d + (spec.max_seq_len * d if spec.position == "learned" else 0)
        + spec.n_token_types * d + (norm_p if spec.embedding_norm else 0),
        "layers": 0, "router": 0, "experts": 0, "shared_experts": 0,
        "final_norm": norm_p if spec.final_norm else 0,
        "lm_head": 0, "mlm_head": 0, "pooler": 0, "classifier": 0,
    }
    for first, count in layer_groups(spec):
        parts = layer_params(spec, first)
        out["layers"] += count * (parts["norms"] + parts["attention"] + parts["mlp"])
        for key in ("router", "experts", "shared_experts"):
            out[key] += count * parts[key]
    if spec.head == "lm":
        out["lm_head"] = (0 if spec.tied_embeddings else V * d) + (V if spec.lm_head_bias else 0)
    elif spec.head == "mlm":
        out["mlm_head"] = d * d + d + norm_p + V + (0 if spec.tied_embeddings else V * d)
    elif spec.head == "cls":
        out["pooler"] = d * d + d
        out["classifier"] = d * spec.n_classes + spec.n_classes
    return out


def param_count(spec: ModelSpec, *, classifier: bool = True) -> int:
    """All parameters (every expert); classifier=False leaves out a task classifier (BertModel with
    its pooler). `active_param_count` gives the parameters one token uses."""
    parts = param_breakdown(spec)
    if not classifier:
        parts.pop("classifier")
    return sum(parts.values())


def active_param_count(spec: ModelSpec) -> int:
    """Parameters one token uses: all but the routed experts it is not sent to (embeddings and the
    LM head included, as Mixtral's 12.9B, Qwen3's 3.3B and DeepSeek-V3's 37B count them);
    param_count for a dense model."""
    if not spec.is_moe:
        return param_count(spec)
    idle = spec.n_moe_layers * (spec.n_experts - spec.n_experts_active) * expert_params(spec)
    return param_count(spec) - idle


def non_embedding_param_count(spec: ModelSpec) -> int:
    """param_count without the token (and position, type) embeddings and an untied LM head: the
    'non-embedding' figure of the Qwen and Gemma model cards."""
    parts = param_breakdown(spec)
    untied_head = spec.vocab_size * spec.d_model if spec.head == "lm" and not spec.tied_embeddings else 0
    return param_count(spec) - parts["embedding"] - untied_head


def matmul_weight_params(spec: ModelSpec) -> int:
    """Weights one token multiplies by (routed experts at top-k; the embedding matrix only if it is
    the LM head)."""
    per_layer = 0.0
    for first, count in layer_groups(spec):
        ops = layer_ops(spec, 1, 1, "bf16", layer=first)
        per_layer += count * sum(o.matmul_flops / 2 for o in ops if o.kind == "matmul")
    head = spec.vocab_size * spec.d_model if spec.head in ("lm", "mlm") else 0
    return int(per_layer) + head


# ---------------------------------------------------------------- FLOPs

RECOMPUTE = ("none", "selective", "full")


def training_flops(spec: ModelSpec, batch: int, seq: int, recompute: str = "none",
                   causal_discount: bool = False) -> dict[str, float]:
    """FLOPs of one training step (forward + backward [+ recompute]) for batch x seq tokens.

    Returns forward, backward, recompute, model (fwd + bwd: the MFU numerator) and hardware
    (model + recompute: what the device executes). selective recomputes the attention core
    (scores, softmax, values: Korthikanti et al. 2022, arXiv:2205.05198); full recomputes every
    layer's forward (not embeddings or head), as Megatron's Table 1 counts.
    causal_discount: count only the causal (windowed) part of the attention square (what flash
    kernels do).
    """
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    w = (lambda o: o.causal_fraction) if causal_discount else (lambda o: 1.0)
    layers_fwd = attn_core = 0.0
    for first, count in layer_groups(spec):
        layer = layer_ops(spec, batch, seq, layer=first)
        layers_fwd += count * sum(o.flops * w(o) for o in layer)
        attn_core += count * sum(o.flops * w(o) for o in layer if o.name in ATTN_CORE)
    outer = embed_ops(spec, batch, seq) + head_ops(spec, batch, seq, loss=True)
    fwd = layers_fwd + sum(o.flops for o in outer)
    re = {"none": 0.0, "selective": attn_core, "full": layers_fwd}[recompute]
    return {"forward": fwd, "backward": 2 * fwd, "recompute": re,
            "model": 3 * fwd, "hardware": 3 * fwd + re}


def flops_per_token(spec: ModelSpec, seq: int | None = None, *, training: bool = True) -> float:
    """Training: model FLOPs per token of a step at context `seq` (default max_seq_len); MoE
    layers count the top-k experts a token uses. Inference: forward FLOPs to generate one token at
    the end of a `seq`-long context with a KV cache."""
    T = seq or spec.max_seq_len
    if training:
        return training_flops(spec, 1, T)["model"] / T
    return decode_flops(spec, T)


def decode_flops(spec: ModelSpec, context: int, batch: int = 1) -> float:
    """Forward FLOPs for one new token per sequence attending to `context` cached tokens (at most
    the window in a sliding-window layer). MLA layers are counted in the absorbed form."""
    total = 0.0
    for first, count in layer_groups(spec):
        window = spec.window(first)
        ctx = min(context, window) if window else context
        skip = ATTN_CORE + (("kv_b",) if spec.is_mla else ())
        per_layer = sum(o.flops for o in layer_ops(spec, batch, 1, layer=first) if o.name not in skip)
        h = spec.n_heads
        per_score = SOFTMAX_FLOPS + 1 + (SOFTCAP_FLOPS if spec.attn_logit_softcap else 0)
        if spec.is_mla:
            per_layer += batch * (mla_decode_extra_flops(spec, ctx) + per_score * h * ctx)
        else:  # q @ K^T over the cache and p @ V, plus softmax and scale
            per_layer += batch * (2.0 * h * (spec.d_head + spec.d_head_v) * ctx + per_score * h * ctx)
        total += count * per_layer
    outer = embed_ops(spec, batch, 1) + head_ops(spec, batch, 1, last_token_only=True)
    return total + sum(o.flops for o in outer)


def closed_form_flops_per_token(spec: ModelSpec, seq: int) -> float:
    """PaLM Appendix B (arXiv:2204.02311): 6N + 12 L d T, N the weights a token multiplies by (the
    LM head included). The attention term is written 6 L T h (d_head + d_head_v), which is 12 L d T
    when h d_head = d_model, and holds for wider heads (Gemma) and MLA."""
    attn = 6.0 * spec.n_layers * seq * spec.n_heads * (spec.d_head + spec.d_head_v)
    return 6.0 * matmul_weight_params(spec) + attn


# ---------------------------------------------------------------- memory

def kv_cache_bytes_per_token(spec: ModelSpec, dtype: str = "bf16") -> float:
    """Cache of one token in every layer: K and V, 2 * L * n_kv_heads * d_head * bytes; MLA: the
    latent and the rope key, L * (kv_lora_rank + qk_rope_head_dim) * bytes. Sliding-window layers
    are counted as if they kept every token (`kv_cache_bytes` caps them at the window)."""
    per_layer = mla_kv_elems_per_token(spec) if spec.is_mla else 2 * spec.kv_dim
    return float(spec.n_layers * per_layer) * dtype_bytes(dtype)


def kv_cache_bytes(spec: ModelSpec, context: int, batch: int = 1, dtype: str = "bf16") -> float:
    """The KV cache of `batch` sequences of `context` tokens, a sliding-window layer keeping only
    its last `sliding_window` tokens (Mistral's rolling buffer, Gemma 2/3 local layers)."""
    per_token_layer = kv_cache_bytes_per_token(spec, dtype) / spec.n_layers
    tokens = sum(min(context, spec.window(i) or context) for i in range(spec.n_layers))
    return batch * tokens * per_token_layer


def _layer_activation(spec: ModelSpec, layer: int, batch: int, seq: int, s: float,
                      recompute: str, fused_attention: bool) -> float:
    n, d = batch * seq, spec.d_model
    if recompute == "full":
        return n * d * s
    elems = n * d * (2 * spec.norms_per_layer)  # each norm's input and output (the next op's input)
    if spec.is_mla:
        elems += mla_activation_elems(spec, n)
    else:
        elems += n * (spec.q_dim + 2 * spec.kv_dim)  # q, k, v
        elems += n * (spec.n_heads + spec.n_kv_heads) * spec.d_head if spec.qk_norm else 0
        elems += n * spec.q_dim  # attention output = out-projection input
    if spec.is_moe_layer(layer):
        elems += moe_activation_elems(spec, n)
    else:
        elems += n * spec.d_ff * (2 if spec.activation in ("swiglu", "geglu") else 1)  # act input(s)
        elems += n * spec.d_ff  # down-projection input
    extra = 0.0
    if recompute == "none":
        if fused_attention:
            extra = batch * spec.n_heads * seq * 4.0  # fp32 log-sum-exp per row
        else:
            elems += batch * spec.n_heads * seq * seq  # softmax output
    elif recompute != "selective":
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    return elems * s + extra


def activation_bytes_per_layer(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16",
                               recompute: str = "none", fused_attention: bool = True, *,
                               layer: int | None = None) -> float:
    """Bytes a layer keeps for its backward (no dropout masks: modern pre-training uses none);
    layer=None: the mean over the layers, so n_layers x this is the model's total.

    none: every op's saved input (Korthikanti et al. 2022 Sec. 4.1 without dropout: 32sbh + 2as^2b
    at 16 bits for d_ff = 4h, unfused); selective: without the attention square; full: the layer
    input only (the rest is rebuilt one layer at a time in the backward).
    """
    s = dtype_bytes(dtype)
    if layer is not None:
        return _layer_activation(spec, layer, batch, seq, s, recompute, fused_attention)
    total = sum(count * _layer_activation(spec, first, batch, seq, s, recompute, fused_attention)
                for first, count in layer_groups(spec))
    return total / spec.n_layers


def training_memory_bytes(spec: ModelSpec, precision: str = "bf16") -> dict[str, float]:
    """Model state for mixed-precision Adam (ZeRO paper, arXiv:1910.02054 Sec. 3.1): weights and
    gradients at `precision`, an fp32 master copy (when precision is not fp32) and two fp32 moments.
    Every expert's weights count (all are trained)."""
    p = param_count(spec)
    s = dtype_bytes(precision)
    master = 0.0 if s == 4 else 4.0 * p
    out = {"weights": s * p, "gradients": s * p, "master_weights": master, "optimizer": 8.0 * p}
    out["total"] = sum(out.values())
    return out
