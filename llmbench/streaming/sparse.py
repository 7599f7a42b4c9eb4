"""Sparse weight streaming: only the non-zero weights and their positions cross the link.

Encoding of one group (a flat fp32 vector with a fixed mask): the kept values, fp32, in order,
plus the mask as a bitmask (1 bit per weight, `ceil(n / 8)` bytes). At sparsity s a pruned weight
matrix costs (1 - s) * 4 + 1/8 bytes per weight instead of 4: at s = 0.9, 13.1% of dense. A
bitmask beats int32 indices (0.8 bytes/weight at s = 0.9, 20%) and uint16 deltas (0.6, 15%) for
every s below 0.97. Norm gains and biases stay dense (they are not masked). Gradients flow back as
the kept values only (the store knows the mask), so they cost (1 - s) * 4 bytes per weight
(half that in bf16/fp16). Data parallel: rank 0 broadcasts the values and the bitmask, every rank
decodes the same mask, and only the kept gradients are reduced.
"""
from __future__ import annotations

import torch

_BITS = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)


def magnitude_masks(groups: dict[str, dict[str, torch.Tensor]], sparsity: float) -> dict[str, torch.Tensor]:
    """Flat bool masks per group: each weight matrix (>= 2 dims) keeps its largest-|w| (1 - s)
    fraction; 1-D parameters (norms, biases) are kept whole."""
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"--sparsity must be in [0, 1), got {sparsity}")
    masks = {}
    for g, params in groups.items():
        parts = []
        for t in params.values():
            flat = t.detach().reshape(-1).float()
            keep = torch.ones_like(flat, dtype=torch.bool)
            if t.dim() >= 2 and sparsity > 0:
                n_drop = int(round(sparsity * flat.numel()))
                if n_drop:
                    drop = flat.abs().argsort()[:n_drop]
                    keep[drop] = False
            parts.append(keep)
        masks[g] = torch.cat(parts)
    return masks


def pack_bits(mask: torch.Tensor) -> torch.Tensor:
    """bool (n,) -> uint8 (ceil(n / 8),), little-endian bit order within a byte"""
    n = mask.numel()
    padded = torch.zeros((n + 7) // 8 * 8, dtype=torch.uint8, device=mask.device)
    padded[:n] = mask.reshape(-1).to(torch.uint8)
    return (padded.view(-1, 8) * _BITS.to(mask.device)).sum(dim=1, dtype=torch.uint8)


def unpack_bits(bits: torch.Tensor, n: int) -> torch.Tensor:
    """uint8 (ceil(n / 8),) -> bool (n,), on the tensor's device"""
    b = bits.unsqueeze(1).bitwise_and(_BITS.to(bits.device)).ne(0)  # (n/8, 8)
    return b.reshape(-1)[:n]


def encode(weights: torch.Tensor, mask: torch.Tensor, bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Store side: the payload that crosses the link: (values, bitmask)."""
    return weights[mask], bits


def decode_into(out: torch.Tensor, values: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """Device side: write the dense weights into `out` (flat) from (values, bitmask); returns
    the bool mask (the device keeps it to select the kept gradients)."""
    mask = unpack_bits(bits, out.numel())
    out.zero_()
    out[mask] = values
    return mask


def payload_bytes(values: torch.Tensor, bits: torch.Tensor) -> int:
    return values.numel() * values.element_size() + bits.numel()
