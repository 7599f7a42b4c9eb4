"""Op: one forward operation with its FLOPs and bytes, and the helpers that build them (no torch).

Used by `counting` (dense layers, embeddings, heads), `moe` (router, experts) and `mla` (latent
attention). Conventions are in `counting`'s docstring and docs/models.md.
"""
from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "cbf16": 2.0, "fp8": 1.0, "fp4": 0.5}
NORM_FLOPS = {"layernorm": 7, "rmsnorm": 4}
ACT_FLOPS = {"gelu": 8, "swiglu": 5, "geglu": 9}
"""per hidden element: GELU (tanh form) 8; SiLU (4) * up (1) = 5; GELU * up = 9"""
SOFTMAX_FLOPS = 5
SIGMOID_FLOPS = 4
SOFTCAP_FLOPS = 3
"""cap * tanh(x / cap): divide, tanh, multiply (tanh counted as one, an approximation)"""
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
    """parameters the op owns (0 for none); for routed experts all experts' weights, of which a
    batch reads only the experts it hits (bytes_read says how many)"""
    gemm: tuple[int, int, int, int] | None = None
    """(count, M, N, K) for matmuls: `count` GEMMs of (M x K) @ (K x N); routed experts: one
    grouped GEMM whose M is the tokens x top-k rows summed over experts"""
    causal_fraction: float = 1.0
    """share of the op a causal (and windowed) kernel computes (about 1/2 for the attention square)"""

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


def matmul(name, where, m, n, k, s, *, bias=False, weight=True, count=1, causal_fraction=1.0,
           weight_read=None, weight_params=None):
    """count GEMMs of (m x k) @ (k x n); the right operand is a weight when `weight`.
    weight_read: weight elements read when not all of k x n (+ bias) (routed experts)."""
    mm = 2.0 * count * m * n * k
    flops = mm + (count * m * n if bias else 0.0)
    w = (k * n + (n if bias else 0)) if weight_read is None else weight_read
    read = (count * (m * k + w) if weight_read is None else count * m * k + w) * s
    params = (k * n + (n if bias else 0)) if weight else 0
    return Op(name, "matmul" if weight else "attention", where, flops, mm, read, count * m * n * s,
              weight_params=params if weight_params is None else weight_params,
              gemm=(count, m, n, k), causal_fraction=causal_fraction)


def ew(name, kind, where, elements, flops_per, s, *, reads=1, params=0, writes=None):
    """element-wise op over `elements` outputs reading `reads` tensors of the same size"""
    out = elements if writes is None else writes
    return Op(name, kind, where, float(elements * flops_per), 0.0, (reads * elements + params) * s,
              out * s, weight_params=params)


def norm(name, where, spec, n, s, *, width=None):
    """a norm over n rows of `width` (d_model) with its weight (and LayerNorm bias)"""
    w = width or spec.d_model
    per = 2 if spec.norm == "layernorm" else 1
    return ew(name, "norm", where, n * w, NORM_FLOPS[spec.norm], s, params=per * w)


def norm_params(spec, width=None) -> int:
    return (2 if spec.norm == "layernorm" else 1) * (width or spec.d_model)


def causal_pairs(T: int, window: int = 0) -> int:
    """(query, key) pairs a causal kernel computes over T tokens, each query seeing at most
    `window` keys (itself included; 0: all earlier keys)."""
    if not window or window >= T:
        return T * (T + 1) // 2
    return window * (window + 1) // 2 + (T - window) * window
