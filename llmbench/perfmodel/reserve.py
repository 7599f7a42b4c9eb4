"""The share of a device's resident memory a training layout may fill (the memory reserve).

    usable_bytes(get_hardware("h100-sxm"))        # 80 GiB - max(2 GiB, 5%) = 76 GiB
    usable_bytes(hw, fraction=0.9)                # --memory-fraction 0.9

A layout that fills HBM to the byte does not run: the CUDA context and library kernels take
memory no tensor accounts for (~0.8 GB right after `import torch` and one CUDA call:
pytorch/pytorch#34323), NCCL allocates its buffers per peer and channel (NCCL_BUFFSIZE, 4 MiB
by default, per channel and peer: NCCL environment-variable docs), and the caching allocator
fragments (PyTorch "CUDA semantics: memory management"; nvidia-smi shows reserved + non-releasable,
not allocated). Serving stacks reserve the same way (vLLM gpu_memory_utilization 0.9). Default for
HBM devices (gpu, hpu, tpu) and a CPU's DRAM: capacity - max(2 GiB, 5%). Wafer, RDU and IPU memory
is placed by the vendor's compiler at compile time (no runtime allocator, no NCCL): no reserve
is assumed there (their program code and buffers are not modelled: docs/predict.md, "Memory").
"""
from __future__ import annotations

GIB = 1024.0 ** 3
#: kinds whose memory a compiler places (no runtime reserve)
COMPILER_PLACED = ("wafer", "rdu", "ipu")
RESERVE_MIN_BYTES = 2.0 * GIB
RESERVE_SHARE = 0.05


def default_rule(kind: str) -> str:
    """The default reserve of a hardware kind, in words (printed with the memory)."""
    if kind in COMPILER_PLACED:
        return "no reserve (compiler-placed memory)"
    return "capacity - max(2 GiB, 5%): CUDA context, NCCL buffers, allocator fragmentation"


def usable_bytes(hw, fraction: float | None = None) -> float:
    """Bytes of the resident tier a layout may fill: capacity x fraction when given (0 < f <= 1),
    else the kind's default (module doc)."""
    from .memory import hierarchy

    cap = float(hierarchy(hw).resident.capacity_bytes)
    if fraction:
        return cap * fraction
    if hw.kind in COMPILER_PLACED:
        return cap
    return cap - max(RESERVE_MIN_BYTES, RESERVE_SHARE * cap)
