"""Published reference values (llmbench/reference/published.csv) as source="published" results.

    python -c "from llmbench.results import ResultsDB, record_published; print(record_published(ResultsDB()))"

Each CSV row is one published figure; its point holds the row id, so reloading the file replaces
the same rows (idempotent) and a corrected value overwrites the old one.
"""
from __future__ import annotations

import csv
from pathlib import Path

PUBLISHED_CSV = Path(__file__).resolve().parent.parent / "reference" / "published.csv"


def _num(text: str):
    """int or float when the cell is a plain number, else the text (ranges like '1.8-2.0')."""
    text = (text or "").strip()
    if text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def published_rows(path: str | Path | None = None) -> list[dict]:
    """The rows of published.csv as dicts of str."""
    with open(path or PUBLISHED_CSV, newline="") as f:
        return list(csv.DictReader(f))


def published_point(row: dict) -> dict:
    """The point of one published row: suite is the task (train|infer), hardware the system."""
    return {"published_id": row["id"], "suite": row["task"], "model": row["model"],
            "hardware": row["system"], "task": row["task"], "precision": row["precision"] or None,
            "batch": _num(row["batch"]), "seq": _num(row["seq_len"]),
            "devices": _num(row["devices"])}


def record_published(db, path: str | Path | None = None) -> list[str]:
    """Record every published row in `db` (source="published"); returns the keys."""
    keys = []
    for row in published_rows(path):
        value = _num(row["value"])
        metrics = {row["metric"]: value}
        environment = {"reference": row["source"], "unit": row["unit"], "notes": row["notes"],
                       "file": "llmbench/reference/published.csv"}
        keys.append(db.record(published_point(row), source="published", metrics=metrics,
                              environment=environment, study=None))
    return keys
