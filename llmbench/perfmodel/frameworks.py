"""Which training framework a published row ran, and what that framework does differently.

    from llmbench.perfmodel.frameworks import framework_of, overlay
    framework_of("arXiv:2104.04473 (Narayanan et al. 2021)")   # 'megatron-2021'

A framework here is a mechanism, never a fitted per-row factor: Megatron-LM as of arXiv:2104.04473
(2021) predates FlashAttention (arXiv:2205.14135, 2022) and computes attention unfused, so the T x T
scores go through memory (params "attn_score_passes"); every later stack in published_v2.csv
(Megatron-Core, NeMo, torchtitan, llm-foundry, MaxText, TensorRT-LLM, vLLM) runs a fused attention
(FlashAttention / cuDNN / Pallas), which the step model assumes by default. It also predates sequence
parallelism (arXiv:2205.05198, 2022): its TP ranks each run the norms and residual adds on the whole
hidden state (params "sequence_parallel" 0; the default 1 splits them). Megatron-Core (its README's
scaling runs, NeMo and Megatron-Bridge recipes) also overlaps its tensor-parallel collectives with the
GEMMs (--tp-comm-overlap, params "tp_comm_overlap"); the default leaves them between the GEMMs.
"""
from __future__ import annotations

import math
from functools import lru_cache

from llmbench.footprint import LOSS_GRAD_BYTES

from .params import TERMS_FILE  # the shipped framework terms: calibrate --published writes them beside the profiles

#: framework -> parameter overrides it implies (documented mechanisms, not fitted)
FRAMEWORKS: dict[str, dict[str, float]] = {
    # Megatron-LM CoreAttention.forward (megatron/model/transformer.py): baddbmm writes the scores
    # (1), FusedScaleMaskSoftmax reads and writes them (2), attention dropout reads and writes them
    # and writes a 1-byte mask (2.5), the bmm with V reads them (1): 6.5 passes of the T x T matrix
    # (2-byte units) per forward. Backward: the bmm writes dP and reads P (2), dropout reads dP and
    # the mask and writes (2.5), softmax reads dP and P and writes dS (3), baddbmm reads dS for dQ
    # and dK (2): 9.5
    # Its tensor parallelism also predates sequence parallelism (Korthikanti et al. 2022,
    # arXiv:2205.05198, Sec. 4.2.2): each TP rank runs the layer norms and the bias-dropout-add on
    # the whole [s, b, h] hidden state
    "megatron-2021": {"attn_score_passes": 6.5, "attn_score_passes_bwd": 9.5, "sequence_parallel": 0.0},
    # Megatron-Core with --tp-comm-overlap: Transformer Engine's userbuffers split each tensor-parallel
    # GEMM and run its all-gather / reduce-scatter chunk by chunk under it (Megatron-LM README, scaling
    # runs: "fine-grained overlapping of ... tensor-parallel (--tp-comm-overlap) ... communication with
    # computation"; NeMo's performance recipes set it through MegatronCommOverlapCallback,
    # NVIDIA/NeMo scripts/performance/llm)
    "megatron": {"tp_comm_overlap": 1.0},
    # torchtitan's loss is F.cross_entropy(pred.flatten(0, 1).float(), labels) (train.py lines
    # 131-133 at torchtitan@9dec370, the commit its H100 benchmark page names): the fp32 upcast,
    # the fp32 log-probabilities saved for the backward and the fp32 gradients, as the house
    # runtimes' loss (footprint.LOSS_GRAD_BYTES, 13.4-15.2 bytes per logit measured on an H200),
    # on the bf16 logits of the output layer (Float8 converts only the linears inside the blocks)
    "torchtitan": {"loss_bytes_per_logit": 2.0 + LOSS_GRAD_BYTES},
    "nemo": {"tp_comm_overlap": 1.0},
}
#: what --framework offers: the default (a fused attention: every stack of published_v2.csv
#: since 2022) and the frameworks with a mechanism of their own (FRAMEWORKS)
DEFAULT = "fused"
CHOICES = (DEFAULT, *FRAMEWORKS)
DESCRIBE = {DEFAULT: "fused attention (FlashAttention / cuDNN / TE: Megatron-Core, NeMo, torchtitan, "
                     "llm-foundry, MaxText, DeepSpeed with flash-attn); the default",
            "megatron-2021": "Megatron-LM as in arXiv:2104.04473: unfused attention, 6.5 + 9.5 passes over "
                             "the T x T scores; no sequence parallelism (norms repeated on every TP rank)",
            "megatron": "Megatron-Core with --tp-comm-overlap: the tensor-parallel collectives hidden under "
                        "the GEMMs (Transformer Engine userbuffers)",
            "nemo": "NeMo / Megatron-Bridge performance recipes: Megatron-Core with tensor-parallel "
                    "communication overlap",
            "torchtitan": "torchtitan (FSDP2, TP, PP): a fused attention, and a loss that upcasts the "
                          "logits to fp32 (14 bytes per logit at its peak, not Megatron's 4)"}

