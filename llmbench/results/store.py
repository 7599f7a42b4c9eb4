"""SQLite store of every measured, predicted or published point (stdlib sqlite3, no torch).

    from llmbench.results.store import ResultsDB
    with ResultsDB("runs.db") as db:
        key = db.record({"suite": "block", "model": "gpt2-xl", "hardware": "cpu", "batch": 8,
                         "seq": 1024, "precision": "fp32"}, metrics={"fwd_time_s": 0.12})
        db.get(key)["metrics"]

One row per point, keyed by `point_key(point, source)` = sha256 of the canonical JSON of the point
and its source, so an interrupted sweep resumes (`db.has(key)`) and nothing is done twice. WAL mode
and a busy timeout make several writer processes safe; every write is one transaction, so a
process killed mid-write (SIGKILL) leaves either the whole row or none of it.

The database path is the argument, else the environment variable LLMBENCH_DB, else
./llmbench-results.db.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path

DEFAULT_DB = "llmbench-results.db"
ENV_VAR = "LLMBENCH_DB"
SOURCES = ("measured", "predicted", "published")
STATUSES = ("ok", "oom", "error", "skipped")
COLUMNS = ("key", "study", "suite", "source", "model", "hardware", "status", "error", "point",
           "metrics", "environment", "created_at")
_JSON_COLUMNS = ("point", "metrics", "environment")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    study TEXT,
    suite TEXT,
    source TEXT NOT NULL,
    model TEXT,
    hardware TEXT,
    status TEXT NOT NULL,
    error TEXT,
    point TEXT NOT NULL,
    metrics TEXT NOT NULL,
    environment TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_study ON results (study);
CREATE INDEX IF NOT EXISTS results_model_hw ON results (model, hardware);
-- a point may belong to several studies (the same measurement is shared, never redone)
CREATE TABLE IF NOT EXISTS study_points (
    study TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (study, key)
);
"""


def canonical_json(obj) -> str:
    """JSON with sorted keys and no whitespace: the same point always gives the same text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(o):
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    return str(o)


def point_key(point: dict, source: str = "measured") -> str:
    """sha256 hex of the canonical JSON of `point` plus `source`."""
    if not isinstance(point, dict):
        raise ValueError(f"a point is a dict, got {type(point).__name__}")
    text = canonical_json({"point": point, "source": source})
    return hashlib.sha256(text.encode()).hexdigest()


def default_path(path: str | os.PathLike | None = None) -> Path:
    """The DB path: the argument, else $LLMBENCH_DB, else ./llmbench-results.db."""
    return Path(path or os.environ.get(ENV_VAR) or DEFAULT_DB)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class ResultsDB:
    """The results table of one SQLite file. Use as a context manager or call `close()`."""

    def __init__(self, path: str | os.PathLike | None = None, *, timeout_s: float = 60.0):
        self.path = default_path(path)
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one transaction per write
        self._con = sqlite3.connect(str(self.path), timeout=timeout_s, isolation_level=None)
        self._con.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        self._retry(lambda: self._con.execute("PRAGMA journal_mode = WAL"), timeout_s)
        # NORMAL is durable against a killed process in WAL mode (only a power cut can lose the tail)
        self._con.execute("PRAGMA synchronous = NORMAL")
        self._retry(lambda: self._con.executescript(_SCHEMA), timeout_s)

    @staticmethod
    def _retry(fn, timeout_s: float):
        """Run fn, retrying while another process holds the lock (schema/WAL set-up races)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    # ------------------------------------------------------------ context manager
    def __enter__(self) -> "ResultsDB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    @property
    def journal_mode(self) -> str:
        return self._con.execute("PRAGMA journal_mode").fetchone()[0]

    # ------------------------------------------------------------ writing
    def record(self, point: dict, *, source: str = "measured", status: str = "ok",
               metrics: dict | None = None, environment: dict | None = None,
               error: str | None = None, study: str | None = None) -> str:
        """Insert or replace the result of `point` (one transaction); returns its key."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        key = point_key(point, source)
        row = (key, study, _str_or_none(point.get("suite")), source,
               _str_or_none(point.get("model")), _str_or_none(point.get("hardware")), status,
               error, canonical_json(point), canonical_json(metrics or {}),
               canonical_json(environment or {}), _now())
        con = self._con
        self._retry(lambda: con.execute("BEGIN IMMEDIATE"), 60.0)
        try:
            con.execute(f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) "
                        f"VALUES ({', '.join('?' * len(COLUMNS))})", row)
            if study:
                con.execute("INSERT OR IGNORE INTO study_points (study, key) VALUES (?, ?)",
                            (study, key))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return key

    def link(self, study: str, key: str) -> None:
        """Mark an already recorded point as part of `study` too (shared measurements)."""
        self._con.execute("INSERT OR IGNORE INTO study_points (study, key) VALUES (?, ?)",
                          (study, key))

    def delete(self, key: str) -> bool:
        """Remove one result (e.g. to redo it); True if it existed."""
        con = self._con
        self._retry(lambda: con.execute("BEGIN IMMEDIATE"), 60.0)
        try:
            n = con.execute("DELETE FROM results WHERE key = ?", (key,)).rowcount
            con.execute("DELETE FROM study_points WHERE key = ?", (key,))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return n > 0

    # ------------------------------------------------------------ reading
    def has(self, key: str) -> bool:
        return self._con.execute("SELECT 1 FROM results WHERE key = ?", (key,)).fetchone() is not None

    def get(self, key: str) -> dict | None:
        """The decoded row of `key`, or None if it was never recorded."""
        cur = self._con.execute(f"SELECT {', '.join(COLUMNS)} FROM results WHERE key = ?", (key,))
        row = cur.fetchone()
        return _decode(row) if row else None

    def query(self, study: str | None = None, source: str | None = None, suite: str | None = None,
              model: str | None = None, hardware: str | None = None,
              status: str | None = None) -> list[dict]:
        """Rows matching every given filter (None = any), oldest first, JSON fields decoded.

        `study` matches the points linked to that study (a shared point belongs to each study
        that recorded it), not only the study that wrote the row last."""
        where, args = [], []
        for col, val in (("source", source), ("suite", suite), ("model", model),
                         ("hardware", hardware), ("status", status)):
            if val is not None:
                where.append(f"r.{col} = ?")
                args.append(val)
        if study is not None:
            where.append("(r.study = ? OR r.key IN (SELECT key FROM study_points WHERE study = ?))")
            args += [study, study]
        sql = f"SELECT {', '.join('r.' + c for c in COLUMNS)} FROM results r"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY r.created_at, r.key"
        return [_decode(r) for r in self._con.execute(sql, args).fetchall()]

    def studies(self) -> dict[str, int]:
        """Study name -> number of linked points."""
        cur = self._con.execute("SELECT study, COUNT(*) FROM study_points GROUP BY study ORDER BY study")
        return dict(cur.fetchall())

    def count(self) -> int:
        return self._con.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def integrity_check(self) -> str:
        return self._con.execute("PRAGMA integrity_check").fetchone()[0]


def _str_or_none(x) -> str | None:
    return None if x is None else str(x)


def _decode(row) -> dict:
    d = dict(zip(COLUMNS, row))
    for col in _JSON_COLUMNS:
        d[col] = json.loads(d[col]) if d[col] else {}
    return d
