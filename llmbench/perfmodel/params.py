"""Efficiency parameters of the analytical model: defaults per hardware kind, calibrated profiles.

    from llmbench.perfmodel.params import resolve_params
    p = resolve_params(get_hardware("a100-80gb"))   # kind defaults <- measured priors <- file <- profile

Each parameter is a documented, fitted factor (docs/predict.md, "Parameters"); none is a per-case
constant. `llmbench calibrate --published` rewrites profiles/<hardware>.json.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

PROFILE_DIR = Path(__file__).parent / "profiles"

#: name -> (default, meaning). Defaults are priors, used where a hardware has too few points to fit.
PARAMS: dict[str, tuple[float, str]] = {
    "compute_max": (0.75, "fraction of the dense peak reached by a large GEMM"),
    "compute_half_dim": (96.0, "GEMM size g = 3/(1/M+1/N+1/K) at which efficiency is half of compute_max"),
    "memory": (0.80, "fraction of the memory-tier bandwidth reached by streaming ops"),
    "network": (0.70, "fraction of the link bandwidth reached by collectives"),
    "overlap": (0.80, "fraction of the last micro-batch's backward that hides the gradient all-reduce"),
    "stream": (0.80, "fraction of the weight-streaming link reached (MemoryX -> device)"),
    "sparse": (1.0, "share of the zero-weight work really saved: dense-layer time x (1 - sparse * s); "
                    "prior: all of it on hardware that skips zero weights (Cerebras docs, 'Sparsity': 'For "
                    "all zero weights, no computation or memory is required during training or inference'; "
                    "the masked weights 'will not be involved in computation')"),
    "layer_overhead_s": (0.0, "fixed time per layer pass (launch, pipeline fill on a wafer)"),
    "step_overhead_s": (0.0, "fixed time per optimizer step (host, data loader, launch)"),
    "infer_overhead_s": (0.0, "fixed time per inference request (host I/O)"),
    "token_layer_latency_s": (0.0, "per-layer latency of one generated token (fabric traversal)"),
    "lowp_gemm": (0.7, "fp8/fp4: share of the low-precision peak's gain over bf16 that GEMMs realise "
                       "(scaling, casts, amax history: Transformer Engine); attention and the LM head "
                       "run at the bf16 peak (step.gemm_peak)"),
    "attn_score_passes": (0.0, "passes over the T x T attention scores in memory per forward: 0 for a fused "
                               "attention (FlashAttention); an unfused one (Megatron-LM 2021): 6.5 "
                               "(perfmodel/frameworks.py counts them)"),
    "tp_comm_overlap": (0.0, "share of a micro-batch's compute under which its tensor-parallel collectives "
                             "run hidden: 0 (issued between the GEMMs); 1 for Megatron-Core's "
                             "--tp-comm-overlap (Transformer Engine userbuffers, perfmodel/frameworks.py)"),
    "sequence_parallel": (1.0, "share of the element-wise work outside the tensor-parallel regions (layer "
                               "norms, residual adds, dropout) that the TP group splits: 1 with sequence "
                               "parallelism (Korthikanti et al. 2022, arXiv:2205.05198: Megatron-Core, "
                               "torchtitan's TP plan); 0 where every TP rank repeats it on the whole hidden "
                               "state (Megatron-LM 2021, perfmodel/frameworks.py)"),
    "attn_score_passes_bwd": (0.0, "the same in the backward: 0 fused; Megatron-LM 2021: 9.5 (frameworks.py)"),
    "loss_bytes_per_logit": (0.0, "peak bytes the training loss holds per logit (token x vocabulary entry); 0: "
                                  "the runtime's (footprint.loss_bytes_per_logit: Megatron's in-place fp32 loss 4); "
                                  "torchtitan's fp32 cross-entropy 14 (perfmodel/frameworks.py)"),
    "memory_fraction": (0.0, "share of the resident memory a training layout may fill; 0: the kind's "
                             "default reserve (reserve.py: GPUs capacity - max(2 GiB, 5%))"),
    "optimizer_bytes_per_s": (0.0, "bandwidth of the optimizer update when it runs off-device "
                                   "(MemoryX); 0 = 4x the streaming link"),
}

#: priors per hardware kind (what is known before fitting; docs/predict.md says why)
KIND_PRIORS: dict[str, dict[str, float]] = {
    "gpu": {"compute_max": 0.75, "compute_half_dim": 96.0, "layer_overhead_s": 20e-6},
    "hpu": {"compute_max": 0.65, "compute_half_dim": 128.0, "layer_overhead_s": 40e-6},
    "rdu": {"compute_max": 0.45, "compute_half_dim": 128.0, "layer_overhead_s": 50e-6},
    "ipu": {"compute_max": 0.45, "compute_half_dim": 64.0, "layer_overhead_s": 20e-6},
    "wafer": {"compute_max": 0.45, "compute_half_dim": 256.0, "memory": 0.5, "layer_overhead_s": 1e-3,
              "infer_overhead_s": 2e-3, "token_layer_latency_s": 15e-6},
    "cpu": {"compute_max": 0.60, "compute_half_dim": 32.0, "memory": 0.6, "layer_overhead_s": 20e-6},
}


#: priors of one hardware, measured on it (what is known before fitting, beside its kind's). Blackwell
#: lowp_gemm: on B200 a Llama-8B-shaped GEMM (M 16384, N 6144, K 4096) with its activation
#: quantisation runs bf16 at 1.40-1.51, FP8 at 2.23 and NVFP4 at 3.04 PFLOP/s (vllm-project/vllm PRs
#: #19566 and #20578): FP8 1.47x bf16, 0.47 of the 2x the datasheet ratio gives (step.gemm_peak;
#: NVFP4 then 1.47^2 = 2.2x, as measured); the GPUs' 0.7 is an H100-era Transformer Engine figure.
#: GB200 is the same Blackwell GPU at 1,200 W: the ratio taken as B200's
HARDWARE_PRIORS: dict[str, dict[str, float]] = {"b200": {"lowp_gemm": 0.47}, "gb200-nvl72": {"lowp_gemm": 0.47}}


def defaults(kind: str = "gpu") -> dict[str, float]:
    out = {k: v for k, (v, _) in PARAMS.items()}
    out.update(KIND_PRIORS.get(kind, {}))
    return out


def profile_dirs() -> list[Path]:
    """Where profiles are read, first match wins: $LLMBENCH_PROFILES (a folder, or one profile
    file), else $LLMBENCH_HOME/profiles (where `llmbench calibrate --published` writes), then the
    shipped profiles/."""
    user = os.environ.get("LLMBENCH_PROFILES")
    if user:
        return [Path(user).expanduser(), PROFILE_DIR]
    from llmbench.hardware.spec import llmbench_home

    return [llmbench_home() / "profiles", PROFILE_DIR]


#: what a profile's parameter may be: a fraction of a peak in (0, 1], a positive size, or a
#: non-negative time or rate (0 = off); anything else (NaN, a string, compute_max 0 or -5) is refused
RANGES = {"compute_max": "fraction", "memory": "fraction", "network": "fraction", "overlap": "fraction",
          "stream": "fraction", "lowp_gemm": "fraction", "sparse": "fraction", "compute_half_dim": "positive"}


def check_profile(data, path) -> dict:
    """`data` if it is a profile (a JSON object whose `params` are known names with finite numbers in
    range); else BadInput naming the file and the key."""
    from llmbench.errors import BadInput

    if not isinstance(data, dict) or not isinstance(data.get("params", {}), dict):
        raise BadInput(f"profile {path}: must be a JSON object with a 'params' object")
    for k, v in data.get("params", {}).items():
        if k not in PARAMS:
            raise BadInput(f"profile {path}: unknown parameter {k!r} (one of {', '.join(PARAMS)})")
        kind = RANGES.get(k, "nonnegative")
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")
        ok = ok and {"fraction": 0 < v <= 1, "positive": v > 0}.get(kind, v >= 0)
        if not ok:
            raise BadInput(f"profile {path}: params.{k} must be a finite number ({kind}), got {v!r}")
    return data


#: every row's leave-one-source-out error, written beside the profiles by calibrate --published
RESIDUALS_FILE = "loso_residuals.json"
#: the fit's framework terms (frameworks.py) and serving-engine parameters (serving.load_engines),
#: written beside the profiles too
TERMS_FILE = "frameworks.json"
ENGINE_FIT_FILE = "engines.json"
#: the files of a profile folder that are not a hardware's profile
SIDE_FILES = (RESIDUALS_FILE, TERMS_FILE, ENGINE_FIT_FILE)


def read_profile(path: Path) -> dict:
    """A profile's content: a regular file of at most 1 MB of JSON holding a valid profile
    (check_profile); else BadInput (a ValueError), one line naming the file."""
    from llmbench._files import read_small_json

    return check_profile(read_small_json(path, "profile"), path)


def _candidates(d: Path, name: str, own: bool) -> list[Path]:
    """The files that may hold `name`'s profile in d, in the order read. The rule (read only what
    is needed): d itself when it is a file ($LLMBENCH_PROFILES=FILE); else `<name>.json` when it
    exists; and only in the user's own folder (own: $LLMBENCH_PROFILES) when it does not, the other
    *.json there (calibrate --out FILE writes any name; its "hardware" says whose it is). The
    folders llmbench writes ($LLMBENCH_HOME/profiles, the shipped one) name every profile
    `<name>.json`: nothing else in them is read, so hardware without a profile reads no file."""
    if d.is_file():
        return [d]
    first = d / f"{name}.json"
    if first.exists() or not own or not d.is_dir():
        return [first] if first.exists() else []
    return sorted(p for p in d.glob("*.json") if p.name not in SIDE_FILES)


@lru_cache(maxsize=64)
def find_profile(name: str) -> tuple[str | None, dict]:
    """(path, content) of the calibrated profile of one hardware ((None, {}) when none exists):
    profile_dirs() in order (_candidates says which files). `name` is a name ('../evil' is a
    BadInput: it never reaches a path)."""
    from llmbench.errors import check_name

    check_name(name, "hardware name")
    own = bool(os.environ.get("LLMBENCH_PROFILES"))
    for i, d in enumerate(profile_dirs()):
        for path in _candidates(d, name, own=own and i == 0):
            data = read_profile(path)
            if path.name == f"{name}.json" or data.get("hardware") == name:
                return str(path), data
    return None, {}


def load_profile(name: str) -> dict:
    """The calibrated profile of one hardware ({} when none exists): profile_dirs() in order."""
    return find_profile(name)[1]


load_profile.cache_clear = find_profile.cache_clear  # callers clear the one cache


def origin_of(path: str | None) -> str:
    """'shipped' | 'user file' ($LLMBENCH_PROFILES) | '$LLMBENCH_HOME' | 'uncalibrated priors'."""
    if path is None:
        return "uncalibrated priors"
    if Path(path).parent == PROFILE_DIR:
        return "shipped"
    return "user file" if os.environ.get("LLMBENCH_PROFILES") else "$LLMBENCH_HOME"


def resolve_params(hw, override: dict | None = None, use_profile: bool = True) -> dict[str, float]:
    """defaults(kind) <- HARDWARE_PRIORS (measured on the hardware) <- hw.efficiency (a user's
    hardware file) <- profile <- override.

    The profile is the first <name>.json of profile_dirs(): a user's calibration, else the shipped one."""
    out = defaults(hw.kind)
    out.update(HARDWARE_PRIORS.get(hw.name, {}))
    out.update({k: float(v) for k, v in (hw.efficiency or {}).items() if k in PARAMS})
    if use_profile:
        prof = load_profile(hw.name).get("params", {})
        out.update({k: float(v) for k, v in prof.items() if k in PARAMS})
    if override:
        unknown = set(override) - set(PARAMS)
        if unknown:
            raise ValueError(f"unknown efficiency parameter(s): {', '.join(sorted(unknown))}")
        out.update({k: float(v) for k, v in override.items()})
    return out


def gemm_efficiency(M, N, K, p: dict[str, float], xp=None):
    """Fraction of peak a GEMM of (M x K) @ (K x N) reaches: compute_max * g / (g + g_half).

    g = 3 / (1/M + 1/N + 1/K), the harmonic mean of the three dimensions: a GEMM is as efficient as
    its thinnest side lets tiles fill the machine (a saturating form as in the GEMM sweeps of
    stas00/ml-engineering mamf-finder; Megatron's efficiency grows with hidden size, Table 1).
    """
    if xp is None:
        from llmbench._xp import backend_for

        xp = backend_for(M, N, K)
    M, N, K = (xp.maximum(xp.asarray(x, dtype=float), 1.0) for x in (M, N, K))
    g = 3.0 / (1.0 / M + 1.0 / N + 1.0 / K)
    return p["compute_max"] * g / (g + p["compute_half_dim"])
