"""Export results: CSV (point fields and metrics flattened to columns), JSON, Parquet (pyarrow),
a pandas DataFrame (the CSV's columns); `ResultsTable` (what llmbench.results.open returns) has
them as methods:

    import llmbench as lb
    lb.results.open("runs.db").to_dataframe(source="measured")

    llmbench results export --format csv -o results.csv
    llmbench results export --format parquet -o results.parquet --study transformer-block
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from llmbench._json import strict
from llmbench.errors import BadInput
from llmbench.results.store import ResultsDB, canonical_json

FORMATS = ("csv", "json", "parquet")
FIXED = ("key", "study", "source", "suite", "model", "hardware", "status", "error", "created_at",
         "workload_id")


def _point(row: dict) -> dict:
    """A row's point with a Workload's layout knobs (tp, pp, ...) as columns of their own."""
    p = dict(row["point"])
    if row.get("workload_id") and isinstance(p.get("layout"), dict):
        p.update(p.pop("layout"))
    return p


def flatten(rows: list[dict]) -> tuple[list[str], list[dict]]:
    """Columns and flat rows: the fixed columns, then every point field, then every metric.

    A metric whose name is already a column is written as `metrics.<name>`; nested values
    (lists, dicts) become JSON text; the environment is one JSON text column."""
    points = [_point(r) for r in rows]
    point_cols = sorted({k for p in points for k in p} - set(FIXED))
    metric_names = sorted({k for r in rows for k in r["metrics"]})
    taken = set(FIXED) | set(point_cols)
    metric_cols = {m: (f"metrics.{m}" if m in taken else m) for m in metric_names}
    columns = list(FIXED) + point_cols + [metric_cols[m] for m in metric_names] + ["environment"]
    flat = []
    for r, p in zip(rows, points):
        d = {c: r.get(c) for c in FIXED}
        for c in point_cols:
            d[c] = _cell(p.get(c))
        for m in metric_names:
            d[metric_cols[m]] = _cell(r["metrics"].get(m))
        d["environment"] = canonical_json(r["environment"])
        flat.append(d)
    return columns, flat


def _cell(v):
    return canonical_json(v) if isinstance(v, (list, dict, tuple)) else v


def to_csv(rows: list[dict]) -> str:
    columns, flat = flatten(rows)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(flat)
    return buf.getvalue()


def to_json(rows: list[dict]) -> str:
    """Strict JSON: non-finite numbers become null (Python's json writes bare NaN otherwise)."""
    return json.dumps(strict(rows), indent=2, sort_keys=True, default=str, allow_nan=False)


def to_parquet(rows: list[dict], path: str | Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError("parquet export needs pyarrow: pip install pyarrow (or use --format csv|json)") from None
    columns, flat = flatten(rows)
    arrays = {c: _arrow_column(pa, [r[c] for r in flat]) for c in columns}
    pq.write_table(pa.table(arrays), str(path))


def to_dataframe(rows: list[dict]):
    """A pandas DataFrame of `rows`, one row per result, the columns of the CSV export (flatten):
    the fixed columns, every point field, every metric; nested values as JSON text."""
    try:
        import pandas as pd
    except ImportError:
        raise BadInput("to_dataframe needs pandas: pip install pandas (or use to_csv / "
                       "`llmbench results export --format csv`)") from None
    columns, flat = flatten(rows)
    return pd.DataFrame.from_records(flat, columns=columns)


class ResultsTable(ResultsDB):
    """A ResultsDB with its exports as methods, each over `query(**filters)` (study, source, suite,
    model, hardware, status, workload_id)."""

    def to_dataframe(self, **filters):
        """A pandas DataFrame, one row per result (pandas optional: BadInput saying so)."""
        return to_dataframe(self.query(**filters))

    def to_csv(self, **filters) -> str:
        return to_csv(self.query(**filters))

    def to_json(self, **filters) -> str:
        return to_json(self.query(**filters))


def _arrow_column(pa, values: list):
    """One typed column: int64 or float64 when every cell is a number, else string."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.int64())
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    if present and all(isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.bool_())
    return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def export(rows: list[dict], fmt: str, path: str | Path | None = None) -> str | None:
    """Write `rows` as `fmt` to `path`; CSV and JSON return the text when `path` is None."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if path is None:
            raise ValueError("parquet export needs an output file: --output PATH")
        to_parquet(rows, path)
        return None
    text = to_csv(rows) if fmt == "csv" else to_json(rows)
    if path is None:
        return text
    Path(path).write_text(text)
    return None
