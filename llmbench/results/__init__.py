"""Results: the SQLite store of every measured, predicted or published point, and its exports.

    llmbench results list --json
    llmbench results export --format csv -o results.csv

    import llmbench as lb
    lb.results.open("runs.db").to_dataframe(source="measured")   # pandas, if installed
"""
from __future__ import annotations

__all__ = ["ResultsDB", "open", "point_key", "record_published"]


def __getattr__(name):  # lazy: `llmbench.results.cli` loads at CLI start-up without sqlite3
    if name in ("ResultsDB", "point_key"):
        from llmbench.results import store
        return getattr(store, name)
    raise AttributeError(name)


def open(path=None, *, readonly: bool = True):  # noqa: A001 - lb.results.open(db), as the API reads
    """The results database at `path` (else $LLMBENCH_DB, else ./llmbench-results.db) as a
    ResultsDB with its exports as methods (export.ResultsTable: to_dataframe, to_csv, to_json):
    read-only by default (a missing file is an error); readonly=False creates it."""
    from llmbench.results.export import ResultsTable

    return ResultsTable(path, readonly=readonly)


def record_published(db, path=None):
    """Load llmbench/reference/published.csv into `db` as source="published" (idempotent)."""
    from llmbench.results.published import record_published as _rp

    return _rp(db, path)
