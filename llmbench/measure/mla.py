"""Multi-head latent attention in torch (DeepSeek-V2 arXiv:2405.04434 Sec. 2.1, DeepSeek-V3
arXiv:2412.19437 Sec. 2.1.1), for training and prefill.

    from llmbench.models import get_model
    from llmbench.measure.modeling import build_model
    from llmbench.models.spec import resize
    model = build_model(resize(get_model("deepseek-v3"), n_layers=4, d_model=64, n_heads=4, ...))

Queries through a low-rank pair (W_DQ, norm, W_UQ), keys and values from one compressed latent
(W_DKV, norm, W_UKV) plus a rotary key shared by all heads; the same non-absorbed form
`llmbench.models.mla` counts, so FlopCounterMode sees its matmul FLOPs exactly. Generation with a
latent KV cache is not built here (models/ counts it, in the absorbed form).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llmbench.measure.layers import apply_rotary, attention_mask, make_norm, rotary_cos_sin
from llmbench.models.spec import ModelSpec


class MLAttention(nn.Module):
    def __init__(self, spec: ModelSpec, window: int = 0):
        super().__init__()
        d, h, rq, rkv = spec.d_model, spec.n_heads, spec.q_lora_rank, spec.kv_lora_rank
        self.h, self.nope, self.rope, self.vd = h, spec.qk_nope_head_dim, spec.qk_rope_head_dim, spec.v_head_dim
        self.window, self.rkv = window, rkv
        qk = self.nope + self.rope
        if rq:
            self.q_a = nn.Linear(d, rq, bias=False)
            self.q_a_norm = make_norm(spec, rq)
            self.q_b = nn.Linear(rq, h * qk, bias=False)
        else:
            self.q_proj = nn.Linear(d, h * qk, bias=False)
        self.kv_a = nn.Linear(d, rkv + self.rope, bias=False)
        self.kv_a_norm = make_norm(spec, rkv)
        self.kv_b = nn.Linear(rkv, h * (self.nope + self.vd), bias=False)
        self.proj = nn.Linear(h * self.vd, d, bias=False)

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        if cache is not None:
            raise ValueError("latent attention (MLA) is built without a KV cache")
        B, T, C = x.shape
        h, qk = self.h, self.nope + self.rope
        q = self.q_b(self.q_a_norm(self.q_a(x))) if hasattr(self, "q_a") else self.q_proj(x)
        q = q.view(B, T, h, qk).transpose(1, 2)  # (B, h, T, nope + rope)
        c, k_rope = self.kv_a(x).split((self.rkv, self.rope), dim=-1)  # (B, T, rkv), (B, T, rope)
        kv = self.kv_b(self.kv_a_norm(c)).view(B, T, h, self.nope + self.vd).transpose(1, 2)
        k_nope, v = kv.split((self.nope, self.vd), dim=-1)  # (B, h, T, nope), (B, h, T, vd)
        cos, sin = rotary_cos_sin(self.rope, torch.arange(T, device=x.device), q.dtype)
        q_nope, q_rope = q.split((self.nope, self.rope), dim=-1)
        q = torch.cat((q_nope, apply_rotary(q_rope, cos, sin)), dim=-1)
        k_rope = apply_rotary(k_rope.unsqueeze(1), cos, sin).expand(B, h, T, self.rope)  # shared
        k = torch.cat((k_nope, k_rope), dim=-1)  # (B, h, T, nope + rope)
        if self.window:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask(T, 0, self.window, x.device))
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, h * self.vd))  # (B, T, C)
