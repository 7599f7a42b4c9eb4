"""Calibration: fit a hardware's efficiency parameters by least squares on log error.

    llmbench calibrate --published              # the pooled fit on published_v2.csv (pooled.py)
    llmbench calibrate --published --write-shipped   # ... as the shipped profiles (make profiles)
    llmbench calibrate --hardware a100-80gb --from results.csv|results.db

`calibrate_published` writes the fitted profiles to the user's profile folder
($LLMBENCH_PROFILES, else $LLMBENCH_HOME/profiles, default ~/.llmbench/profiles), never into the
installed package; only `ship=True` rewrites the shipped llmbench/perfmodel/profiles/, and only
from a source checkout (a .git next to the package).

Levenberg-Marquardt on log-parameters with a finite-difference Jacobian (numpy only). A hardware
with fewer than MIN_POINTS points keeps its priors and is flagged. Leave-one-out error: refit
without each point in turn and predict it.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import sqlite3
import tempfile
from pathlib import Path

import numpy as np

from llmbench._files import read_small_json, read_small_text, regular_file
from llmbench.errors import BadInput
from llmbench.hardware import get_hardware
from llmbench.point import Workload

from .params import ENGINE_FIT_FILE, PROFILE_DIR, RESIDUALS_FILE, SIDE_FILES, TERMS_FILE, load_profile, resolve_params

#: parameters calibration may move, most influential first; bounds in natural units
FIT_CANDIDATES = {
    "compute_max": (0.05, 1.0), "compute_half_dim": (1.0, 1e5), "network": (0.02, 1.0),
    "overlap": (0.0, 1.0), "sparse": (0.05, 1.0), "layer_overhead_s": (1e-7, 0.1),
    "token_layer_latency_s": (1e-8, 1e-2), "step_overhead_s": (1e-5, 10.0),
}
MIN_POINTS = 3
#: hardware with too few points of its own that runs on a sibling's fit: the same chip and clocks
#: (a100-40gb: GA100 as a100-80gb; catalog notes), only the memory differs
SAME_CHIP = {"a100-40gb": "a100-80gb"}
MAX_PARAMS = 3


def _prior(hw_name: str) -> dict:
    """Defaults <- catalog efficiency, without the shipped profile (so a refit is reproducible)."""
    hw = get_hardware(hw_name)
    p = resolve_params(hw, use_profile=False)
    for k in FIT_CANDIDATES:  # a parameter at 0 cannot move in log space
        if p[k] <= 0:
            p[k] = FIT_CANDIDATES[k][0] * 10
    return p


def _residuals(points, predict, hw_name, p) -> np.ndarray:
    out = []
    for pt in points:
        try:
            v = predict(pt, {hw_name: p})
        except ValueError:
            v = None
        if v is None or not np.isfinite(v) or v <= 0:
            out.append(5.0)
            continue
        lo, hi = pt["range"]
        ref = lo if v < lo else hi if v > hi else v
        out.append(math.log(v / ref))
    return np.array(out)


def fit(points, predict, hw_name, names, prior=None, iters=30):
    """Least squares on log error over log-parameters. Returns (params, rms log residual)."""
    p = dict(prior or _prior(hw_name))
    x = np.log([p[k] for k in names])
    lo = np.log([FIT_CANDIDATES[k][0] for k in names])
    hi = np.log([FIT_CANDIDATES[k][1] for k in names])

    def res(xv):
        q = dict(p)
        q.update({k: float(np.exp(v)) for k, v in zip(names, xv)})
        return _residuals(points, predict, hw_name, q)

    r = res(x)
    lam = 1e-2
    for _ in range(iters):
        J = np.empty((len(r), len(x)))
        for j in range(len(x)):
            dx = np.zeros_like(x)
            dx[j] = 1e-4
            J[:, j] = (res(x + dx) - r) / 1e-4
        A = J.T @ J
        g = J.T @ r
        improved = False
        for _ in range(8):
            step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-9), -g)
            xn = np.clip(x + step, lo, hi)
            rn = res(xn)
            if rn @ rn < r @ r:
                x, r, lam, improved = xn, rn, lam / 3, True
                break
            lam *= 10
        if not improved or np.abs(step).max() < 1e-6:
            break
    p.update({k: float(np.exp(v)) for k, v in zip(names, x)})
    return p, float(np.sqrt(np.mean(r ** 2))) if len(r) else 0.0


def sensitive(points, predict, hw_name, prior) -> list[str]:
    """Candidate parameters ordered by how much they move the points (those that do not: dropped)."""
    base = _residuals(points, predict, hw_name, prior)
    score = {}
    for k in FIT_CANDIDATES:
        q = dict(prior)
        q[k] = min(prior[k] * 1.2, FIT_CANDIDATES[k][1]) if prior[k] * 1.2 <= FIT_CANDIDATES[k][1] else prior[k] / 1.2
        score[k] = float(np.abs(_residuals(points, predict, hw_name, q) - base).sum())
    return [k for k in sorted(score, key=score.get, reverse=True) if score[k] > 1e-3]


def calibrate_points(hw_name: str, points: list[dict], predict, inherit: tuple[str, dict] | None = None) -> dict:
    """Fit one hardware to its points; leave-one-out error; flags where there are too few.

    inherit: (sibling, its fitted parameters) for a hardware with too few points that shares the
    sibling's chip; they are used unchanged, and the error on this hardware's own points is then a
    held-out error."""
    prior = _prior(hw_name)
    n = len(points)
    before = _residuals(points, predict, hw_name, prior)
    report = {"hardware": hw_name, "points": n, "point_ids": [pt["id"] for pt in points],
              "prior_mean_abs_error": float(np.mean(np.abs(np.expm1(before)))) if n else None}
    if n < MIN_POINTS and inherit and inherit[1]:
        sib, sp = inherit
        held = _residuals(points, predict, hw_name, {**prior, **sp})
        report.update(status=f"too few points ({n} < {MIN_POINTS}): {sib}'s fit (same chip)", params=dict(sp),
                      fitted=[], inherited_from=sib, loo_mean_abs_error=None,
                      fit_mean_abs_error=float(np.mean(np.abs(np.expm1(held)))) if n else None)
        return report
    if n < MIN_POINTS:
        report.update(status=f"too few points ({n} < {MIN_POINTS}): priors kept", params={},
                      fitted=[], loo_mean_abs_error=None, fit_mean_abs_error=report["prior_mean_abs_error"])
        return report
    names = sensitive(points, predict, hw_name, prior)[:min(MAX_PARAMS, n - 2)]
    p, _ = fit(points, predict, hw_name, names, prior)
    after = _residuals(points, predict, hw_name, p)
    loo = []
    for i in range(n):
        rest = points[:i] + points[i + 1:]
        q, _ = fit(rest, predict, hw_name, names, p, iters=10)
        loo.append(abs(math.expm1(_residuals([points[i]], predict, hw_name, q)[0])))
    report.update(status="fitted", fitted=names, params={k: p[k] for k in names},
                  fit_mean_abs_error=float(np.mean(np.abs(np.expm1(after)))),
                  loo_mean_abs_error=float(np.mean(loo)), loo_abs_errors=loo)
    return report


def published_points() -> dict[str, list[dict]]:
    """Numeric published rows grouped by the one hardware they involve (cross-system rows skipped)."""
    from llmbench.published import PUBLISHED_V2_CSV, parse_range, published_rows

    out: dict[str, list[dict]] = {}
    for row in published_rows(PUBLISHED_V2_CSV):
        rng = parse_range(row["value"])
        if rng is None or " " in row["system"]:
            continue
        out.setdefault(row["system"], []).append({**row, "range": rng})
    return out


#: the llmbench package folder; a source checkout has a .git next to it
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def profile_dir(ship: bool = False) -> Path:
    """Where fitted profiles go: the user's folder ($LLMBENCH_PROFILES, else
    $LLMBENCH_HOME/profiles), or with ship=True the shipped profiles of a source checkout."""
    if not ship:
        from llmbench.hardware.spec import llmbench_home

        user = os.environ.get("LLMBENCH_PROFILES")
        return Path(user).expanduser() if user else llmbench_home() / "profiles"
    if not (PACKAGE_DIR.parent / ".git").exists():
        raise BadInput(f"ship=True rewrites the profiles shipped in {PROFILE_DIR}, which only a "
                       f"source checkout may do (no .git next to {PACKAGE_DIR}); without ship the "
                       f"profiles go to {profile_dir()}")
    return PROFILE_DIR


def calibrate_published(write: bool = True, only: str | None = None, ship: bool = False) -> list[dict]:
    """The pooled fit (pooled.py) on every published_v2.csv row, one profile per hardware with rows
    (or `only` one); the error columns are the in-sample and the leave-one-source-out errors of that
    hardware's rows. write: save each profile to profile_dir(ship) (report["written"]) and, beside
    them, every row's leave-one-source-out error (RESIDUALS_FILE: the bands `predict` prints);
    ship=True: the shipped ones, from a checkout only, and stale shipped profiles removed."""
    from . import pooled
    from .validate import pooled_fit

    folder = profile_dir(ship) if write else None
    pts, lin, fitted, by_source = pooled_fit()
    loso = loso_errors(pts, lin, by_source)
    reports = []
    for hw_name in sorted(lin.priors):
        if only and hw_name != only:
            continue
        mine = [pt for pt in pts if pt["system"] == hw_name]
        errs = [abs(loso[pt["id"]]) for pt in mine if loso.get(pt["id"]) is not None]
        rep = {"hardware": hw_name, "points": len(mine), "point_ids": [pt["id"] for pt in mine],
               "sources": sorted({pt["source"] for pt in mine}),
               "status": "pooled fit (shared + kind + hardware)",
               "fitted": sorted(fitted[hw_name]), "params": fitted[hw_name], "inherited_from": None,
               "fit_mean_abs_error": _mean_err(mine, pooled.full(lin, fitted)),
               "loo_mean_abs_error": float(np.mean(errs)) if errs else None,
               "loso_median_abs_error": float(np.median(errs)) if errs else None}
        if write:
            path = folder / f"{hw_name}.json"
            write_profile(path, rep, SHIPPED_SOURCE, make_folder=not ship)
            rep["written"] = str(path)
        reports.append(rep)
    if not only:
        engines = engine_fit(lin, fitted)
        reports.append({"engines": engines, **({"written": write_engine_fit(folder / ENGINE_FIT_FILE, engines,
                                                                             make_folder=not ship)} if write else {})})
    if write and not only:
        reports.append({"residuals": write_residuals(folder / RESIDUALS_FILE, pts, loso, make_folder=not ship)})
        terms = write_frameworks(folder / TERMS_FILE, lin, fitted, make_folder=not ship)
        if terms:
            reports.append({"frameworks": terms})
        if ship:
            _remove_stale(folder, {r["hardware"] for r in reports if "hardware" in r})
    load_profile.cache_clear()
    return reports


#: the `source` of a profile written by calibrate --published
SHIPPED_SOURCE = "llmbench calibrate --published (llmbench/reference/published_v2.csv, pooled fit)"


def loso_errors(points, lin, by_source) -> dict:
    """{row id: relative error (predicted / published - 1) under the fit without the row's source}."""
    from . import pooled
    from .validate import error, predict_row

    out = {}
    for pt in points:
        try:
            v = predict_row(pt, pooled.full(lin, by_source[pt["source"]]))
        except (ValueError, KeyError):
            v = None
        out[pt["id"]] = float(error(v, *pt["range"])) if v is not None and math.isfinite(v) else None
    return out


#: metrics that are a rate (their error is a throughput error) and a time (its inverse); the rest
#: (ratios, device counts, memory) say nothing about a throughput band and get none
RATE_METRICS = ("samples_per_s", "tokens_per_s", "achieved_tflops", "mfu", "decode_tokens_per_s_per_seq")
TIME_METRICS = ("epoch_time_s", "epoch_time_h", "time_to_first_token_s", "latency_s_p50")


def rate_error(metric: str, e: float) -> float | None:
    """A row's error as a throughput error: predicted rate / true rate - 1 (None: not a rate)."""
    if metric in RATE_METRICS:
        return e
    return 1.0 / (1.0 + e) - 1.0 if metric in TIME_METRICS and e > -1.0 else None


def write_residuals(path: Path, points, loso: dict, make_folder: bool = False) -> str:
    """Write every fitted row's leave-one-source-out error with what a band selects rows by."""
    rows = [{"id": pt["id"], "hardware": pt["system"], "kind": get_hardware(pt["system"]).kind,
             "task": pt["task"], "metric": pt["metric"], "source": pt["source"], "loso_error": loso[pt["id"]],
             "rate_error": rate_error(pt["metric"], loso[pt["id"]])}
            for pt in points if loso.get(pt["id"]) is not None]
    _write_json(Path(path), {"source": SHIPPED_SOURCE,
                             "loso_error": "predicted / published - 1 of the row's metric, its source left out of the fit",
                             "rate_error": "the same as a throughput error (time metrics inverted; null: not a rate)",
                             "rows": rows}, make_folder)
    return str(path)


def write_frameworks(path: Path, lin, fitted: dict, make_folder: bool = False) -> str | None:
    """Write the fit's framework terms ({framework: {param: log factor}}, read by --framework's
    frameworks.read_terms) when the fit has any; none is fitted today (frameworks.py says why), so
    nothing is written and a file an earlier fit left there is removed (None). A file that could
    only hold {} said nothing a missing file does not."""
    from .frameworks import read_terms
    from .pooled import FRAMEWORK_KEY

    path = Path(path)
    read_terms.cache_clear()
    terms = fitted.get(FRAMEWORK_KEY, {})
    if not terms:
        path.unlink(missing_ok=True)
        return None
    _write_json(path, {"source": SHIPPED_SOURCE, "term": "log factor on each efficiency parameter of "
                       "a hardware's profile for rows of that framework (pooled.py)", "frameworks": terms},
                make_folder)
    return str(path)


def engine_fit(lin, fitted: dict) -> dict:
    """{engine: {"params": its fitted values, "rows": rows that fitted them, "sources": their sources}}
    of the pooled fit (the serving rows that state an engine move its parameters: pooled.py)."""
    out = {}
    for name in sorted(lin.engine_priors):
        mine = [i for i, e in enumerate(lin.engines) if e == name]
        out[name] = {"params": dict(fitted[f"engine:{name}"]), "rows": len(mine),
                     "sources": sorted({lin.sources[i] for i in mine})}
    return out


def write_engine_fit(path: Path, engines: dict, make_folder: bool = False) -> str:
    """Write the fit's engine parameters beside the hardware profiles fitted with them (what
    serving.load_engines lays over engines.toml's priors)."""
    from .serving import _load_engines, read_engine_fit

    _write_json(path, {"source": SHIPPED_SOURCE, "what": "serving-engine parameters of the pooled fit "
                       "(pooled.py), fitted with the hardware profiles in this folder", "engines": engines},
                make_folder)
    _load_engines.cache_clear()
    read_engine_fit.cache_clear()
    return str(path)


def _remove_stale(folder: Path, keep: set) -> None:
    """Shipped profiles of hardware the fit no longer covers would still be read: remove them."""
    for f in folder.glob("*.json"):
        if f.name not in SIDE_FILES and f.stem not in keep:
            f.unlink()


def _mean_err(points, params) -> float | None:
    """Mean |error| of points under params."""
    from .validate import error, predict_row

    errs = []
    for pt in points:
        try:
            v = predict_row(pt, params)
        except ValueError:
            continue
        if v is not None and math.isfinite(v):
            errs.append(abs(error(v, *pt["range"])))
    return float(np.mean(errs)) if errs else None


def write_profile(path: Path, rep: dict, source: str, make_folder: bool = False) -> None:
    """Write one profile atomically (a temp file renamed over it); make_folder creates the
    user's profile folder; a user's --out folder must exist. OSError -> BadInput naming the path."""
    data = {"hardware": rep["hardware"], "params": rep["params"], "fitted": rep["fitted"],
            "inherited_from": rep.get("inherited_from"),
            "status": rep["status"], "points": rep["points"], "point_ids": rep["point_ids"],
            "sources": rep.get("sources", []), "fit_mean_abs_error": rep["fit_mean_abs_error"],
            "loo_mean_abs_error": rep["loo_mean_abs_error"],
            "loso_median_abs_error": rep.get("loso_median_abs_error"), "source": source}
    _write_json(Path(path), data, make_folder, "profile")


def _write_json(path: Path, data: dict, make_folder: bool, what: str = "file") -> None:
    tmp = None
    try:
        if make_folder:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise BadInput(f"cannot write the {what} {path}: {e.strerror or e}") from None


# ---------------------------------------------------------------- user points
#
# A user point is {"id", "workload": a Workload (global batch, as every result records it),
# "metric", "range"}. Rows come from a results database (llmbench.results.store.ResultsDB: each
# row's `point` is a Workload dict, its `metrics` a dict), or from a CSV / JSON list of rows in the
# published-reference vocabulary (model, hardware or system, batch, seq_len, devices, precision,
# tp, pp, zero, recompute, micro_batch, grad_accum, metric, value); each becomes a Workload through
# Workload.from_row. Layout knobs a row leaves out are the runtime's plain ones (train.as_run).

USER_METRICS = ("samples_per_s", "tokens_per_s", "step_time_s", "achieved_tflops", "mfu")
#: the one metric a results row is fitted on, first present first: a measured training row carries
#: all of USER_METRICS, which say the same step time; fitting them all would count the row five
#: times and leave-one-out would keep four copies of the point it leaves out
ROW_METRIC_ORDER = ("tokens_per_s", "samples_per_s", "step_time_s", "achieved_tflops", "mfu")
SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(p: Path) -> bool:
    """Whether `p` is an SQLite database, by its header (any name: 'runs', 'a?b.db')."""
    try:
        with open(p, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def read_points(path: str, hw_name: str) -> tuple[list[dict], list[dict]]:
    """Rows of a results DB, a CSV or a JSON list -> points of `hw_name`, and the rows skipped, each
    {"row": id, "reason": why} (a row of the database that no longer reads, another hardware or
    suite, no batch or seq_len, a value that is not a finite positive number, a configuration the
    model cannot predict). A directory or a device (/dev/zero) is refused before reading."""
    p, _ = regular_file(path, "calibration rows file")
    skipped = []
    if p.suffix in (".db", ".sqlite", ".sqlite3") or is_sqlite(p):
        rows, skipped = _read_db(p)
    elif p.suffix == ".json":
        data = read_small_json(p, "calibration rows file", MAX_ROWS_FILE_BYTES)
        rows = data if isinstance(data, list) else data.get("rows", []) if isinstance(data, dict) else []
    else:
        rows = _read_csv(p)
    points = []
    for i, row in enumerate(rows):
        for metric, value in _metrics_of(row):
            pt = _as_point(row, metric, value, hw_name, i)
            if isinstance(pt, str):
                rid = row.get("id") or row.get("key") if isinstance(row, dict) else None
                skipped.append({"row": str(rid or f"row{i}")[:40], "reason": pt})
            else:
                points.append(pt)
    return points, skipped


#: a CSV or JSON of result rows: 100 MB is ~10^6 rows, far more than a calibration reads
MAX_ROWS_FILE_BYTES = 100_000_000


def _read_csv(p: Path) -> list[dict]:
    try:
        text = read_small_text(p, "calibration rows file", MAX_ROWS_FILE_BYTES)
        return list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise BadInput(f"{p}: not a CSV of result rows ({e})") from None


def _read_db(p: Path) -> tuple[list[dict], list[dict]]:
    """The ok rows of a llmbench results database, decoded (point, metrics as dicts), and the rows
    that no longer read ({"row": key, "reason": why}: the store skips them); opened read-only (the
    store quotes the path into a file: URI, so '?' and '#' in a name are fine)."""
    from llmbench.results.store import ResultsDB

    try:
        with ResultsDB(p, readonly=True) as db:
            rows = [r for r in db.query() if r.get("status") == "ok"]
            return rows, [{"row": k[:40], "reason": f"no longer reads: {why}"} for k, why in db.skipped.items()]
    except sqlite3.Error as e:
        raise BadInput(f"{p.name}: not a llmbench results database ({e})") from None


def _metrics_of(row: dict) -> list[tuple[str, object]]:
    """(metric, value) pairs of a row: a results row's one metric (ROW_METRIC_ORDER), or its
    metric/value columns."""
    if isinstance(row, dict) and isinstance(row.get("metrics"), dict):
        m = row["metrics"]
        return [next(((k, m[k]) for k in ROW_METRIC_ORDER if m.get(k) is not None), ("", None))]
    return [(row.get("metric"), row.get("value"))] if isinstance(row, dict) else [("", None)]


def _as_point(row, metric, value, hw_name: str, i: int) -> dict | str:
    """A training point of `hw_name`, or why the row is not one (another hardware, suite or source,
    a missing batch or seq_len, a value that is not a finite positive number)."""
    if not isinstance(row, dict):
        return "not a table row"
    if row.get("source", "measured") not in ("measured", "published", "", None):
        return f"source {row.get('source')!r}"
    if metric not in USER_METRICS:
        return f"no metric of {', '.join(USER_METRICS)}"
    if not isinstance(row.get("point"), dict):
        missing = [k for k in ("batch", "seq_len") if row.get(k) in (None, "")]
        if missing:  # never fitted as the Workload's defaults (1 x 1024)
            return f"no {' or '.join(missing)}"
    try:
        w = Workload.from_row(row)
        v = float(value)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        return f"unreadable: {str(e).splitlines()[0][:80] if str(e) else type(e).__name__}"
    if not math.isfinite(v) or v <= 0:
        return f"{metric} {value!r} is not a finite positive number"
    if (w.hardware or hw_name) != hw_name:
        return f"hardware {w.hardware}"
    if w.suite != "train":
        return f"suite {w.suite}"
    return {"id": str(row.get("id") or row.get("key") or f"row{i}"), "workload": w.with_(hardware=hw_name),
            "metric": metric, "range": (v, v)}


def predict_user_point(pt: dict, params: dict) -> float:
    """The model's value of a user point's metric, under {hardware: parameters}."""
    from llmbench.hardware import get_hardware

    from .train import as_run, predict_train

    hw = get_hardware(next(iter(params)))
    w = as_run(pt["workload"], hw)
    pred = predict_train(w.spec(), hw, w, params[hw.name])
    return getattr(pred, pt["metric"])


def calibrate_from(path: str, hw_name: str) -> tuple[dict, int]:
    """Fit `hw_name` on the rows of a results DB / CSV / JSON. Each row is predicted with the layout
    it records (devices, tp, pp, ZeRO, recompute, micro-batch, grad-accum: as_run fills only what a
    row leaves out). The report has the fit (in-sample) and leave-one-out mean |error| and, per
    point, its layout and both errors (report["rows"])."""
    get_hardware(hw_name)
    points, skipped = read_points(path, hw_name)
    points = _predictable(points, hw_name, skipped)
    if not points:
        why = f"; first: {skipped[0]['row']}: {skipped[0]['reason']}" if skipped else ""
        raise BadInput(f"{path}: no usable points for {hw_name} ({len(skipped)} rows skipped{why})")
    rep = calibrate_points(hw_name, points, predict_user_point)
    rep["skipped_rows"] = len(skipped)
    rep["skipped"] = skipped
    rep["rows"] = point_errors(points, hw_name, rep)
    return rep, len(skipped)


def _predictable(points: list[dict], hw_name: str, skipped: list[dict]) -> list[dict]:
    """The points the model can predict under the priors; the others go to `skipped` with the
    model's reason (a row it cannot lay out no longer stops the whole fit)."""
    prior = {hw_name: _prior(hw_name)}
    out = []
    for pt in points:
        try:
            value = predict_user_point(pt, prior)
            if value is None or not math.isfinite(float(value)) or float(value) <= 0:
                raise ValueError("the model gives no positive value")
        except (ValueError, ZeroDivisionError, OverflowError) as e:
            skipped.append({"row": pt["id"][:40], "reason": f"not predictable: {str(e).splitlines()[0][:100]}"})
            continue
        out.append(pt)
    return out


def point_errors(points: list[dict], hw_name: str, rep: dict) -> list[dict]:
    """Per point: its workload in short, the measured value, the fitted prediction, its in-sample
    error and its leave-one-out error (None where nothing was fitted)."""
    from .plan import layout_text
    from .train import as_run

    hw = get_hardware(hw_name)
    params = {**_prior(hw_name), **rep["params"]}
    loo = rep.get("loo_abs_errors") or [None] * len(points)
    out = []
    for pt, held_out in zip(points, loo):
        w = as_run(pt["workload"], hw)
        value = pt["range"][0]
        try:
            pred = predict_user_point(pt, {hw_name: params})
        except ValueError:
            pred = None
        out.append({"id": pt["id"], "model": w.model, "batch": w.batch, "seq_len": w.seq_len,
                    "layout": layout_text(w), "metric": pt["metric"], "measured": value, "fitted": pred,
                    "fit_error": None if pred is None else pred / value - 1.0, "loo_abs_error": held_out})
    return out


def user_profile_path(hw_name: str) -> Path:
    """Where `calibrate --from` writes by default: the user's profile folder (profile_dir), which
    params.load_profile reads before the shipped profiles."""
    return profile_dir() / f"{hw_name}.json"
