"""Weight sparsity for the train suite: masks on the dense-layer (Linear) weights of every block.

unstructured: the smallest |w| fraction of each weight set to zero (magnitude pruning), the mask
re-applied after each optimizer step. Dense kernels do the same work on zeros, so no speed-up is
expected on GPUs or CPUs (Cerebras' dataflow cores skip zeros; see perfmodel); we measure it.
2:4: two of every four consecutive weights zero (NVIDIA structured sparsity). On CUDA with compute
capability >= 8.0 we also time each layer GEMM dense against
`torch.sparse.to_sparse_semi_structured` and report the speed-up (forward GEMMs: that is where
torch supports it); elsewhere the report says it was not measured and why.
"""
from __future__ import annotations

import statistics

import torch
from torch import nn

from llmbench.measure import device as dev
from llmbench.measure.options import SPARSITY_PATTERNS as PATTERNS


def _linears(model: nn.Module) -> list[nn.Linear]:
    blocks = getattr(model, "blocks", None)
    scope = blocks if blocks is not None else model
    return [m for m in scope.modules() if isinstance(m, nn.Linear)]


def magnitude_mask(w: torch.Tensor, fraction: float) -> torch.Tensor:
    k = int(round(fraction * w.numel()))
    if k == 0:
        return torch.ones_like(w, dtype=torch.bool)
    threshold = w.abs().flatten().float().kthvalue(k).values
    return w.abs() > threshold.to(w.dtype)


def two_four_mask(w: torch.Tensor) -> torch.Tensor:
    """Keep the two largest |w| of every four consecutive weights along the input dimension."""
    if w.shape[-1] % 4:
        raise ValueError(f"2:4 sparsity needs an input width divisible by 4, got {w.shape[-1]}")
    groups = w.abs().reshape(-1, 4)
    keep = groups.topk(2, dim=-1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, keep, True)
    return mask.reshape(w.shape)


class Sparsifier:
    def __init__(self, model: nn.Module, fraction: float, pattern: str, device, batch_tokens: int):
        if pattern not in PATTERNS:
            raise ValueError(f"sparsity_pattern must be one of {', '.join(PATTERNS)}, got {pattern!r}")
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"sparsity must be in [0, 1), got {fraction}")
        if pattern == "2:4":
            fraction = 0.5
        self.fraction, self.pattern, self.device = fraction, pattern, device
        self.batch_tokens = batch_tokens
        self.layers = _linears(model)
        with torch.no_grad():
            self.masks = [(magnitude_mask(m.weight, fraction) if pattern == "unstructured"
                           else two_four_mask(m.weight)) for m in self.layers]
        self.apply()

    @classmethod
    def for_run(cls, model, fraction: float, pattern: str, device, batch_tokens: int) -> "Sparsifier | _Dense":
        """The masks a run asks for (Workload.sparsity, RunOptions.sparsity_pattern); none when dense."""
        if fraction == 0.0 and pattern != "2:4":
            return _Dense()
        return cls(model, fraction, pattern, device, batch_tokens)

    @torch.no_grad()
    def apply(self) -> None:
        for m, mask in zip(self.layers, self.masks):
            m.weight.mul_(mask)

    def measured_zero_fraction(self) -> float:
        zeros = sum(int((m.weight == 0).sum()) for m in self.layers)
        return zeros / sum(m.weight.numel() for m in self.layers)

    def report(self) -> dict:
        out = {"sparsity": self.fraction, "sparsity_pattern": self.pattern,
               "zero_fraction_measured": self.measured_zero_fraction(),
               "flops_note": "achieved_tflops counts dense FLOPs (zeros included)"}
        if self.pattern == "2:4":
            out["semi_structured"] = semi_structured_speedup(self.layers, self.batch_tokens, self.device)
        return out


class _Dense:
    def apply(self) -> None:
        pass

    def report(self) -> dict:
        return {}


def semi_structured_support(device) -> tuple[bool, str]:
    ok, why = dev.supports_semi_structured(device)
    if not ok:
        return False, why
    try:
        from torch.sparse import to_sparse_semi_structured  # noqa: F401
    except ImportError:
        return False, f"torch {torch.__version__} has no to_sparse_semi_structured"
    return True, ""


def semi_structured_speedup(layers, tokens: int, device, repeats: int = 10) -> dict:
    """Forward GEMM x @ W^T of each distinct layer shape, dense vs 2:4 semi-structured (fp16)."""
    ok, why = semi_structured_support(device)
    if not ok:
        return {"measured": False, "reason": why}
    from torch.sparse import to_sparse_semi_structured
    shapes = sorted({tuple(m.weight.shape) for m in layers})
    out = {"measured": True, "dtype": "fp16", "tokens": tokens, "shapes": {}}
    dense_total = sparse_total = 0.0
    for N, K in shapes:
        w = two_four_mask(torch.randn(N, K, device=device)).half() * torch.randn(N, K, device=device).half()
        x = torch.randn(tokens, K, device=device, dtype=torch.float16)
        try:
            ws = to_sparse_semi_structured(w)
            t_dense = statistics.median(dev.time_fn(lambda: x @ w.t(), device, repeats=repeats, warmup=2)[0])
            t_sparse = statistics.median(dev.time_fn(lambda: torch.mm(x, ws.t()), device,
                                                     repeats=repeats, warmup=2)[0])
        except (RuntimeError, NotImplementedError) as exc:
            out["shapes"][f"{N}x{K}"] = {"error": str(exc).splitlines()[0][:200]}
            continue
        dense_total += t_dense
        sparse_total += t_sparse
        out["shapes"][f"{N}x{K}"] = {"dense_s": t_dense, "sparse_s": t_sparse, "speedup": t_dense / t_sparse}
    if sparse_total:
        out["speedup"] = dense_total / sparse_total
    return out
