"""Mixture-of-experts MLP in torch: router, dropless top-k dispatch, grouped experts, shared experts.

    from llmbench.models import get_model
    from llmbench.measure.modeling import build_model
    model = build_model(get_model("gpt-moe-tiny"))  # its MoE layers are built here

Per MoE layer: a linear gate scores the E experts (softmax, or sigmoid with DeepSeek's selection
bias), each token keeps its top-k (weights renormalised as Mixtral and Qwen3-MoE do), the n x k
token copies are sorted by expert and each expert runs one GEMM pair over its rows (dropless: no
capacity, nothing dropped or padded), the outputs are weighted and summed back per token, and shared
experts add their output for every token. The GEMMs FlopCounterMode sees are exactly
`llmbench.models.moe.moe_mlp_ops`' matmul FLOPs: router n d E, experts over the n k rows, shared
experts over n (tests/test_measure_modeling.py).

Not built: capacity dropping (spec.capacity_factor is counted, not run), DeepSeek's group-limited
choice (n_group / topk_group) and routed scaling factor, and a load-balancing loss.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llmbench.measure.layers import MLP
from llmbench.models.spec import ModelSpec


def _act(spec: ModelSpec):
    return F.silu if spec.activation == "swiglu" else (lambda u: F.gelu(u, approximate="tanh"))


class Router(nn.Module):
    """Linear gate, score, top-k; returns the k weights and expert ids of every token."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.k, self.score, self.renorm = spec.n_experts_active, spec.router_score, spec.router_norm_topk
        self.gate = nn.Linear(spec.d_model, spec.n_experts, bias=False)
        # DeepSeek-V3's e_score_correction_bias: moves the choice, not the weights; set by a
        # balancing rule outside the gradient (arXiv:2412.19437 Sec. 2.1.2)
        self.choice_bias = nn.Parameter(torch.zeros(spec.n_experts), requires_grad=False) \
            if spec.router_bias else None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.gate(x).float()  # (n, E)
        probs = logits.softmax(dim=-1) if self.score == "softmax" else logits.sigmoid()
        choice = probs + self.choice_bias if self.choice_bias is not None else probs
        idx = choice.topk(self.k, dim=-1).indices  # (n, k)
        weights = probs.gather(-1, idx)  # (n, k)
        if self.renorm:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights.to(x.dtype), idx


class GroupedExperts(nn.Module):
    """E expert MLPs with stacked weights (E, out, in), run one expert at a time over its rows."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        E, d, f = spec.n_experts, spec.d_model, spec.d_ff_expert
        self.gated, self.act = spec.activation in ("swiglu", "geglu"), _act(spec)
        up = 2 * f if self.gated else f
        self.w_up = nn.Parameter(torch.empty(E, up, d))
        self.w_down = nn.Parameter(torch.empty(E, d, f))
        self.b_up = nn.Parameter(torch.empty(E, up)) if spec.biases else None
        self.b_down = nn.Parameter(torch.empty(E, d)) if spec.biases else None

    def forward(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """x (rows, C) sorted by expert, counts[e] rows for expert e; returns (rows, C)."""
        out = []
        for e, xe in enumerate(x.split(counts)):
            u = F.linear(xe, self.w_up[e], None if self.b_up is None else self.b_up[e])
            if self.gated:
                gate, up = u.chunk(2, dim=-1)
                u = self.act(gate) * up
            else:
                u = self.act(u)
            out.append(F.linear(u, self.w_down[e], None if self.b_down is None else self.b_down[e]))
        return torch.cat(out)

    @torch.no_grad()
    def reset_expert_weights(self, std: float, proj_std: float) -> None:
        nn.init.normal_(self.w_up, 0.0, std)
        nn.init.normal_(self.w_down, 0.0, proj_std)  # an output projection, like MLP.proj
        for b in (self.b_up, self.b_down):
            if b is not None:
                nn.init.zeros_(b)


class MoE(nn.Module):
    """Router + dropless routed experts (+ shared experts) in place of a dense MLP."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.k = spec.n_experts_active
        self.n_experts = spec.n_experts
        self.router = Router(spec)
        self.experts = GroupedExperts(spec)
        self.shared = MLP(spec, d_ff=spec.n_shared_experts * spec.d_ff_expert) \
            if spec.n_shared_experts else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        flat = x.reshape(B * T, C)  # (n, C)
        weights, idx = self.router(flat)  # (n, k)
        order = idx.flatten().argsort(stable=True)  # the n k token copies grouped by expert
        token = order // self.k  # (n k,) token of each sorted row
        counts = torch.bincount(idx.flatten(), minlength=self.n_experts).tolist()
        y = self.experts(flat[token], counts)  # (n k, C)
        y = y * weights.flatten()[order].unsqueeze(-1)
        out = torch.zeros_like(flat).index_add_(0, token, y)  # (n, C): sum of the k outputs
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view(B, T, C)
