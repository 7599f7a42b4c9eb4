"""The pooled fit of efficiency parameters over every published row, and leave-one-source-out.

    llmbench validate            # in-sample and leave-one-source-out, side by side
    llmbench calibrate --published

Each efficiency parameter k of hardware h moves from its prior (params.resolve_params without a
profile) in log space by

    delta[h, k] = a[k] + b[kind(h), k] + c[h, k]

a shared part (all accelerators), a part per kind (gpu, hpu, tpu, wafer, ...) and a part per
hardware (and, for rows whose source states a framework, a part per framework: built, off by
default, frameworks.FIT_FRAMEWORK_TERMS), each shrunk towards 0 by a ridge prior (SIGMA): a hardware with few rows keeps close to
its kind, one without rows (or whose only source is left out) takes its kind's fit. That is what
lets an efficiency transfer to a system the fit never saw.

The model is linearised once about the priors: J[i, k] = d log prediction_i / d log p[h_i, k]
(finite differences, one prediction per row and parameter), so a fit is a small weighted ridge
least-squares solve (numpy lstsq), with Huber weights (HUBER, in log error) so a row the model
cannot represent does not drag the rest. The linearisation depends on no observed value, so
leaving a source out and refitting is one more solve on the remaining rows: 1 + sources solves in
all, and the held-out rows are then predicted exactly (the full model) under the refitted parameters (`folds`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmbench.hardware import get_hardware

from .params import resolve_params

#: parameters fitted, with the prior spread of their log (how far the data may move them; the
#: kind and hardware parts get half each): a factor e^0.3 ~ 1.35 for efficiencies that are
#: fractions, wider for a size scale and the fixed overheads
SIGMA = {"compute_max": 0.3, "compute_half_dim": 1.0, "memory": 0.3, "network": 0.5, "lowp_gemm": 0.3,
         "layer_overhead_s": 1.0, "sparse": 0.5}
#: bounds of each parameter in natural units (calibrate.FIT_CANDIDATES where it has them)
BOUNDS = {"compute_max": (0.05, 1.0), "compute_half_dim": (1.0, 1e5), "memory": (0.05, 1.0),
          "network": (0.02, 1.0), "lowp_gemm": (0.2, 1.0), "layer_overhead_s": (1e-7, 0.1),
          "sparse": (0.05, 1.0)}
#: spread of a row's log error assumed by the ridge prior (the model's own accuracy)
SIGMA_ROW = 0.2
#: Huber threshold on the log error (beyond it a row counts linearly, not quadratically)
HUBER = 0.3
EPS = 0.05  # finite-difference step in log parameter
#: chord steps after the linear solve (each: one exact prediction per fitted row). Measured on
#: published_v2: 1 step moves the leave-one-source-out median 18.9% -> 18.5% at 4x the run time: off
CHORD_STEPS = 0


@dataclass(frozen=True, kw_only=True)
class Linear:
    """The linearised model: rows, their log errors at the priors, the Jacobian."""

    ids: list
    sources: list
    hardware: list
    r0: np.ndarray
    """log(prediction / published) at the priors (rows x 1)"""
    J: np.ndarray
    """d log prediction / d log parameter (rows x len(SIGMA))"""
    priors: dict
    """hardware -> prior parameter dict"""
    frameworks: tuple = ()
    """each row's framework (frameworks.framework_of its source; None: not stated), or () for none"""


def priors_of(names) -> dict:
    return {h: resolve_params(get_hardware(h), use_profile=False) for h in sorted(set(names))}


def log_error(pred, lo, hi) -> float | None:
    """log(pred / the nearest end of [lo, hi]); 0 inside; None when there is no prediction."""
    if pred is None or not math.isfinite(pred) or pred <= 0:
        return None
    ref = lo if pred < lo else hi if pred > hi else pred
    return math.log(pred / ref)


def linearise(points, predict, frameworks=None) -> Linear:
    """points: {"id", "source", "system", "range"} rows with one hardware each; predict(pt, params);
    frameworks(rows kept) -> each row's framework term or None (frameworks.fitted_frameworks)."""
    names = list(SIGMA)
    pri = priors_of(pt["system"] for pt in points)
    keep, r0, J = [], [], []
    for pt in points:
        h = pt["system"]
        e = log_error(_safe(predict, pt, {h: pri[h]}), *pt["range"])
        if e is None:
            continue
        row = []
        for k in names:
            if pri[h].get(k, 0) <= 0:
                row.append(0.0)
                continue
            q = {**pri[h], k: pri[h][k] * math.exp(EPS)}
            e2 = log_error(_safe(predict, pt, {h: q}), *pt["range"])
            row.append(0.0 if e2 is None else (e2 - e) / EPS)
        keep.append(pt)
        r0.append(e)
        J.append(row)
    return Linear(ids=[p["id"] for p in keep], sources=[p["source"] for p in keep],
                  hardware=[p["system"] for p in keep], r0=np.array(r0), J=np.array(J).reshape(len(keep), len(names)),
                  priors=pri, frameworks=tuple(frameworks(keep)) if frameworks else ())


def _safe(predict, pt, params):
    try:
        return predict(pt, params)
    except ValueError:
        return None


