"""Reading results rows (dicts from `ResultsDB.query`) for the report: a row's configuration
through its `Workload` (`Workload.from_dict(row["point"])`) and its numbers through declared
metric names only.

    from llmbench.report.rows import Data, field, metric
    data = Data.from_db(db)
    for r in data.predicted("gas"):
        field(r, "grad_accum"), metric(r, "tokens_per_s")

`metric(row, name)` accepts a name of `llmbench.point.METRICS` (what every engine reports) or of
the few declared here for rows that are not a workload's measured or predicted result: published
ratios, the validation comparison, the measured ceilings and the streaming run. Any other name is
an `UnknownMetric` error, so a metric renamed in an engine fails a test instead of turning into a
silent "not available"; data that is simply absent (a study not run) reads as None and the figure
says "not measured / not available". `field(row, name)` accepts only Workload and Layout fields.
"""
from __future__ import annotations

import math
from collections import defaultdict

from llmbench.point import LAYOUT_FIELDS, METRICS, WORKLOAD_FIELDS, Workload

#: published-only metrics (llmbench/reference/README.md): ratios and counts a source states
PUBLISHED_METRICS = {
    "gas4_over_gas1": "throughput at GAS 4 over GAS 1 (arXiv:2310.04607 Fig. 6)",
    "s0.9_over_dense": "speed-up of 90% weight sparsity over dense (Fig. 7; may be a range)",
    "per_device_speedup": "tokens/s per device of one system over another (Table IV)",
    "speedup": "throughput of one system over another (Table IV)",
    "speedup_over_1_system": "throughput of N systems over one",
    "epoch_time_h": "hours for one epoch of a data set",
    "devices_needed": "devices that hold the model (inference)",
    "trend": "a qualitative claim (text)",
}
#: the validation comparison (studies/validation.py): one published row against its prediction
VALIDATION_METRICS = {
    "published": "the published value (a number: the middle of a range)",
    "published_text": "the published value as written", "predicted": "llmbench's prediction",
    "rel_error": "predicted / published - 1 (0 inside a published range)",
    "tolerance": "the error validate accepts", "metric": "which metric was compared",
    "assumption": "settings the published row leaves open", "problem": "why there is no prediction",
    "reference": "the published row's source", "claim": "a trend's claim", "passed": "a trend held",
    "detail": "the numbers behind a trend",
}
#: `llmbench stream compare --json` (measured; recorded by studies/reproduce.py)
STREAM_METRICS = {
    "resident_tokens_per_s": "tokens/s with the weights resident",
    "streamed_tokens_per_s": "tokens/s with the weights streamed layer by layer",
    "ratio": "streamed over resident tokens/s, as stream compare computes it",
    "resident_loss": "loss per step (list), resident", "streamed_loss": "loss per step (list), streamed",
    "max_rel_loss_diff": "largest relative difference of the two loss curves",
    "n_layers": "layers of the streamed model", "d_model": "its width",
}
#: a seed claim's row (studies/fidelity.py, stored as study "fidelity"): fidelity_<column>
FIDELITY_METRICS = {f"fidelity_{k}": v for k, v in {
    "id": "claim id (seed-number)", "seed": "seed document", "where": "section, figure or table",
    "claim": "the claim", "published": "the published value or trend", "llmbench": "what llmbench computes",
    "source": "measured / predicted in-sample / out-of-sample / priors", "verdict": "computed verdict",
    "tolerance": "the verdict's tolerance",
    "mechanism": "what makes the row less than reproduced", "detail": "error, refusal, scope", "check": "how it is checked",
}.items()}
#: a measured loss curve (studies/sparse_loss.py: seed 002 Fig. 8)
CURVE_METRICS = {"loss_curve": "training loss per step (list)", "tokens": "tokens trained in the run",
                 "curve_every": "steps between two points of loss_curve"}
