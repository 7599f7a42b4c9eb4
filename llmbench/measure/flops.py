"""FLOPs of a real torch module, counted by torch.utils.flop_counter.FlopCounterMode.

    from llmbench.measure.flops import count_flops
    fwd = count_flops(lambda: model(idx))

FlopCounterMode knows the CUDA SDPA kernels but not the CPU flash kernel
(`aten._scaled_dot_product_flash_attention_for_cpu`); we register it with torch's own SDPA formulas
(the T x T square counted in full, as `llmbench.models.counting` does), so the count covers the
kernel that really runs here.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch.utils import flop_counter as fc

aten = torch.ops.aten


def _cpu_flash_fwd(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return fc.sdpa_flop_count(query, key, value)


def _cpu_flash_bwd(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return fc.sdpa_backward_flop_count(grad_out, query, key, value)


def _custom_mapping() -> dict:
    mapping = {}
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        mapping[aten._scaled_dot_product_flash_attention_for_cpu] = _cpu_flash_fwd
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
        mapping[aten._scaled_dot_product_flash_attention_for_cpu_backward] = _cpu_flash_bwd
    return {k: v for k, v in mapping.items() if k not in fc.flop_registry}


def flop_counter() -> fc.FlopCounterMode:
    return fc.FlopCounterMode(display=False, custom_mapping=_custom_mapping())


def count_flops(fn: Callable[[], object]) -> int:
    """Total FLOPs FlopCounterMode sees while `fn()` runs (forward, backward or both)."""
    counter = flop_counter()
    with counter:
        fn()
    return int(counter.get_total_flops())


def flops_by_op(fn: Callable[[], object]) -> dict[str, int]:
    counter = flop_counter()
    with counter:
        fn()
    return {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
