"""Per-model constants the vectorised model needs, read once from llmbench.models counting.

GEMM shapes of one layer per token, element-wise bytes per token, head GEMMs, parameters, and for a
mixture-of-experts model the MLP part apart (`MoeShape`: router and shared experts per token, one
routed expert's GEMMs, the dense layers' MLP). Cached per (spec, precision) so a sweep of many
configurations costs one numpy pass.

    from llmbench.perfmodel.shapes import shape, weights_per_token
    weights_per_token(shape(get_model("mixtral-8x7b")))   # layer weights one token multiplies by
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from llmbench.models.counting import (
    dtype_bytes, embed_ops, head_ops, layer_ops, param_breakdown, param_count,
)

#: column-parallel GEMMs (Megatron TP splits N); the others are row-parallel (K split)
COLUMN = ("qkv", "q_proj", "q_b", "kv_b", "mlp_up", "shared_up", "expert_up")
#: GEMMs of a MoE layer's MLP part (they leave Shape.gemms for MoeShape)
MOE_TOKEN = ("router", "shared_up", "shared_down")
EXPERT = ("expert_up", "expert_down")
DENSE_MLP = ("mlp_up", "mlp_down")


@dataclass(frozen=True, kw_only=True)
class MoeShape:
    """The MLP part of a mixture-of-experts model, all layers (perfmodel/moe.py times it)."""

    moe_layers: int
    dense_layers: int
    """layers with a dense MLP (DeepSeek-V3: the first 3)"""
    E: int
    """routed experts per MoE layer"""
    k: int
    """experts per token (top-k)"""
    rows_per_token: float
    """expert GEMM rows per token: k (dropless) or capacity_factor x k (padded capacity slots)"""
    padded: bool
    """capacity slots are computed in full: every expert runs, whatever the tokens"""
    token_gemms: tuple
    """(N, K, column-parallel) with M = tokens, per MoE layer: router, shared experts"""
    expert_gemms: tuple
    """(N, K, column-parallel) of one routed expert, M = the rows routed to it"""
    dense_gemms: tuple
    """the dense MLP of a dense layer, M = tokens"""
    expert_params: int
    """routed experts' weights, every MoE layer (the part expert parallelism splits)"""


@dataclass(frozen=True)
class Shape:
    L: int
    d: int
    h: int
    hd: int
    kvd: int
    V: int
    s: float
    """bytes per element at the training precision"""
    gemms: tuple
    """layer GEMMs per token: (N, K, tp_splits_N) with M = tokens; a MoE model: attention only"""
    ew_bytes_tok: float
    """element-wise bytes per token per layer (norms, activations, residuals, rotary)"""
    ew_flops_tok: float
    ew_rep_bytes_tok: float
    """the part of ew_bytes_tok outside the tensor-parallel regions (layer norms, residual adds): split
    over a TP group only with sequence parallelism (params "sequence_parallel")"""
    head_tok: tuple
    """head GEMMs with M = tokens: (N, K)"""
    head_seq: tuple
    """head GEMMs with M = sequences (pooler, classifier): (N, K)"""
    outer_bytes_tok: float
    """embedding + head element-wise bytes per token"""
    params: int
    dense_params: int
    """matmul weights of the layers (what unstructured sparsity prunes)"""
    layer_params: int
    causal: bool
    kv_elems_tok: float = 0.0
    """KV-cache elements per token per layer (MLA: the latent and the rope key)"""
    decode_attn_flops_ctx: float = 0.0
    """attention FLOPs per layer of one new token per cached token (MLA: the absorbed form)"""
    moe: MoeShape | None = None

    def kept_params(self, wf):
        """Parameters counted with the layers' matmul weights at factor wf (the rest stay dense):
        with wf = 1 - sparsity, the non-zero weights a wafer stores, streams and updates."""
        return self.dense_params * wf + (self.params - self.dense_params)


def _nk(gemms) -> float:
    return float(sum(n * k for n, k, _ in gemms))


def _moe_shape(spec) -> MoeShape:
    lay = layer_ops(spec, 1, 1)
    pick = (lambda ops, names: tuple((o.gemm[2], o.gemm[3], o.name in COLUMN) for o in ops
                                     if o.kind == "matmul" and o.name in names))
    dense_first = next((i for i in range(spec.n_layers) if not spec.is_moe_layer(i)), None)
    dense = pick(layer_ops(spec, 1, 1, layer=dense_first), DENSE_MLP) if dense_first is not None else ()
    cf = spec.capacity_factor
    return MoeShape(moe_layers=spec.n_moe_layers, dense_layers=spec.n_layers - spec.n_moe_layers,
                    E=spec.n_experts, k=spec.n_experts_active,
                    rows_per_token=spec.n_experts_active * (cf if cf is not None else 1.0),
                    padded=cf is not None, token_gemms=pick(lay, MOE_TOKEN), expert_gemms=pick(lay, EXPERT),
                    dense_gemms=dense, expert_params=param_breakdown(spec)["experts"])