#: a prediction's chosen device count (inference: the fewest that hold the model), which
#: perfmodel reports beside its METRICS until the chosen layout is part of the result's workload
PREDICTED_EXTRA = {"devices": "devices the prediction used"}
KNOWN_METRICS = {**METRICS, **PUBLISHED_METRICS, **VALIDATION_METRICS, **STREAM_METRICS, **PREDICTED_EXTRA,
                 **FIDELITY_METRICS, **CURVE_METRICS}
_FIELDS = set(WORKLOAD_FIELDS) | set(LAYOUT_FIELDS)
_COLUMNS = ("hardware", "model", "source", "study", "suite", "status")


class UnknownMetric(KeyError):
    """The report asked for a metric name no engine declares (a renamed metric: a bug)."""


def workload(row: dict) -> Workload | None:
    """The row's Workload (parsed once), or None for a row that is not a workload's result."""
    if "_workload" not in row:
        row["_workload"] = Workload.from_dict(row["point"]) if row.get("workload_id") else None
    return row["_workload"]


def field(row: dict, name: str, default=None):
    """A Workload field (or layout knob) of the row; `default` when the row has no workload or
    the field is None."""
    if name not in _FIELDS:
        raise KeyError(f"{name!r} is not a Workload field (llmbench/point.py)")
    w = workload(row)
    if w is None:
        return default
    v = getattr(w.layout, name) if name in LAYOUT_FIELDS else getattr(w, name)
    return default if v is None else v


def value(row: dict, name: str):
    """The raw value of a declared metric (a number, text or a list), None when absent."""
    if name not in KNOWN_METRICS:
        raise UnknownMetric(f"metric {name!r} is not declared (llmbench.point.METRICS or report/rows.py)")
    return (row.get("metrics") or {}).get(name)


def metric(row: dict, name: str) -> float | None:
    """A declared metric of the row as a finite number, else None."""
    v = value(row, name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def devices_of(row: dict) -> int:
    """Devices a result ran on: what a prediction chose (its metrics' devices, or the workload it
    reports it ran as), else the workload's (1 if unsaid)."""
    ran = ((row.get("metrics") or {}).get("workload") or {}).get("devices")
    return int(metric(row, "devices") or (ran if isinstance(ran, int) and ran > 0 else 0)
               or field(row, "devices") or 1)


def ref_id(row: dict) -> str | None:
    """The published row id of a published or validation row."""
    return (row.get("environment") or {}).get("id")


def ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("status", "ok") == "ok"]


def _get(row: dict, key: str):
    return row.get(key) if key in _COLUMNS else field(row, key)


def by(rows: list[dict], *keys: str) -> dict:
    """Group rows by a tuple of columns or Workload fields (a single key groups by its value)."""
    out = defaultdict(list)
    for r in rows:
        k = tuple(_get(r, key) for key in keys)
        out[k[0] if len(keys) == 1 else k].append(r)
    return dict(out)


def select(rows: list[dict], **want) -> list[dict]:
    """Rows whose columns or Workload fields equal every given value."""
    return [r for r in rows if all(_get(r, k) == v for k, v in want.items())]


def xy(rows: list[dict], x: str, y: str) -> tuple[list, list]:
    """Sorted (x, y) pairs of the rows that have both (x: a Workload field, y: a metric)."""
    pts = sorted((field(r, x), metric(r, y)) for r in rows
                 if field(r, x) is not None and metric(r, y) is not None)
    return [p[0] for p in pts], [p[1] for p in pts]


def command_of(row: dict) -> str | None:
    return (row.get("environment") or {}).get("command")


def reference_of(row: dict) -> str | None:
    return (row.get("environment") or {}).get("reference")


def hw_order(rows) -> list[str]:
    """Hardware of `rows` in the order it first appears: the order a study's `predict:` section
    lists it (rows come oldest first)."""
    return list(dict.fromkeys(r.get("hardware") for r in rows if r.get("hardware")))


