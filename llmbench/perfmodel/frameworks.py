"""Which training framework a published row ran, and what that framework does differently.

    from llmbench.perfmodel.frameworks import framework_of, overlay
    framework_of("arXiv:2104.04473 (Narayanan et al. 2021)")   # 'megatron-2021'

A framework here is a mechanism, never a fitted per-row factor: Megatron-LM as of arXiv:2104.04473
(2021) predates FlashAttention (arXiv:2205.14135, 2022) and computes attention unfused, so the T x T
scores go through memory (params "attn_score_passes"); every later stack in published_v2.csv
(Megatron-Core, NeMo, torchtitan, llm-foundry, MaxText, TensorRT-LLM, vLLM) runs a fused attention
(FlashAttention / cuDNN / Pallas), which the step model assumes by default.
"""
from __future__ import annotations

#: framework -> parameter overrides it implies (documented mechanisms, not fitted)
FRAMEWORKS: dict[str, dict[str, float]] = {
    # Megatron-LM v2 ParallelAttention.forward (megatron/model/transformer.py, 2021): baddbmm writes
    # the scores, FusedScaleMaskSoftmax reads and writes them, attention dropout reads and writes,
    # the bmm with V reads them: 6 passes of the T x T matrix per forward (backward: 2x, step.py)
    "megatron-2021": {"attn_score_passes": 6.0},
}
#: source column prefix -> framework, from what each source says it ran
SOURCE_FRAMEWORK: dict[str, str] = {
    "arXiv:2104.04473": "megatron-2021",
}


def framework_of(source: str) -> str | None:
    """The framework a published row's source states (None: not one with overrides)."""
    return next((f for prefix, f in SOURCE_FRAMEWORK.items() if source.startswith(prefix)), None)


def overlay(source: str) -> dict[str, float]:
    """Parameter overrides of the framework `source` ran ({} when fused attention, the default)."""
    return dict(FRAMEWORKS.get(framework_of(source) or "", {}))