def _decode_attention(spec) -> tuple[float, float]:
    """(KV elements per token per layer, attention FLOPs per new token per cached token per layer)."""
    h = spec.n_heads
    if spec.is_mla:  # absorbed: scores over the latent + rope key, values in the latent (models/mla.py)
        r = spec.kv_lora_rank
        return float(r + spec.qk_rope_head_dim), 2.0 * h * (r + spec.qk_rope_head_dim) + 2.0 * h * r
    return 2.0 * spec.kv_dim, 2.0 * h * (spec.d_head + spec.d_head_v)


@lru_cache(maxsize=256)
def shape(spec, precision: str = "bf16") -> Shape:
    s = dtype_bytes(precision)
    n0 = 4096 if spec.capacity_factor is not None else 1  # capacity slots round up per layer call
    lay = layer_ops(spec, 1, n0, precision)
    gemms, ew_b, ew_f, ew_rep = [], 0.0, 0.0, 0.0
    skip = MOE_TOKEN + EXPERT if spec.is_moe else ()
    for o in lay:
        if o.kind == "matmul":
            if o.name not in skip:
                gemms.append((o.gemm[2], o.gemm[3], o.name in COLUMN))
        elif o.kind not in ("attention", "softmax"):
            ew_b += o.bytes / n0
            ew_f += o.flops / n0
            if o.kind == "norm" or o.name.startswith("residual"):  # on the whole hidden state
                ew_rep += o.bytes / n0
    # head GEMMs: those whose M grows with tokens (seq=2 doubles M) vs with sequences
    h2 = head_ops(spec, 1, 2, precision, loss=True)
    head_tok, head_seq, outer_b = [], [], 0.0
    for o in h2:
        if o.kind == "matmul":
            _, m, n, k = o.gemm
            (head_tok if m == 2 else head_seq).append((n, k))
        else:
            outer_b += o.bytes / 2
    outer_b += sum(o.bytes for o in embed_ops(spec, 1, 1, precision))
    moe = _moe_shape(spec) if spec.is_moe else None
    layer = _nk(gemms)
    if moe is None:
        dense_layer, rep = spec.n_layers * layer, layer
    else:
        per_moe = _nk(moe.token_gemms) + moe.E * _nk(moe.expert_gemms)
        dense_layer = spec.n_layers * layer + moe.moe_layers * per_moe + moe.dense_layers * _nk(moe.dense_gemms)
        rep = layer + per_moe
    kv, attn = _decode_attention(spec)
    return Shape(L=spec.n_layers, d=spec.d_model, h=spec.n_heads, hd=spec.d_head, kvd=spec.kv_dim,
                 V=spec.vocab_size, s=s, gemms=tuple(gemms), ew_bytes_tok=ew_b, ew_flops_tok=ew_f,
                 ew_rep_bytes_tok=ew_rep,
                 head_tok=tuple(head_tok), head_seq=tuple(head_seq), outer_bytes_tok=outer_b,
                 params=param_count(spec), dense_params=int(dense_layer), layer_params=int(rep),
                 causal=spec.causal, kv_elems_tok=kv, decode_attn_flops_ctx=attn, moe=moe)


def weights_per_token(sh: Shape) -> float:
    """Layer matmul weights one token multiplies by, all layers (routed experts at top-k): forward
    GEMM FLOPs per token = 2 x this (models/counting.matmul_weight_params, the head left out)."""
    total = sh.L * _nk(sh.gemms)
    m = sh.moe
    if m is not None:
        total += m.moe_layers * (_nk(m.token_gemms) + m.k * _nk(m.expert_gemms))
        total += m.dense_layers * _nk(m.dense_gemms)
    return total

def expert_fraction(sh) -> float:
    """Share of the parameters that are routed experts (what expert parallelism splits)."""
    return sh.moe.expert_params / sh.params if sh.moe is not None else 0.0


def params_per_device(sh, g):
    """Parameters of one device's model slice: the rest split by tp x pp, the routed experts by
    tp x pp x ep (what its gradient all-reduce and optimizer step cover before ZeRO)."""
    fe = expert_fraction(sh)
    return float(sh.params) * ((1.0 - fe) + fe / g.ep) / (g.tp * g.pp)
