"""The pieces the torch models are built of (norms, rotary embeddings, the KV cache, the
attention mask, the dense MLP), shared by measure/modeling.py, moe.py and mla.py so that none of
them imports another in a circle."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llmbench.models.spec import ModelSpec


class RMSNorm(nn.Module):
    """Zhang & Sennrich 2019 (arXiv:1910.07467), as Llama uses it."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def make_norm(spec: ModelSpec, width: int | None = None) -> nn.Module:
    if spec.norm == "rmsnorm":
        return RMSNorm(width or spec.d_model)
    return nn.LayerNorm(width or spec.d_model, eps=1e-12 if spec.family == "bert" else 1e-5)


def rotary_cos_sin(n_rot: int, positions: torch.Tensor, dtype: torch.dtype, base: float = 10000.0):
    """cos and sin (T, n_rot) for rotate-half rotary embeddings (Su et al. arXiv:2104.09864).
    Computed per call (cheap next to the matmuls), so a block holds no cached tensors."""
    inv_freq = 1.0 / base ** (torch.arange(0, n_rot, 2, device=positions.device, dtype=torch.float32) / n_rot)
    freqs = torch.outer(positions.float(), inv_freq)  # (T, n_rot/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, n_rot)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first cos.shape[-1] dims of each head of x (B, h, T, hd); the rest pass through."""
    n_rot = cos.shape[-1]
    xr, xp = x[..., :n_rot], x[..., n_rot:]
    x1, x2 = xr[..., : n_rot // 2], xr[..., n_rot // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    xr = xr * cos + rotated * sin
    return torch.cat((xr, xp), dim=-1) if xp.shape[-1] else xr


class KVCache:
    """Keys and values of one layer for generation: (B, n_kv_heads, max_len, d_head), filled in order."""

    def __init__(self, batch: int, max_len: int, n_kv_heads: int, d_head: int, *, device=None,
                 dtype=torch.float32):
        shape = (batch, n_kv_heads, max_len, d_head)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.pos = 0

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        T = k.shape[2]
        if self.pos + T > self.k.shape[2]:
            raise ValueError(f"KV cache holds {self.k.shape[2]} positions; {self.pos + T} needed")
        self.k[:, :, self.pos:self.pos + T] = k
        self.v[:, :, self.pos:self.pos + T] = v
        self.pos += T
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]


def attention_mask(T: int, start: int, window: int, device) -> torch.Tensor:
    """(T, start + T) bool: query start + i sees key j when j <= start + i and, with a window,
    start + i - j < window."""
    q = torch.arange(start, start + T, device=device).unsqueeze(1)  # (T, 1)
    k = torch.arange(start + T, device=device).unsqueeze(0)  # (1, S)
    allowed = k <= q
    return allowed & (q - k < window) if window else allowed


class MLP(nn.Module):
    """GELU (tanh form, as GPT-2 and BERT), SwiGLU (Shazeer 2020, arXiv:2002.05202) or GeGLU
    (Gemma) with the gate and up projections fused into one matmul; d_ff: width (default spec's)."""

    def __init__(self, spec: ModelSpec, d_ff: int | None = None):
        super().__init__()
        self.gated = spec.activation in ("swiglu", "geglu")
        self.silu = spec.activation == "swiglu"
        f = d_ff or spec.d_ff
        self.fc = nn.Linear(spec.d_model, 2 * f if self.gated else f, bias=spec.biases)
        self.proj = nn.Linear(f, spec.d_model, bias=spec.biases)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self.fc(x)
        if self.gated:
            gate, up = u.chunk(2, dim=-1)
            gate = F.silu(gate) if self.silu else F.gelu(gate, approximate="tanh")
            return self.proj(gate * up)
        return self.proj(F.gelu(u, approximate="tanh"))