def _columns(lin: Linear, hws: list[str]):
    """Design matrix columns: shared a[k], per kind b[kind, k], per hardware c[h, k], per
    framework f["fw:" name, k] (the rows whose source states one)."""
    names = list(SIGMA)
    kinds = sorted({get_hardware(h).kind for h in hws})
    fws = framework_keys(lin)
    groups = kinds + hws + fws
    cols = [("all", k) for k in names] + [(g, k) for g in groups for k in names]
    sig = [SIGMA[k] for k in names] + [SIGMA[k] / 2 for _ in groups for k in names]
    return cols, np.array(sig)


def framework_keys(lin: Linear) -> list[str]:
    return sorted({f"fw:{f}" for f in lin.frameworks if f})


def design(lin: Linear):
    """(X: rows x columns, columns, their prior spreads): row i's Jacobian entry for parameter k
    sits in the shared, its kind's and its hardware's column of k."""
    names, hws = list(SIGMA), sorted(lin.priors)
    cols, sig = _columns(lin, hws)
    index = {c: j for j, c in enumerate(cols)}
    X = np.zeros((len(lin.r0), len(cols)))
    fws = lin.frameworks or (None,) * len(lin.hardware)
    for i, h in enumerate(lin.hardware):
        groups = ("all", get_hardware(h).kind, h) + ((f"fw:{fws[i]}",) if fws[i] else ())
        for j, k in enumerate(names):
            for g in groups:
                X[i, index[(g, k)]] = lin.J[i, j]
    return X, index, sig


def solve(lin: Linear, mask: np.ndarray, iters: int = 4, r=None, theta0=None) -> tuple[dict, np.ndarray]:
    """Fit on the rows of `mask`: ({hardware: {param: value}}, theta) for every hardware of lin.
    Weighted ridge least squares on the linearised log errors, Huber-reweighted `iters` times.
    r, theta0: the exact log errors at theta0 (a chord step: the Jacobian stays the priors')."""
    X, index, sig = design(lin)
    theta0 = np.zeros(X.shape[1]) if theta0 is None else theta0
    r = lin.r0 if r is None else r
    X, y = X[mask], -(r[mask] - X[mask] @ theta0)
    w = np.ones(len(y))
    theta = theta0
    for _ in range(iters):
        A = np.vstack([X * (w / SIGMA_ROW)[:, None], np.diag(1.0 / sig)])
        b = np.concatenate([y * w / SIGMA_ROW, np.zeros(len(sig))])
        theta = np.linalg.lstsq(A, b, rcond=None)[0]
        res = np.abs(X @ theta - y)
        w = np.sqrt(np.where(res <= HUBER, 1.0, HUBER / np.maximum(res, 1e-12)))
    return _params(lin, sorted(lin.priors), index, theta), theta


def _params(lin: Linear, hws, index, theta) -> dict:
    out = {}
    for h in hws:
        kd, p = get_hardware(h).kind, {}
        for k in SIGMA:
            if lin.priors[h].get(k, 0) <= 0:
                continue
            d = theta[index[("all", k)]] + theta[index[(kd, k)]] + theta[index[(h, k)]]
            lo, hi = BOUNDS[k]
            p[k] = float(min(max(lin.priors[h][k] * math.exp(d), lo), hi))
        out[h] = p
    fw = {g[3:]: {k: float(theta[index[(g, k)]]) for k in SIGMA} for g in framework_keys(lin)}
    if fw:
        out[FRAMEWORK_KEY] = fw
    return out


#: the key of a fit's framework terms: {framework: {param: log factor}} (frameworks.apply)
FRAMEWORK_KEY = "__frameworks__"


def full(lin: Linear, fitted: dict) -> dict:
    """{hardware: prior <- fitted} for every hardware of the linearisation (what predict_row
    takes), with the fit's framework terms (FRAMEWORK_KEY) when it has any."""
    out = {h: {**lin.priors[h], **fitted.get(h, {})} for h in lin.priors}
    if FRAMEWORK_KEY in fitted:
        out[FRAMEWORK_KEY] = fitted[FRAMEWORK_KEY]
    return out


def fit(lin: Linear, mask, points=None, predict=None, steps: int = CHORD_STEPS) -> dict:
    """The fit on the rows of `mask`, then `steps` chord steps: the rows' exact log errors under
    the fit, solved again with the priors' Jacobian (corrects the linearisation far from the
    priors; uses only the rows of `mask`)."""
    params, theta = solve(lin, mask)
    for _ in range(steps if points is not None else 0):
        fp = full(lin, params)
        r = lin.r0.copy()
        for i, pt in enumerate(points):
            if mask[i]:
                e = log_error(_safe(predict, pt, fp), *pt["range"])
                r[i] = lin.r0[i] + (design_row(lin, i) @ theta) if e is None else e
        params, theta = solve(lin, mask, r=r, theta0=theta)
    return params


def design_row(lin: Linear, i: int) -> np.ndarray:
    return design(lin)[0][i]


def folds(lin: Linear, points=None, predict=None) -> tuple[dict, dict]:
    """(the fit on every row, {source: the fit without that source's rows}): 1 + sources fits.
    points/predict (the rows linearised, in order): chord steps with exact errors (fit)."""
    pts = [p for p in points if p["id"] in set(lin.ids)] if points is not None else None
    fitted = fit(lin, np.ones(len(lin.r0), dtype=bool), pts, predict)
    src = np.array(lin.sources)
    return fitted, {s: fit(lin, src != s, pts, predict) for s in dict.fromkeys(lin.sources)}
