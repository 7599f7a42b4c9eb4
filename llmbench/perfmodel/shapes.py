"""Per-model constants the vectorised model needs, read once from llmbench.models counting.

GEMM shapes of one layer per token, element-wise bytes per token, head GEMMs, parameters. Cached
per (spec, precision) so a sweep of many configurations costs one numpy pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from llmbench.models.counting import (
    dtype_bytes, embed_ops, head_ops, layer_ops, param_count,
)


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
    """layer GEMMs per token: (N, K, tp_splits_N) with M = tokens"""
    ew_bytes_tok: float
    """element-wise bytes per token per layer (norms, activations, residuals, rotary)"""
    ew_flops_tok: float
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


@lru_cache(maxsize=256)
def shape(spec, precision: str = "bf16") -> Shape:
    s = dtype_bytes(precision)
    lay = layer_ops(spec, 1, 1, precision)
    gemms, ew_b, ew_f = [], 0.0, 0.0
    for o in lay:
        if o.kind == "matmul":
            _, _, n, k = o.gemm
            split_n = o.name in ("qkv", "mlp_up")  # column-parallel (Megatron TP); the others row-parallel
            gemms.append((n, k, split_n))
        elif o.kind not in ("attention", "softmax"):
            ew_b += o.bytes
            ew_f += o.flops
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
    dense_layer = spec.n_layers * sum(n * k for n, k, _ in gemms)
    return Shape(L=spec.n_layers, d=spec.d_model, h=spec.n_heads, hd=spec.d_head, kvd=spec.kv_dim,
                 V=spec.vocab_size, s=s, gemms=tuple(gemms), ew_bytes_tok=ew_b, ew_flops_tok=ew_f,
                 head_tok=tuple(head_tok), head_seq=tuple(head_seq), outer_bytes_tok=outer_b,
                 params=param_count(spec), dense_params=dense_layer,
                 layer_params=sum(n * k for n, k, _ in gemms), causal=spec.causal)

