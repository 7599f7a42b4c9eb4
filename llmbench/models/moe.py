"""Mixture-of-experts counting: router, routed experts at top-k, shared experts, capacity (no torch).

    from llmbench.models import get_model
    from llmbench.models.counting import active_param_count
    from llmbench.models.moe import expert_weight_bytes_read
    spec = get_model("mixtral-8x7b")
    active_param_count(spec)                    # 12.9B of 46.7B (counting.py: it needs param_count)
    expert_weight_bytes_read(spec, tokens=1)    # decode at batch 1: only 2 experts per layer read

    python -m llmbench.models          # the MoE tables of docs/models.md

An MoE layer replaces the dense MLP with: a router GEMM (d x E), a score (softmax or sigmoid) and
top-k choice, a dispatch that groups each token's k copies by expert, the experts' GEMMs over
tokens x k rows (dropless) or over E x capacity padded slots (capacity_factor), the weighted
combine of the k outputs, and shared experts every token goes through. Each expert is a gated
(SwiGLU/GeGLU) or plain GELU MLP of width d_ff_expert.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .ops import ACT_FLOPS, SIGMOID_FLOPS, SOFTMAX_FLOPS, Op, dtype_bytes, ew, matmul
from .spec import ModelSpec


@dataclass(frozen=True, kw_only=True)
class Dispatch:
    """Where `tokens` tokens of one MoE layer go, with perfectly balanced routing."""

    tokens: int
    assignments: int
    """tokens x top-k token-expert pairs"""
    capacity_per_expert: int | None
    """slots per expert (None: dropless)"""
    rows_computed: int
    """rows the expert GEMMs run: assignments (dropless) or n_experts x capacity (padded)"""
    padded_rows: int
    """empty slots computed anyway (capacity above the balanced load)"""
    dropped_assignments: int
    """assignments over capacity, skipped (their token keeps only the residual); at balanced load
    this is 0 for capacity_factor >= 1; imbalanced routing drops more"""


def _gated(spec: ModelSpec) -> bool:
    return spec.activation in ("swiglu", "geglu")


def mlp_params(spec: ModelSpec, width: int) -> int:
    """One MLP d -> width -> d: gated (3 matrices) or plain (2), with biases if the family has them."""
    if _gated(spec):
        return 3 * spec.d_model * width + ((2 * width + spec.d_model) if spec.biases else 0)
    return 2 * spec.d_model * width + ((width + spec.d_model) if spec.biases else 0)


def expert_params(spec: ModelSpec) -> int:
    """Parameters of one routed expert."""
    return mlp_params(spec, spec.d_ff_expert)


def moe_layer_params(spec: ModelSpec) -> dict[str, int]:
    """Router (d x E, + E with DeepSeek's selection bias), routed and shared experts of one MoE layer."""
    E = spec.n_experts
    shared = mlp_params(spec, spec.n_shared_experts * spec.d_ff_expert) if spec.n_shared_experts else 0
    return {"router": spec.d_model * E + (E if spec.router_bias else 0),
            "experts": E * expert_params(spec), "shared_experts": shared}


def expert_capacity(spec: ModelSpec, tokens: int) -> int | None:
    """Slots per expert: ceil(capacity_factor x tokens x k / E) (Megatron-core, GShard); None: dropless."""
    if spec.capacity_factor is None:
        return None
    return math.ceil(spec.capacity_factor * tokens * spec.n_experts_active / spec.n_experts)


def dispatch(spec: ModelSpec, tokens: int) -> Dispatch:
    """Assignments, computed rows, padding and drops of one MoE layer for `tokens` tokens."""
    assignments = tokens * spec.n_experts_active
    cap = expert_capacity(spec, tokens)
    if cap is None:
        return Dispatch(tokens=tokens, assignments=assignments, capacity_per_expert=None,
                        rows_computed=assignments, padded_rows=0, dropped_assignments=0)
    slots = spec.n_experts * cap
    return Dispatch(tokens=tokens, assignments=assignments, capacity_per_expert=cap,
                    rows_computed=slots, padded_rows=max(0, slots - assignments),
                    dropped_assignments=max(0, assignments - slots))


def expected_experts_hit(spec: ModelSpec, tokens: int) -> float:
    """Distinct routed experts one MoE layer uses for `tokens` tokens when each token picks k of E
    uniformly: E (1 - (1 - k/E)^tokens). Padded capacity runs every expert."""
    if spec.capacity_factor is not None:
        return float(spec.n_experts)
    E, k = spec.n_experts, spec.n_experts_active
    return E * (1.0 - (1.0 - k / E) ** tokens)


def expert_weight_bytes_read(spec: ModelSpec, tokens: int, dtype: str = "bf16") -> float:
    """Bytes of routed and shared expert weights a forward pass over `tokens` tokens reads, all MoE
    layers together (uniform routing): at batch 1 decode only k experts per layer, at large batch
    all of them. The router and the attention weights are not included."""
    if not spec.is_moe:
        return 0.0
    per_layer = expected_experts_hit(spec, tokens) * expert_params(spec) + moe_layer_params(spec)["shared_experts"]
    return spec.n_moe_layers * per_layer * dtype_bytes(dtype)


def moe_mlp_ops(spec: ModelSpec, n: int, s: float) -> list[Op]:
    """Forward ops of one MoE MLP over n tokens at s bytes per element."""
    d, E, k, fe = spec.d_model, spec.n_experts, spec.n_experts_active, spec.d_ff_expert
    disp = dispatch(spec, n)
    rows, hit = disp.rows_computed, expected_experts_hit(spec, n)
    gated, bias = _gated(spec), spec.biases
    up_n = 2 * fe if gated else fe
    score = SOFTMAX_FLOPS if spec.router_score == "softmax" else SIGMOID_FLOPS
    ops = [matmul("router", "layer", n, E, d, s, weight_params=d * E + (E if spec.router_bias else 0)),
           Op("router_topk", "elementwise", "layer", float(n * E * score + (2 * n * k if spec.router_norm_topk else 0)),
              0.0, n * E * s, 2 * n * k * s),
           Op("moe_dispatch", "elementwise", "layer", 0.0, 0.0, n * d * s, rows * d * s)]
    up_w, down_w = d * up_n + (up_n if bias else 0), fe * d + (d if bias else 0)
    ops.append(matmul("expert_up", "layer", rows, up_n, d, s, bias=bias, weight_read=hit * up_w,
                      weight_params=E * up_w))
    ops.append(ew("expert_act", "elementwise", "layer", rows * fe, ACT_FLOPS[spec.activation], s,
                  reads=2 if gated else 1))
    ops.append(matmul("expert_down", "layer", rows, d, fe, s, bias=bias, weight_read=hit * down_w,
                      weight_params=E * down_w))
    kept = disp.assignments - disp.dropped_assignments
    ops.append(Op("moe_combine", "elementwise", "layer", 2.0 * kept * d, 0.0, (kept * d + kept) * s, n * d * s))
    if spec.n_shared_experts:
        fs = spec.n_shared_experts * fe
        ops.append(matmul("shared_up", "layer", n, 2 * fs if gated else fs, d, s, bias=bias))
        ops.append(ew("shared_act", "elementwise", "layer", n * fs, ACT_FLOPS[spec.activation], s,
                      reads=2 if gated else 1))
        ops.append(matmul("shared_down", "layer", n, d, fs, s, bias=bias))
        ops.append(ew("shared_add", "elementwise", "layer", n * d, 1, s, reads=2))
    return ops


def moe_activation_elems(spec: ModelSpec, n: int) -> float:
    """Elements one MoE MLP saves for its backward (its input is counted with the norm before it):
    router probabilities, the dispatched rows, the experts' activation inputs and down-projection
    inputs, the expert outputs the combine weighs, and the shared experts' tensors."""
    rows = dispatch(spec, n).rows_computed
    fe, gated = spec.d_ff_expert, _gated(spec)
    elems = n * spec.n_experts + rows * spec.d_model  # probabilities, dispatched inputs
    elems += rows * fe * (2 if gated else 1) + rows * fe  # activation input(s), down input
    elems += rows * spec.d_model  # expert outputs (for the gate-weight gradient)
    if spec.n_shared_experts:
        fs = spec.n_shared_experts * fe
        elems += n * fs * (2 if gated else 1) + n * fs
    return float(elems)

