"""How a measurement runs (not what it measures: that is the Workload, llmbench/point.py).
No torch: the CLI builds its options from these fields, and each default is declared here once.

    from llmbench.measure.options import RunOptions
    RunOptions(device="cpu", steps=5)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llmbench.point import _check_fields, opt

DATA = ("synthetic", "corpus", "genome")
CEILINGS = ("shapes", "profile", "none")
SPARSITY_PATTERNS = ("unstructured", "2:4")


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Run lengths and knobs of one measurement; results are keyed without them."""

    device: str = field(default="auto", metadata=opt(
        "torch device: auto (the accelerator if any), cpu, cuda, cuda:1, xpu, hpu, mps"))
    steps: int = field(default=10, metadata=opt("timed optimizer steps (after the warm-up)", low=1, integer=True))
    warmup_steps: int = field(default=2, metadata=opt("warm-up steps, excluded from the figures", low=0, integer=True))
    repeats: int = field(default=5, metadata=opt("timed repetitions", low=1, integer=True))
    warmup: int = field(default=1, metadata=opt("untimed repetitions before the timed ones", low=0, integer=True))
    data: str = field(default="synthetic", metadata=opt("training tokens", choices=DATA))
    compile: bool = field(default=False, metadata=opt("torch.compile the model"))
    seed: int = field(default=0, metadata=opt("random seed of weights and data", low=0, integer=True))
    lr: float = field(default=3e-4, metadata=opt("AdamW learning rate", low=0.0))
    ceiling: str = field(default="shapes", metadata=opt(
        "block: what frac_of_ceiling is against: shapes (the layer's GEMMs, now) | profile | none",
        choices=CEILINGS))
    sparsity_pattern: str = field(default="unstructured", metadata=opt(
        "which weights --sparsity zeroes", choices=SPARSITY_PATTERNS))
    baseline: bool = field(default=False, metadata=opt(
        "under torchrun: also time one process alone for the scaling efficiency"))
    baseline_tokens_per_s: float | None = field(default=None, metadata=opt(
        "one-process tokens/s for the scaling efficiency, if known", unit="tokens/s", low=0.0))
    gemm_size: int | None = field(default=None, metadata=opt(
        "ceilings: square GEMM size (default 4096 on a CPU, 8192 on an accelerator)", flag="--size",
        low=16, high=65536, integer=True))
    save_profile: bool = field(default=True, metadata=opt(
        "ceilings: save them as the local hardware profile", flag="--save"))

    def __post_init__(self):
        _check_fields(self)
