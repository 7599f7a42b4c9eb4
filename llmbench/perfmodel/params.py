"""Efficiency parameters of the analytical model: defaults per hardware kind, calibrated profiles.

    from llmbench.perfmodel.params import resolve_params
    p = resolve_params(get_hardware("a100-80gb"))   # defaults <- catalog efficiency <- profile

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
    "sparse": (0.50, "share of the zero-weight work really saved: dense-layer time x (1 - sparse * s)"),
    "layer_overhead_s": (0.0, "fixed time per layer pass (launch, pipeline fill on a wafer)"),
    "step_overhead_s": (0.0, "fixed time per optimizer step (host, data loader, launch)"),
    "infer_overhead_s": (0.0, "fixed time per inference request (host I/O)"),
    "token_layer_latency_s": (0.0, "per-layer latency of one generated token (fabric traversal)"),
    "lowp_gemm": (0.7, "fp8/fp4: share of the low-precision peak's gain over bf16 that GEMMs realise "
                       "(scaling, casts, amax history: Transformer Engine); attention and the LM head "
                       "run at the bf16 peak (step.gemm_peak)"),
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


def defaults(kind: str = "gpu") -> dict[str, float]:
    out = {k: v for k, (v, _) in PARAMS.items()}
    out.update(KIND_PRIORS.get(kind, {}))
    return out


def profile_dirs() -> list[Path]:
    """Where profiles are read, first match wins: $LLMBENCH_PROFILES, else $LLMBENCH_HOME/profiles
    (where `llmbench calibrate --published` writes), then the shipped profiles/."""
    user = os.environ.get("LLMBENCH_PROFILES")
    if user:
        return [Path(user).expanduser(), PROFILE_DIR]
    from llmbench.hardware.spec import llmbench_home

    return [llmbench_home() / "profiles", PROFILE_DIR]


@lru_cache(maxsize=64)
def load_profile(name: str) -> dict:
    """The calibrated profile of one hardware ({} when none exists): profile_dirs() in order."""
    for d in profile_dirs():
        path = d / f"{name}.json"
        if path.exists():
            try:
                return json.loads(path.read_text())
            except ValueError:
                raise ValueError(f"{path}: not a valid profile (JSON)") from None
    return {}


def resolve_params(hw, override: dict | None = None, use_profile: bool = True) -> dict[str, float]:
    """defaults(kind) <- hw.efficiency (catalog priors) <- profile <- override.

    The profile is the first <name>.json of profile_dirs(): a user's calibration, else the shipped one."""
    out = defaults(hw.kind)
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
