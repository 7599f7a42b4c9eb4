"""Where a prediction's efficiency parameters come from, and how far off such a prediction was.

    from llmbench.perfmodel.provenance import calibration
    calibration("h100-sxm", "train", tokens_per_s=87_227.0)
    # {"profile": "h100-sxm", "origin": "shipped", ..., "tokens_per_s_low": ..., "tokens_per_s_high": ...}

The band is read, never fitted: `llmbench calibrate --published` writes every published row's
leave-one-source-out error beside the profiles (params.RESIDUALS_FILE); a prediction takes the
rows comparable to it (its hardware and task; too few: its kind and task; then every row of its
task) and reports their 10th-90th percentile: the true value lies between
prediction / (1 + p90) and prediction / (1 + p10) for 80% of such rows. No fit runs here.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from .params import PROFILE_DIR, RESIDUALS_FILE, find_profile, origin_of, read_profile

#: fewest rows a band is drawn from before widening to the next scope
MIN_BAND_ROWS = 5
TASK_WORDS = {"train": "training", "infer": "serving"}


@lru_cache(maxsize=8)
def residuals(folder: str) -> tuple[dict, ...]:
    """The leave-one-source-out rows written in `folder` (the shipped ones when it has none)."""
    for d in (Path(folder), PROFILE_DIR):
        f = d / RESIDUALS_FILE
        if f.exists():
            return tuple(json.loads(f.read_text())["rows"])
    return ()


def comparable(rows, hw_name: str, kind: str, task: str) -> tuple[list[float], str]:
    """(errors, what they are: 'h100-sxm training') of the first scope with MIN_BAND_ROWS rows."""
    word = TASK_WORDS.get(task, task)
    scopes = ((lambda r: r["hardware"] == hw_name and r["task"] == task, f"{hw_name} {word}"),
              (lambda r: r["kind"] == kind and r["task"] == task, f"{kind} family {word}"),
              (lambda r: r["task"] == task, f"all {word}"))
    rates = [r for r in rows if r.get("rate_error") is not None]
    for keep, label in scopes:
        errs = [r["rate_error"] for r in rates if keep(r)]
        if len(errs) >= MIN_BAND_ROWS:
            return errs, label
    return [r["rate_error"] for r in rates], "all"


def _pct(xs: list[float], q: float) -> float:
    """The q-quantile of xs, linear between order statistics (numpy's default), without numpy."""
    s = sorted(xs)
    i = q * (len(s) - 1)
    lo = int(i)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (i - lo)


def calibration(hw_name: str, kind: str, task: str, tokens_per_s: float, profile_file: str | None = None) -> dict:
    """The `calibration` block of one prediction: profile, origin, the rows and sources it was
    fitted on, the leave-one-source-out error (as a throughput error) and band of comparable rows. profile_file: a
    profile given with --profile (origin 'user file')."""
    if profile_file:
        path, prof, origin = profile_file, read_profile(profile_file), "user file (--profile)"
    else:
        path, prof = find_profile(hw_name)
        origin = origin_of(path)
    folder = str(Path(path).parent) if path else str(PROFILE_DIR)
    errs, scope = comparable(residuals(folder), hw_name, kind, task)
    med = _pct([abs(e) for e in errs], 0.5) if errs else None
    out = {**_profile_block(path, prof, origin),
           "status": prof.get("status", "no profile: the catalog's and the kind's priors"),
           "loso_scope": scope if prof else f"uncalibrated priors; band of {scope} rows",
           "loso_median_abs_error": med, "band": "leave-one-source-out p10-p90", "band_rows": len(errs),
           "tokens_per_s_low": None, "tokens_per_s_high": None}
    if errs:
        out["tokens_per_s_low"] = tokens_per_s / (1.0 + _pct(errs, 0.9))
        out["tokens_per_s_high"] = tokens_per_s / (1.0 + _pct(errs, 0.1))
    return out


def _profile_block(path: str | None, prof: dict, origin: str) -> dict:
    """A hardware profile as a calibration block names it: which, from where, fitted on what."""
    return {"profile": Path(path).stem if path else None, "origin": origin, "path": path,
            "fitted_on_rows": prof.get("points", 0), "sources": prof.get("sources", [])}


def engine_calibration(name: str) -> dict:
    """Where a serving prediction's engine parameters come from: the fit beside the profiles in
    use (serving.ENGINE_FIT_FILE: its origin, the rows it was fitted on) or engines.toml's priors."""
    from .serving import engine_fit_path, read_engine_fit

    path = engine_fit_path()
    fit = read_engine_fit(path)["engines"].get(name) if path else None
    if not fit:
        return {"engine": name, "origin": "priors (engines.toml)", "path": None, "fitted_on_rows": 0,
                "sources": []}
    return {"engine": name, "origin": origin_of(path), "path": path, "fitted_on_rows": fit.get("rows", 0),
            "sources": fit.get("sources", [])}


def serving_calibration(hw_name: str, engine_name: str) -> dict:
    """The calibration of a simulated deployment (llmbench serve): the hardware's profile (its
    origin, the rows it was fitted on) and the engine's (engine_calibration)."""
    path, prof = find_profile(hw_name)
    return {"hardware": _profile_block(path, prof, origin_of(path)), "engine": engine_calibration(engine_name)}


def serving_calibration_text(c: dict) -> str:
    """'h100-sxm (shipped), fitted on 95 rows; engine trtllm fitted on 79 rows from 9 sources (shipped)'."""
    h, e = c["hardware"], c["engine"]
    hw = f"{h['profile']} ({h['origin']}), fitted on {h['fitted_on_rows']} rows" if h["profile"] else h["origin"]
    return f"{hw}; engine {e['engine']} {engine_text(e)}"


def engine_text(c: dict) -> str:
    """'fitted on 23 rows from 4 sources (shipped)' or 'priors (engines.toml)'."""
    if not c["fitted_on_rows"]:
        return c["origin"]
    return f"fitted on {c['fitted_on_rows']} rows from {len(c['sources'])} sources ({c['origin']})"


def _short(v: float) -> str:
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:.3g}{suf}"
    return f"{v:.3g}"


def band_text(c: dict) -> str:
    """'(65.2k-98.1k, LOSO p10-p90 on 23 h100-sxm training rows)' printed beside tokens/s."""
    if c["tokens_per_s_low"] is None:
        return "(no band: no leave-one-source-out rows)"
    return (f"({_short(c['tokens_per_s_low'])}-{_short(c['tokens_per_s_high'])}, LOSO p10-p90 on "
            f"{c['band_rows']} {c['loso_scope'].split('; band of ')[-1].removesuffix(' rows')} rows)")


def calibration_text(c: dict) -> str:
    """One line: profile, origin, rows and sources, held-out error."""
    med = "-" if c["loso_median_abs_error"] is None else f"{c['loso_median_abs_error']:.0%}"
    if not c["profile"]:
        return (f"uncalibrated priors (no profile for this hardware); leave-one-source-out median |error| {med} "
                f"on {c['band_rows']} {c['loso_scope'].split('band of ')[-1]}")
    return (f"{c['profile']} ({c['origin']}), fitted on {c['fitted_on_rows']} rows from "
            f"{len(c['sources'])} sources; leave-one-source-out median |error| {med} ({c['loso_scope']}, "
            f"{c['band_rows']} rows)")