#: source column prefix -> the framework the source says it ran (published_v2.csv); sources that
#: state none, or several (MLPerf submissions, vendor pages, Emani et al.'s per-vendor stacks), have none
SOURCE_FRAMEWORK: dict[str, str] = {
    "arXiv:2104.04473": "megatron-2021",                      # Megatron-LM, 2021 (the paper's code)
    "NVIDIA/Megatron-LM README": "megatron",                   # Megatron-Core r0.8.0
    "NVIDIA Megatron-Bridge": "nemo",                          # NeMo 25.11 container
    "NVIDIA NeMo performance summary": "nemo",                 # NeMo 24.07 container
    "pytorch/torchtitan": "torchtitan",
    "Trainy on WhiteFiber: torchtitan": "torchtitan",
    "mosaicml/llm-foundry": "llm-foundry",                     # Composer + FSDP
    "AI-Hypercomputer/maxtext": "maxtext",
    "AI-Hypercomputer/tpu-recipes": "maxtext",                 # MaxText recipes
    "NVIDIA TensorRT-LLM": "tensorrt-llm",
    "AMD ROCm AI performance results page (vLLM": "vllm",
}
#: frameworks that share one fitted efficiency term (the same code base at another version; the
#: mechanism that differs is in FRAMEWORKS)
TERM_GROUP: dict[str, str] = {}


def framework_of(source: str) -> str | None:
    """The framework a published row's source states (None: none or several)."""
    return next((f for prefix, f in SOURCE_FRAMEWORK.items() if source.startswith(prefix)), None)


def term_of(framework: str | None) -> str | None:
    """The fitted term a framework's rows share (TERM_GROUP), None for none."""
    return TERM_GROUP.get(framework, framework) if framework else None


def overlay(source: str) -> dict[str, float]:
    """Parameter overrides of the mechanism the framework of `source` implies ({}: fused attention)."""
    return dict(FRAMEWORKS.get(framework_of(source) or "", {}))


def apply(params: dict, framework: str | None, terms: dict | None) -> dict:
    """params with `framework`'s fitted efficiency terms ({param: log factor}, pooled.py) and its
    mechanism overrides; unchanged for None or a framework without rows."""
    from .pooled import BOUNDS

    out = dict(params)
    for k, d in ((terms or {}).get(term_of(framework), {})).items():
        if out.get(k, 0) > 0:
            lo, hi = BOUNDS[k]
            out[k] = float(min(max(out[k] * math.exp(d), lo), hi))
    out.update(FRAMEWORKS.get(framework or "", {}))
    return out


def shipped_terms() -> dict:
    """{framework: {param: log factor}} of the calibration in use (TERMS_FILE in the folder of the
    profiles read first: params.profile_dirs), {} when none was written; each file read once."""
    from .params import profile_dirs

    for d in profile_dirs():
        f = d / TERMS_FILE if not d.is_file() else d.parent / TERMS_FILE
        if f.exists():
            return read_terms(str(f))
    return {}


@lru_cache(maxsize=8)
def read_terms(path: str) -> dict:
    """The framework terms TERMS_FILE holds (what calibrate.write_frameworks writes: a JSON object
    whose "frameworks" maps a framework to {efficiency parameter: finite log factor}); else BadInput
    naming the file and the key. Cached: validate asks once per row."""
    from llmbench._files import read_small_json
    from llmbench.errors import BadInput

    from .params import PARAMS

    data = read_small_json(path, "framework terms")
    terms = data.get("frameworks") if isinstance(data, dict) else None
    if not isinstance(terms, dict):
        raise BadInput(f"framework terms {path}: must be a JSON object with a 'frameworks' object")
    for fw, ps in terms.items():
        if not isinstance(ps, dict):
            raise BadInput(f"framework terms {path}: frameworks.{fw} must be an object of parameters")
        for k, v in ps.items():
            if k not in PARAMS or not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise BadInput(f"framework terms {path}: frameworks.{fw}.{k} must be a known parameter "
                               f"with a finite log factor, got {v!r}")
    return terms


# Per-framework fitted efficiency terms are not fitted. Measured on published_v2 before the serving
# rows and engine columns landed (llmbench validate, with the unfused-attention mechanism in all
# three): none: leave-one-source-out median 16.6% (serving 31.3%, training 13.3%), Megatron Table 1
# 4.6%; every framework with rows termed: 15.9% (serving 27.8%, training 13.4%) but Megatron Table 1
# 5.1%, over its 5% guard; frameworks of >= 2 sources only (torchtitan, nemo, maxtext): 15.8%,
# Megatron 6.4%. Not fitted until a mechanism, not a term, explains the framework gaps; --framework
# selects the mechanisms (CHOICES). A fit may still carry terms under pooled.FRAMEWORK_KEY (apply).
