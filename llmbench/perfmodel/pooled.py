"""The pooled fit of efficiency parameters over every published row, and leave-one-source-out.

    llmbench validate            # in-sample and leave-one-source-out, side by side
    llmbench calibrate --published

Each efficiency parameter k of hardware h moves from its prior (params.resolve_params without a
profile) in log space by

    delta[h, k] = a[k] + b[kind(h), k] + c[h, k]

a shared part (all accelerators), a part per kind (gpu, hpu, tpu, wafer, ...) and a part per
hardware, each shrunk towards 0 by a ridge prior (SIGMA): a hardware with few rows keeps close to
its kind, one without rows (or whose only source is left out) takes its kind's fit. That is what
lets an efficiency transfer to a system the fit never saw.

A serving row on an engine with efficiencies of its own (serving.Engine: TensorRT-LLM, vLLM, ...)
fits that engine's parameters (columns per engine, ENGINE_SIGMA), not the hardware's: those come
from the training rows and the rows served by a vendor's own stack (SERVING_FITS_HARDWARE).

The model is linearised once about the priors: J[i, k] = d log prediction_i / d log p[h_i, k]
(finite differences, one prediction per row and parameter), so a fit is a small weighted ridge
least-squares solve (its normal equations), with Huber weights (HUBER, in log error) so a row the model
cannot represent does not drag the rest. The linearisation depends on no observed value, so
leaving a source out and refitting is one more solve on the remaining rows: 1 + sources solves in
all, and the held-out rows are then predicted exactly (the full model) under the refitted parameters (`folds`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from llmbench.hardware import get_hardware

from .params import resolve_params

#: parameters fitted, with the prior spread of their log (how far the data may move them; the
#: kind and hardware parts get half each): a factor e^0.3 ~ 1.35 for efficiencies that are
#: fractions, wider for a size scale and the fixed overheads
SIGMA = {"compute_max": 0.3, "compute_half_dim": 1.0, "memory": 0.3, "network": 0.5, "lowp_gemm": 0.3,
         "layer_overhead_s": 1.0, "sparse": 0.5}
#: bounds of each parameter in natural units (calibrate.FIT_CANDIDATES where it has them)
#: memory: an upper bound, not a fit: a streaming kernel stays below a datasheet HBM bandwidth
#: (public STREAM-triad / device-copy runs on an H100 SXM read ~3.0-3.1 TB/s of its 3.35 TB/s,
#: 90-92%; no A100 run was read), so a fitted efficiency above 0.93 is not physical (a decode step
#: reading every weight once would beat the memory). A bound stated from one GPU's measurements:
#: a GPU run of a triad kernel (scripts/gpu_checks.sh) should replace it when a device is lent
BOUNDS = {"compute_max": (0.05, 1.0), "compute_half_dim": (1.0, 1e5), "memory": (0.05, 0.93),
          "network": (0.02, 1.0), "lowp_gemm": (0.2, 1.0), "layer_overhead_s": (1e-7, 0.1),
          "sparse": (0.05, 1.0)}
#: serving-engine parameters (serving.FITTED) fitted with the hardware ones, one set per engine
#: (columns ("engine", name, k)), prior spread of their log; bounds in natural units.
#: collective_latency_s is not fitted: it is measured directly (engines.toml cites the kernel
#: timings), and the published rows cannot tell it from step_overhead_s (both a fixed cost per
#: step). Fitted, it went to 92 us (trtllm) and 118 us (sglang) per hop, 15-25x the measured
#: kernels, taking 29 ms per decode step of Llama-70B at tp 2 (the NIM rows came out 2.7x slow in
#: sample); not fitted, the held-out serving median went 30.7% -> 24.9% (docs/predict.md "Serving")
#: layer_floor_s (a fixed time per decoder layer of a step) is not fitted either: it is derived from a
#: kernel count and a measured time per kernel (engines.toml). Fitted with sigma 1 it went to 56 us
#: (trtllm) and 25 us (gptfast) a layer, and the held-out median went 14.3% -> 14.7%, in-sample
#: 11.3% -> 12.1% (a cost that adds to the step is far from linear in its log at 5x its prior);
#: fixed at its prior (then 10 us): 13.8% / 11.0% (docs/predict.md "A floor per layer")
ENGINE_SIGMA = {"bandwidth_fraction": 0.3, "step_overhead_s": 1.0, "prefill_efficiency": 0.3, "request_overhead_s": 1.0}
ENGINE_BOUNDS = {"bandwidth_fraction": (0.05, 1.0), "step_overhead_s": (1e-6, 0.1), "prefill_efficiency": (0.05, 1.3),
                 "request_overhead_s": (1e-6, 1.0)}
#: which serving rows also fit the hardware parameters: "all", "native" (rows on the vendor's own
#: stack, whose efficiencies are the hardware's) or "none". Measured on published_v2 with 174
#: serving rows (held-out median, training / serving): native 15.9% / 30.4%, none 16.1% / 33.3%,
#: all (engine bandwidth sigma 0.15) 16.8% / 28.5%; before serving engines: 15.1% / 30.3% (44 rows).
#: A native serving row moves its kind's and hardware's columns only, not the shared one (design);
#: and a row that fits no hardware column still sees the fitted hardware (solve). Measured on
#: published_v2 (memory bound 0.93): 13.5% / 30.7% against 13.9% / 31.4% before both, when the
#: SN40L rows had pinned every GPU's memory at 1.0 through the shared column
SERVING_FITS_HARDWARE = "native"
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
    engines: list = field(default_factory=list)
    """per row: the serving engine whose parameters it sees ('' for none)"""
    Je: np.ndarray | None = None
    """d log prediction / d log engine parameter (rows x len(ENGINE_SIGMA))"""
    engine_priors: dict = field(default_factory=dict)
    """engine name -> {parameter: prior value} (only parameters with a positive prior)"""


def priors_of(names) -> dict:
    return {h: resolve_params(get_hardware(h), use_profile=False) for h in sorted(set(names))}


def log_error(pred, lo, hi) -> float | None:
    """log(pred / the nearest end of [lo, hi]); 0 inside; None when there is no prediction."""
    if pred is None or not math.isfinite(pred) or pred <= 0:
        return None
    ref = lo if pred < lo else hi if pred > hi else pred
    return math.log(pred / ref)


def linearise(points, predict, engine_of=None) -> Linear:
    """points: {"id", "source", "system", "range"} rows with one hardware each; predict(pt, params).
    engine_of(pt): the serving engine of a row (None: no engine); its parameters enter `params`
    as params["engine:NAME"] = {parameter: value} (validate.row_engine_params)."""
    names = list(SIGMA)
    pri = priors_of(pt["system"] for pt in points)
    keep, r0, J, engines, Je, epri = [], [], [], [], [], {}
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
        name = (engine_of(pt) if engine_of else None) or ""
        Je.append(_engine_row(predict, pt, pri[h], name, e, epri))
        keep.append(pt)
        r0.append(e)
        J.append(row)
        engines.append(name)
    return Linear(ids=[p["id"] for p in keep], sources=[p["source"] for p in keep],
                  hardware=[p["system"] for p in keep], r0=np.array(r0), J=np.array(J).reshape(len(keep), len(names)),
                  priors=pri, engines=engines, Je=np.array(Je).reshape(len(keep), len(ENGINE_SIGMA)),
                  engine_priors=epri)


def _engine_row(predict, pt, hw_prior: dict, name: str, e: float, epri: dict) -> list:
    """d log error / d log engine parameter of one row (zeros without an engine); fills epri."""
    if not name:
        return [0.0] * len(ENGINE_SIGMA)
    from .serving import FITTED, engine

    assert tuple(ENGINE_SIGMA) == FITTED
    eng = engine(name, fitted=False)
    base = epri.setdefault(name, {k: getattr(eng, k) for k in ENGINE_SIGMA if (getattr(eng, k) or 0) > 0})
    row = []
    for k in ENGINE_SIGMA:
        if k not in base:
            row.append(0.0)
            continue
        params = {pt["system"]: hw_prior, f"engine:{name}": {k: base[k] * math.exp(EPS)}}
        e2 = log_error(_safe(predict, pt, params), *pt["range"])
        row.append(0.0 if e2 is None else (e2 - e) / EPS)
    return row


def _safe(predict, pt, params):
    try:
        return predict(pt, params)
    except ValueError:
        return None


def _columns(lin: Linear, hws: list[str]):
    """Design matrix columns: shared a[k], per kind b[kind, k], per hardware c[h, k], and per
    serving engine ("engine", name, k) for the engine parameters with a prior."""
    names = list(SIGMA)
    kinds = sorted({get_hardware(h).kind for h in hws})
    cols = [("all", k) for k in names] + [(kd, k) for kd in kinds for k in names] + [(h, k) for h in hws for k in names]
    sig = [SIGMA[k] for k in names] + [SIGMA[k] / 2 for _ in kinds for k in names] + \
        [SIGMA[k] / 2 for _ in hws for k in names]
    for e in sorted(lin.engine_priors):
        for k in lin.engine_priors[e]:
            cols.append(("engine", e, k))
            sig.append(ENGINE_SIGMA[k])
    return cols, np.array(sig)


def design(lin: Linear, seen: bool = False):
    """(X: rows x columns, columns, their prior spreads): row i's Jacobian entry for parameter k
    sits in the shared, its kind's and its hardware's column of k. seen: every row's entries in
    all three, also where the row does not fit them (what its prediction sees of the fit)."""
    names, hws = list(SIGMA), sorted(lin.priors)
    cols, sig = _columns(lin, hws)
    index = {c: j for j, c in enumerate(cols)}
    X = np.zeros((len(lin.r0), len(cols)))
    for i, h in enumerate(lin.hardware):
        kd = get_hardware(h).kind
        e = lin.engines[i] if lin.engines else ""
        if not seen and not fits_hardware(lin, i):
            continue
        # a serving row on the vendor's own stack measures that vendor's hardware: it moves its
        # kind's and its hardware's columns, not the shared one. Measured on published_v2: the four
        # SN40L rows the model misses by 3-11x (SambaNova blog, DAC'25) moved the shared `memory`
        # by +0.49 in log, which pinned every GPU's memory efficiency at its bound (1.0) and with it
        # the GPUs' batch-1 decode above bandwidth / weights
        for j, k in enumerate(names):
            for key in ((kd, k), (h, k)) if e and not seen else (("all", k), (kd, k), (h, k)):
                X[i, index[key]] = lin.J[i, j]
    for i, e in enumerate(lin.engines):
        parent = _parent(e) if seen else None
        for j, k in enumerate(ENGINE_SIGMA):
            if e and ("engine", e, k) in index:
                X[i, index[("engine", e, k)]] = lin.Je[i, j]
            if parent and ("engine", parent, k) in index:  # a build sees its parent's fit, never moves it
                X[i, index[("engine", parent, k)]] = lin.Je[i, j]
    return X, index, sig


def _parent(e: str) -> str | None:
    from .serving import parent_of

    return parent_of(e)


def fits_hardware(lin: Linear, i: int) -> bool:
    """Whether row i moves hardware parameters (SERVING_FITS_HARDWARE): a training row always; a
    serving row: 'all', or 'native' only when its engine has no efficiencies of its own (the
    vendor's stack runs at the hardware's), or 'none'."""
    e = lin.engines[i] if lin.engines else ""
    if not e or SERVING_FITS_HARDWARE == "all":
        return True
    return SERVING_FITS_HARDWARE == "native" and not np.any(lin.Je[i])



def solve(lin: Linear, mask: np.ndarray, iters: int = 4, r=None, theta0=None) -> tuple[dict, np.ndarray]:
    """Fit on the rows of `mask`: ({hardware: {param: value}}, theta) for every hardware of lin.
    Weighted ridge least squares on the linearised log errors, Huber-reweighted `iters` times.
    r, theta0: the exact log errors at theta0 (a chord step: the Jacobian stays the priors').

    A row that does not fit a hardware column (a serving row on an engine of its own; the shared
    column for a native one) still sees it when predicted (the engine runs on the fitted hardware:
    compute_max, network, memory through serving.bandwidth_fraction). The hardware columns come
    from the other rows alone (the blocks are separate), so a second solve with those rows'
    targets less what they see of the first fits their own columns against the fitted hardware."""
    X, index, sig = design(lin)
    theta0 = np.zeros(X.shape[1]) if theta0 is None else theta0
    first = r is None
    r = lin.r0 if r is None else r
    seen = (design(lin, seen=True)[0] - X)[mask]
    X, y = X[mask], -(r[mask] - X[mask] @ theta0)
    theta = _huber(X, y, sig, iters, theta0)
    if first and np.any(seen):
        theta = _huber(X, y - seen @ theta, sig, iters, theta0)
    return _params(lin, sorted(lin.priors), index, theta), theta


def _huber(X, y, sig, iters, theta):
    """Weighted ridge least squares of X theta = y, Huber-reweighted `iters` times."""
    w = np.ones(len(y))
    for _ in range(iters):
        A = np.vstack([X * (w / SIGMA_ROW)[:, None], np.diag(1.0 / sig)])
        b = np.concatenate([y * w / SIGMA_ROW, np.zeros(len(sig))])
        # the ridge rows make A of full column rank: its normal equations are well posed (cond(A) ~ 60
        # here). Not np.linalg.lstsq: OpenBLAS 0.3.31's threaded SVD (gelsd) fails to converge on
        # some of these well-conditioned folds ("SVD did not converge"), with one thread it does not
        theta = np.linalg.solve(A.T @ A, A.T @ b)
        res = np.abs(X @ theta - y)
        w = np.sqrt(np.where(res <= HUBER, 1.0, HUBER / np.maximum(res, 1e-12)))
    return theta


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
    for e, prior in lin.engine_priors.items():
        par = _parent(e)
        out[f"engine:{e}"] = {k: float(min(max(v * math.exp(theta[index[("engine", e, k)]] + (
            theta[index[("engine", par, k)]] if ("engine", par, k) in index else 0.0)), ENGINE_BOUNDS[k][0]),
            ENGINE_BOUNDS[k][1])) for k, v in prior.items()}
    return out


#: the key of a fit's framework terms: {framework: {param: log factor}} (frameworks.apply). Per-
#: framework terms are not fitted (frameworks.py says why and what was measured):
#: a fit carries the key only when a caller adds terms
FRAMEWORK_KEY = "__frameworks__"


def full(lin: Linear, fitted: dict) -> dict:
    """{hardware: prior <- fitted} for every hardware of the linearisation, and the fitted engine
    parameters {"engine:NAME": {...}} (what predict_row takes)."""
    out = {h: {**lin.priors[h], **fitted.get(h, {})} for h in lin.priors}
    return {**out, **{k: v for k, v in fitted.items() if k.startswith("engine:") or k == FRAMEWORK_KEY}}


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
