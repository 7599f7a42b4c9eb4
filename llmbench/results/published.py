"""Published reference values (llmbench/reference/published.csv) as source="published" results.

    llmbench results load-published --db runs.db
    python -c "from llmbench.results import ResultsDB, record_published; print(record_published(ResultsDB()))"

Each CSV row is one published figure, recorded under its Workload (`Workload.from_row`: system ->
hardware, task -> suite, seq_len, devices, the layout columns), so it shares `workload_id` with
the measured and predicted results of the same workload. Several published figures may describe
one workload (samples/s and the epoch time of one run; MLPerf's offline and server scenarios), so
the row id is the result's tag: reloading the file replaces the same rows (idempotent) and a
corrected value overwrites the old one. The row id, citation, unit and notes are in `environment`.

A row whose configuration is not a workload (a range of device counts, a precision llmbench does
not know) is kept as a plain point (id, suite, model, hardware) with the reason in
environment["not_a_workload"]: no published figure is dropped.

The tables are read (and checked) by llmbench/published.py, the one reader; the file read here
is `PUBLISHED_CSV` by default. published_v2.csv (issue 10: the same ids plus 13 more sources
and the layout columns) reads through the same code (`record_published(db, PUBLISHED_V2_CSV)`);
the default switches when perfmodel's validation does, so the report compares one set of rows.
"""
from __future__ import annotations

from pathlib import Path

from llmbench.published import PUBLISHED_CSV, published_rows


def _num(text: str):
    """int or float when the cell is a plain number, else the text (ranges like '1.8-2.0':
    llmbench.published.parse_range reads them)."""
    text = (text or "").strip()
    if text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def published_point(row: dict):
    """(point, why not a workload): the Workload of one published row, or a plain point (id,
    suite, model, hardware) and the one-line reason its configuration is not a workload."""
    from llmbench.point import Workload

    try:
        return Workload.from_row(row), None
    except (TypeError, ValueError) as e:  # BadInput is a ValueError
        return ({"published_id": row["id"], "suite": row["task"], "model": row["model"],
                 "hardware": row["system"]}, str(e))


def record_published(db, path: str | Path | None = None) -> list[str]:
    """Record every published row in `db` (source="published", tag = the row id); returns the
    keys, one per row."""
    keys = []
    file = Path(path) if path else PUBLISHED_CSV
    for row in published_rows(file):
        point, why = published_point(row)
        environment = {"id": row["id"], "reference": row["source"], "unit": row["unit"],
                       "notes": row["notes"], "file": f"llmbench/reference/{file.name}",
                       **({"not_a_workload": why} if why else {})}
        keys.append(db.record(point, source="published", metrics={row["metric"]: _num(row["value"])},
                              environment=environment, study=None, tag=row["id"]))
    return keys
