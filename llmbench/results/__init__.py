"""Results: the SQLite store of every measured, predicted or published point, and its exports.

    llmbench results list --json
    llmbench results export --format csv -o results.csv
"""
from llmbench.results.store import ResultsDB, point_key

__all__ = ["ResultsDB", "point_key", "record_published"]


def record_published(db, path=None):
    """Load llmbench/reference/published.csv into `db` as source="published" (idempotent)."""
    from llmbench.results.published import record_published as _rp

    return _rp(db, path)
