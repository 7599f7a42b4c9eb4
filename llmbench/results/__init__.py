"""Results: the SQLite store of every measured, predicted or published point, and its exports.

    llmbench results list --json
    llmbench results export --format csv -o results.csv
"""
from __future__ import annotations

__all__ = ["ResultsDB", "point_key", "record_published"]


def __getattr__(name):  # lazy: `llmbench.results.cli` loads at CLI start-up without sqlite3
    if name in ("ResultsDB", "point_key"):
        from llmbench.results import store
        return getattr(store, name)
    raise AttributeError(name)


def record_published(db, path=None):
    """Load llmbench/reference/published.csv into `db` as source="published" (idempotent)."""
    from llmbench.results.published import record_published as _rp

    return _rp(db, path)
