"""Exact counting for a ModelSpec: parameters, FLOPs and bytes per op, memory. No torch.

Conventions (docs/models.md says why):
- A matmul of (M x K) @ (K x N) is 2*M*N*K FLOPs, as torch.utils.flop_counter counts it; a bias add
  is M*N more, counted in the op's `flops` but not in its `matmul_flops`.
- Attention scores and values are counted over the full T x T square even when causal (as PaLM
  Appendix B, Megatron arXiv:2104.04473 Eq. 3 and FlopCounterMode do); `causal_fraction` on an op
  says what share a causal kernel really computes.
- Backward = 2 x forward FLOPs for every op (input-gradient + weight-gradient GEMMs for matmuls;
  both operands' gradients for the attention matmuls; an approximation for element-wise ops).
- Non-matmul ops per element: layernorm 7, rmsnorm 4, gelu 8 (tanh form), silu*mul 5, softmax 5,
  residual add 1, rotary 3 per rotated element, cross-entropy 4 per logit.
"""
from __future__ import annotations

from dataclasses import dataclass

from .spec import ModelSpec

DTYPE_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "cbf16": 2.0, "fp8": 1.0}
NORM_FLOPS = {"layernorm": 7, "rmsnorm": 4}
ACT_FLOPS = {"gelu": 8, "swiglu": 5}
SOFTMAX_FLOPS = 5
ROTARY_FLOPS = 3
XENT_FLOPS = 4


