"""Multi-head latent attention (DeepSeek-V2 arXiv:2405.04434 Sec. 2.1; DeepSeek-V3
arXiv:2412.19437 Sec. 2.1.1) counting: parameters, FLOPs, KV cache (no torch).

    llmbench models show deepseek-v3

Per layer, with d the model width, h heads, r_q / r_kv the LoRA ranks, n / r / v the nope, rope
and value head widths:

    q   = W_UQ · norm(W_DQ x)                      d -> r_q -> h (n + r)   (W_Q x when r_q = 0)
    c, k_rope = W_DKV x                            d -> r_kv + r           (k_rope shared by heads)
    k_nope, v = W_UK c, W_UV norm(c)               r_kv -> h (n + v)
    o   = W_O · attention(q, [k_nope, k_rope], v)  h v -> d

Training and prefill are counted in this (non-absorbed) form, as the Hugging Face model runs it.
The KV cache holds c and k_rope: (r_kv + r) elements per token per layer (DeepSeek-V3: 576, the
cache of 2.25 GQA groups of 128). Decode is counted in the absorbed form DeepSeek's and vLLM's
kernels use: W_UK folded into the query, attention over the cached latent, W_UV after it.
"""
from __future__ import annotations

from .ops import ROTARY_FLOPS, Op, matmul, norm, norm_params
from .spec import ModelSpec


def mla_params(spec: ModelSpec) -> int:
    """Attention parameters of one MLA layer (no biases: DeepSeek's attention_bias is false)."""
    d, h = spec.d_model, spec.n_heads
    qk = spec.qk_nope_head_dim + spec.qk_rope_head_dim
    if spec.q_lora_rank:
        q = d * spec.q_lora_rank + norm_params(spec, spec.q_lora_rank) + spec.q_lora_rank * h * qk
    else:
        q = d * h * qk
    kv = d * (spec.kv_lora_rank + spec.qk_rope_head_dim) + norm_params(spec, spec.kv_lora_rank)
    kv += spec.kv_lora_rank * h * (spec.qk_nope_head_dim + spec.v_head_dim)
    return q + kv + h * spec.v_head_dim * d


def mla_projection_ops(spec: ModelSpec, n: int, s: float) -> list[Op]:
    """The projections of one MLA layer over n tokens, up to (not including) the attention core."""
    d, h, rq, rkv = spec.d_model, spec.n_heads, spec.q_lora_rank, spec.kv_lora_rank
    qk, rope = spec.qk_nope_head_dim + spec.qk_rope_head_dim, spec.qk_rope_head_dim
    if rq:
        ops = [matmul("q_a", "layer", n, rq, d, s), norm("q_a_norm", "layer", spec, n, s, width=rq),
               matmul("q_b", "layer", n, h * qk, rq, s)]
    else:
        ops = [matmul("q_proj", "layer", n, h * qk, d, s)]
    ops += [matmul("kv_a", "layer", n, rkv + rope, d, s),
            norm("kv_a_norm", "layer", spec, n, s, width=rkv),
            matmul("kv_b", "layer", n, h * (spec.qk_nope_head_dim + spec.v_head_dim), rkv, s)]
    rot = n * (h + 1) * rope  # every query head, one shared key
    ops.append(Op("rotary", "elementwise", "layer", float(rot * ROTARY_FLOPS), 0.0, rot * s, rot * s))
    return ops


def mla_kv_elems_per_token(spec: ModelSpec) -> int:
    """Cached elements per token per layer: the latent c and the shared rope key."""
    return spec.kv_lora_rank + spec.qk_rope_head_dim


def mla_decode_extra_flops(spec: ModelSpec, context: int) -> float:
    """Per layer and new token, absorbed form: W_UK folded into the query (2 h n r_kv), scores over
    the cached latent and rope key (2 h (r_kv + r) context), values in the latent (2 h r_kv context)
    and W_UV after it (2 h r_kv v). Replaces kv_b and the attention core of the non-absorbed form."""
    h, rkv = spec.n_heads, spec.kv_lora_rank
    absorb = 2.0 * h * spec.qk_nope_head_dim * rkv + 2.0 * h * rkv * spec.v_head_dim
    core = 2.0 * h * (rkv + spec.qk_rope_head_dim) * context + 2.0 * h * rkv * context
    return absorb + core


def mla_activation_elems(spec: ModelSpec, n: int) -> float:
    """Elements one MLA layer saves between its input norm and the output projection: the query
    latent and its norm, q, the kv latent (+ rope key) and its norm, k, v, the attention output."""
    h, qk = spec.n_heads, spec.qk_nope_head_dim + spec.qk_rope_head_dim
    elems = 2 * spec.q_lora_rank + h * qk  # q_a output, its norm (q_b input), q
    elems += (spec.kv_lora_rank + spec.qk_rope_head_dim) + spec.kv_lora_rank  # kv_a out, its norm
    elems += h * qk + h * spec.v_head_dim  # k, v
    elems += h * spec.v_head_dim  # attention output = o_proj input
    return float(n * elems)