def flat_ceilings(data) -> dict:
    """gemm_<dtype>_flops_per_s and copy_bandwidth_bytes_per_s (best of the repeats, as the saved
    hardware profile uses) from `llmbench measure ceilings --json` (TFLOP/s and GB/s there).
    Goes when ceilings report base units."""
    out = {}
    if not isinstance(data, dict):
        return out
    for dt, v in (data.get("gemm") or {}).items():
        if isinstance(v, dict) and isinstance(v.get("max"), (int, float)):
            out[f"gemm_{dt}_flops_per_s"] = v["max"] * 1e12
            out[f"gemm_{dt}_flops_per_s_median"] = v.get("median", v["max"]) * 1e12
    copy = data.get("copy") or {}
    if isinstance(copy, dict) and isinstance(copy.get("max"), (int, float)):
        out["copy_bandwidth_bytes_per_s"] = copy["max"] * 1e9
    return out


def ceilings_of(row: dict) -> tuple[dict[str, float], float]:
    """({dtype: GEMM FLOP/s}, copy bytes/s) of a ceilings row (flat or as measure records it)."""
    m = {**(row.get("metrics") or {}), **flat_ceilings(row.get("metrics") or {})}
    peaks = {k[5:-12]: float(v) for k, v in m.items()
             if k.startswith("gemm_") and k.endswith("_flops_per_s") and isinstance(v, (int, float))}
    bw = m.get("copy_bandwidth_bytes_per_s")
    return peaks, float(bw) if isinstance(bw, (int, float)) else 0.0


class Data:
    """All rows of a report, indexed by study (a point linked to several studies is in each)."""

    def __init__(self, rows_by_study: dict[str, list[dict]], all_rows: list[dict]):
        self.by_study = rows_by_study
        self.all = all_rows
        self.prices: dict | None = None
        """price per device-hour overrides (llmbench report --price HW=USD)"""
        self.measured_ids = {r["workload_id"] for r in all_rows
                             if r.get("source") == "measured" and r.get("workload_id")}

    @classmethod
    def from_db(cls, db) -> "Data":
        by_study = {s: db.query(study=s) for s in db.studies()}
        all_rows = db.query()
        # `llmbench measure ceilings` records its row without a study: file it under "ceilings"
        have = {r["key"] for r in by_study.get("ceilings", [])}
        by_study.setdefault("ceilings", []).extend(
            r for r in all_rows if r.get("suite") == "ceilings" and r["key"] not in have)
        return cls(by_study, all_rows)

    @classmethod
    def from_rows(cls, rows: list[dict]) -> "Data":
        grouped = defaultdict(list)
        for r in rows:
            if r.get("study"):
                grouped[r["study"]].append(r)
        return cls(dict(grouped), list(rows))

    def add(self, row: dict) -> None:
        """A row not in the database (a prediction made for this report)."""
        self.all.append(row)
        if row.get("study"):
            self.by_study.setdefault(row["study"], []).append(row)

    def get(self, study: str | None = None, source: str | None = None, *, status: str | None = "ok",
            **want) -> list[dict]:
        rows = self.all if study is None else self.by_study.get(study, [])
        if source is not None:
            rows = [r for r in rows if r.get("source") == source]
        if status is not None:
            rows = [r for r in rows if r.get("status", "ok") == status]
        return select(rows, **want) if want else rows

    def is_mirror(self, row: dict) -> bool:
        """A prediction of a workload measured here (drawn beside the measurement)."""
        return row.get("source") == "predicted" and row.get("workload_id") in self.measured_ids

    def predicted(self, study: str, *, mirrors: bool = False, **want) -> list[dict]:
        """Predicted rows of a study with their metrics (status ok, and oom: predicted not to fit,
        drawn all the same): the catalog sweep, or (mirrors=True) the predictions of the
        workloads measured here."""
        rows = [r for r in self.by_study.get(study, []) if r.get("source") == "predicted"
                and r.get("status") in ("ok", "oom") and self.is_mirror(r) == mirrors]
        return select(rows, **want) if want else rows

    def published(self, **want) -> list[dict]:
        return self.get(None, "published", **want)