def dtype_bytes(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown precision {dtype!r}; one of {', '.join(DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class Op:
    """One forward operation over a batch of B sequences of T tokens."""

    name: str
    kind: str
    """matmul | attention | norm | elementwise | softmax | embedding | loss"""
    where: str
    """embed | layer | head"""
    flops: float
    """forward FLOPs (matmul + bias + element-wise work)"""
    matmul_flops: float
    """the GEMM part only: what torch.utils.flop_counter counts"""
    bytes_read: float
    """forward bytes read at the op's dtype (weights included)"""
    bytes_written: float
    weight_params: int = 0
    """parameters the op reads (0 for none)"""
    gemm: tuple[int, int, int, int] | None = None
    """(count, M, N, K) for matmuls: `count` GEMMs of (M x K) @ (K x N)"""
    causal_fraction: float = 1.0
    """share of the op a causal kernel computes (about 1/2 for the attention square)"""

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def flops_bwd(self) -> float:
        return 2.0 * self.flops

    @property
    def bytes_bwd(self) -> float:
        # matmul: dX = dY W^T reads dY, W and writes dX; dW = X^T dY reads X, dY and writes dW:
        # twice the forward's X, W, Y traffic. Element-wise ops: read dY and the saved input, write dX.
        return 2.0 * self.bytes


def _matmul(name, where, b, m, n, k, s, *, bias=False, weight=True, count=1, causal_fraction=1.0):
    """count GEMMs of (m x k) @ (k x n); the right operand is a weight when `weight`."""
    mm = 2.0 * count * m * n * k
    flops = mm + (count * m * n if bias else 0.0)
    read = count * (m * k + k * n + (n if bias else 0)) * s
    return Op(name, "matmul" if weight else "attention", where, flops, mm, read, count * m * n * s,
              weight_params=(k * n + (n if bias else 0)) if weight else 0,
              gemm=(count, m, n, k), causal_fraction=causal_fraction)


def _ew(name, kind, where, elements, flops_per, s, *, reads=1, params=0):
    """element-wise op over `elements` outputs reading `reads` tensors of the same size"""
    return Op(name, kind, where, float(elements * flops_per), 0.0, (reads * elements + params) * s,
              elements * s, weight_params=params)


def _norm(name, where, spec, n, s):
    per = 2 if spec.norm == "layernorm" else 1
    return _ew(name, "norm", where, n * spec.d_model, NORM_FLOPS[spec.norm], s, params=per * spec.d_model)


def layer_ops(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16",
              fused_attention: bool = True) -> list[Op]:
    """Forward ops of one transformer layer for `batch` sequences of `seq` tokens.

    fused_attention: scores and probabilities stay on chip (FlashAttention / SDPA) — they cost
    FLOPs but no memory traffic; False writes and reads the B*h*T*T scores as eager PyTorch does.
    """
    s = dtype_bytes(dtype)
    B, T, d, f = batch, seq, spec.d_model, spec.d_ff
    n, h, hd, kvd = B * T, spec.n_heads, spec.d_head, spec.kv_dim
    cf = 0.5 * (T + 1) / T if spec.causal else 1.0
    ops = [_norm("norm_attn", "layer", spec, n, s)]
    ops.append(_matmul("qkv", "layer", B, n, d + 2 * kvd, d, s, bias=spec.attn_biases))
    if spec.position == "rotary":
        rot = int(round(spec.rotary_pct * hd))
        ops.append(_ew("rotary", "elementwise", "layer", n * (h + spec.n_kv_heads) * rot, ROTARY_FLOPS, s))
    scores = B * h * T * T
    qk = _matmul("attn_scores", "layer", B, T, T, hd, s, weight=False, count=B * h, causal_fraction=cf)
    pv = _matmul("attn_values", "layer", B, T, hd, T, s, weight=False, count=B * h, causal_fraction=cf)
    sm = _ew("softmax", "softmax", "layer", scores, SOFTMAX_FLOPS, s)
    sm = Op(sm.name, sm.kind, sm.where, sm.flops + scores, 0.0, sm.bytes_read, sm.bytes_written,
            causal_fraction=cf)  # + 1 FLOP per score for the 1/sqrt(d_head) scale
    if fused_attention:
        # Q, K, V read once, output written once; scores never leave the chip
        qk = Op(qk.name, qk.kind, qk.where, qk.flops, qk.matmul_flops, (n * d + n * kvd) * s, 0.0,
                gemm=qk.gemm, causal_fraction=cf)
        sm = Op(sm.name, sm.kind, sm.where, sm.flops, 0.0, 0.0, 0.0, causal_fraction=cf)
        pv = Op(pv.name, pv.kind, pv.where, pv.flops, pv.matmul_flops, n * kvd * s, n * d * s,
                gemm=pv.gemm, causal_fraction=cf)
    ops += [qk, sm, pv]
    ops.append(_matmul("attn_out", "layer", B, n, d, d, s, bias=spec.attn_biases))
    if spec.parallel_residual:
        if spec.family != "gptj":  # NeoX: a second norm for the MLP branch
            ops.append(_norm("norm_mlp", "layer", spec, n, s))
    else:
        ops.append(_ew("residual_attn", "elementwise", "layer", n * d, 1, s, reads=2))
        ops.append(_norm("norm_mlp", "layer", spec, n, s))
    if spec.activation == "swiglu":
        ops.append(_matmul("mlp_up", "layer", B, n, 2 * f, d, s, bias=spec.biases))
        ops.append(_ew("act", "elementwise", "layer", n * f, ACT_FLOPS["swiglu"], s, reads=2))
    else:
        ops.append(_matmul("mlp_up", "layer", B, n, f, d, s, bias=spec.biases))
        ops.append(_ew("act", "elementwise", "layer", n * f, ACT_FLOPS["gelu"], s))
    ops.append(_matmul("mlp_down", "layer", B, n, d, f, s, bias=spec.biases))
    if spec.parallel_residual:  # x + attn + mlp
        ops.append(_ew("residual", "elementwise", "layer", n * d, 2, s, reads=3))
    else:
        ops.append(_ew("residual_mlp", "elementwise", "layer", n * d, 1, s, reads=2))
    return ops


def embed_ops(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16") -> list[Op]:
    s = dtype_bytes(dtype)
    n, d = batch * seq, spec.d_model
    ops = [Op("tok_embed", "embedding", "embed", 0.0, 0.0, n * d * s + n * 4, n * d * s,
              weight_params=spec.vocab_size * d)]
    if spec.position == "learned":
        ops.append(_ew("pos_embed", "elementwise", "embed", n * d, 1, s, reads=2, params=0))
    if spec.n_token_types:
        ops.append(_ew("type_embed", "elementwise", "embed", n * d, 1, s, reads=2))
    if spec.embedding_norm:
        ops.append(_norm("embed_norm", "embed", spec, n, s))
    return ops


def head_ops(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16", *,
             loss: bool = False, last_token_only: bool = False) -> list[Op]:
    """Ops after the last layer. last_token_only: logits of the last position only (generation)."""
    s = dtype_bytes(dtype)
    B, d, V = batch, spec.d_model, spec.vocab_size
    n = B if last_token_only else B * seq
    ops = [_norm("final_norm", "head", spec, n, s)] if spec.final_norm else []
    if spec.head == "lm":
        ops.append(_matmul("lm_head", "head", B, n, V, d, s, bias=spec.lm_head_bias))
        if loss:
            ops.append(_ew("loss", "loss", "head", n * V, XENT_FLOPS, s))
    elif spec.head == "mlm":
        ops.append(_matmul("mlm_dense", "head", B, n, d, d, s, bias=True))
        ops.append(_ew("mlm_act", "elementwise", "head", n * d, ACT_FLOPS["gelu"], s))
        ops.append(_norm("mlm_norm", "head", spec, n, s))
        ops.append(_matmul("mlm_decoder", "head", B, n, V, d, s, bias=True))
        if loss:
            ops.append(_ew("loss", "loss", "head", n * V, XENT_FLOPS, s))
    elif spec.head == "cls":
        ops.append(_matmul("pooler", "head", B, B, d, d, s, bias=True))
        ops.append(_ew("pooler_act", "elementwise", "head", B * d, ACT_FLOPS["gelu"], s))
        ops.append(_matmul("classifier", "head", B, B, spec.n_classes, d, s, bias=True))
        if loss:
            ops.append(_ew("loss", "loss", "head", B * spec.n_classes, XENT_FLOPS, s))
    return ops


def model_ops(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16", *,
              fused_attention: bool = True, loss: bool = False) -> list[Op]:
    """All forward ops of the model; layer ops appear once per layer."""
    layer = layer_ops(spec, batch, seq, dtype, fused_attention)
    return (embed_ops(spec, batch, seq, dtype) + layer * spec.n_layers
            + head_ops(spec, batch, seq, dtype, loss=loss))


# ---------------------------------------------------------------- parameters

def param_breakdown(spec: ModelSpec) -> dict[str, int]:
    """Parameters by part. Tied LM heads add nothing; the learned-position table counts in full."""
    d, f, V = spec.d_model, spec.d_ff, spec.vocab_size
    norm = 2 * d if spec.norm == "layernorm" else d
    n_norms = 1 if spec.family == "gptj" else 2
    attn = d * (d + 2 * spec.kv_dim) + d * d
    if spec.attn_biases:
        attn += (d + 2 * spec.kv_dim) + d
    if spec.activation == "swiglu":
        mlp = 3 * d * f + ((2 * f + d) if spec.biases else 0)
    else:
        mlp = 2 * d * f + ((f + d) if spec.biases else 0)
    layer = n_norms * norm + attn + mlp
    out = {
        "embedding": V * d + (spec.max_seq_len * d if spec.position == "learned" else 0)
        + spec.n_token_types * d + (norm if spec.embedding_norm else 0),
        "layers": spec.n_layers * layer,
        "final_norm": norm if spec.final_norm else 0,
        "lm_head": 0, "mlm_head": 0, "pooler": 0, "classifier": 0,
    }
    if spec.head == "lm":
        out["lm_head"] = (0 if spec.tied_embeddings else V * d) + (V if spec.lm_head_bias else 0)
    elif spec.head == "mlm":
        out["mlm_head"] = d * d + d + norm + V + (0 if spec.tied_embeddings else V * d)
    elif spec.head == "cls":
        out["pooler"] = d * d + d
        out["classifier"] = d * spec.n_classes + spec.n_classes
    return out


def param_count(spec: ModelSpec, *, classifier: bool = True) -> int:
    """All parameters; classifier=False leaves out a task classifier (BertModel with its pooler)."""
    parts = param_breakdown(spec)
    if not classifier:
        parts.pop("classifier")
    return sum(parts.values())


def matmul_weight_params(spec: ModelSpec) -> int:
    """Parameters that act as a matmul weight on every token (embedding matrix only if it is the LM head)."""
    ops = layer_ops(spec, 1, 1, "bf16")
    per_layer = sum(o.gemm[2] * o.gemm[3] for o in ops if o.kind == "matmul")
    head = spec.vocab_size * spec.d_model if spec.head in ("lm", "mlm") else 0
    return spec.n_layers * per_layer + head


# ---------------------------------------------------------------- FLOPs

RECOMPUTE = ("none", "selective", "full")


def training_flops(spec: ModelSpec, batch: int, seq: int, recompute: str = "none",
                   causal_discount: bool = False) -> dict[str, float]:
    """FLOPs of one training step (forward + backward [+ recompute]) for batch x seq tokens.

    Returns forward, backward, recompute, model (fwd + bwd: the MFU numerator) and hardware
    (model + recompute: what the device executes). selective recomputes the attention core
    (scores, softmax, values: Korthikanti et al. 2022, arXiv:2205.05198); full recomputes every
    layer's forward (not embeddings or head), as Megatron's Table 1 counts.
    causal_discount: count only the causal half of the attention square (what flash kernels do).
    """
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    layer = layer_ops(spec, batch, seq)
    w = (lambda o: o.causal_fraction) if causal_discount else (lambda o: 1.0)
    layer_fwd = sum(o.flops * w(o) for o in layer)
    attn_core = sum(o.flops * w(o) for o in layer if o.name in ("attn_scores", "softmax", "attn_values"))
    outer = embed_ops(spec, batch, seq) + head_ops(spec, batch, seq, loss=True)
    fwd = spec.n_layers * layer_fwd + sum(o.flops for o in outer)
    re = {"none": 0.0, "selective": attn_core, "full": layer_fwd}[recompute] * spec.n_layers
    return {"forward": fwd, "backward": 2 * fwd, "recompute": re,
            "model": 3 * fwd, "hardware": 3 * fwd + re}


def flops_per_token(spec: ModelSpec, seq: int | None = None, *, training: bool = True) -> float:
    """Training: model FLOPs per token of a step at context `seq` (default max_seq_len).
    Inference: forward FLOPs to generate one token at the end of a `seq`-long context with a KV cache."""
    T = seq or spec.max_seq_len
    if training:
        return training_flops(spec, 1, T)["model"] / T
    return decode_flops(spec, T)


def decode_flops(spec: ModelSpec, context: int, batch: int = 1) -> float:
    """Forward FLOPs for one new token per sequence attending to `context` cached tokens."""
    hd = spec.d_head
    layer = [o for o in layer_ops(spec, batch, 1) if o.name not in ("attn_scores", "attn_values", "softmax")]
    per_layer = sum(o.flops for o in layer)
    # q @ K^T over the cache and p @ V: 2 * 2 * h * hd * context, plus softmax and scale
    per_layer += batch * (4.0 * spec.n_heads * hd * context + (SOFTMAX_FLOPS + 1) * spec.n_heads * context)
    outer = embed_ops(spec, batch, 1) + head_ops(spec, batch, 1, last_token_only=True)
    return spec.n_layers * per_layer + sum(o.flops for o in outer)


def closed_form_flops_per_token(spec: ModelSpec, seq: int) -> float:
    """PaLM Appendix B (arXiv:2204.02311): 6N + 12 L d T, N the non-embedding + LM-head weights."""
    return 6.0 * matmul_weight_params(spec) + 12.0 * spec.n_layers * spec.d_model * seq


# ---------------------------------------------------------------- memory

def kv_cache_bytes_per_token(spec: ModelSpec, dtype: str = "bf16") -> float:
    """K and V of every layer for one token: 2 * L * n_kv_heads * d_head * bytes."""
    return 2.0 * spec.n_layers * spec.kv_dim * dtype_bytes(dtype)


def activation_bytes_per_layer(spec: ModelSpec, batch: int, seq: int, dtype: str = "bf16",
                               recompute: str = "none", fused_attention: bool = True) -> float:
    """Bytes one layer keeps for its backward (no dropout masks: modern pre-training uses none).

    none: every op's saved input (Korthikanti et al. 2022 Sec. 4.1 without dropout: 32sbh + 2as^2b
    at 16 bits for d_ff = 4h, unfused); selective: without the attention square; full: the layer
    input only (the rest is rebuilt one layer at a time in the backward).
    """
    s = dtype_bytes(dtype)
    n, d, f = batch * seq, spec.d_model, spec.d_ff
    if recompute == "full":
        return n * d * s
    n_norms = 1 if spec.family == "gptj" else 2
    elems = n * d * (2 * n_norms)  # each norm's input and output (the next matmul's input)
    elems += n * (d + 2 * spec.kv_dim)  # q, k, v
    elems += n * d  # attention output = out-projection input
    elems += n * f * (2 if spec.activation == "swiglu" else 1)  # activation input(s)
    elems += n * f  # down-projection input
    extra = 0.0
    if recompute == "none":
        if fused_attention:
            extra = batch * spec.n_heads * seq * 4.0  # fp32 log-sum-exp per row
        else:
            elems += batch * spec.n_heads * seq * seq  # softmax output
    elif recompute != "selective":
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    return elems * s + extra


def training_memory_bytes(spec: ModelSpec, precision: str = "bf16") -> dict[str, float]:
    """Model state for mixed-precision Adam (ZeRO paper, arXiv:1910.02054 Sec. 3.1): weights and
    gradients at `precision`, an fp32 master copy (when precision is not fp32) and two fp32 moments."""
    p = param_count(spec)
    s = dtype_bytes(precision)
    master = 0.0 if s == 4 else 4.0 * p
    out = {"weights": s * p, "gradients": s * p, "master_weights": master, "optimizer": 8.0 * p}
    out["total"] = sum(out.values())
    return out
