"""Nothing measured is lost: check the results DB before the work, and if recording fails anyway,
save the result to a side file named in the error (stdlib only).

    from llmbench.results.safe import check_writable, record_or_save, load_saved
    db_path = check_writable(args.db)          # before measuring: one BadInput line if unusable
    result = measure(...)                      # minutes of work
    key = record_or_save(db_path, point, metrics=result["metrics"], environment=env)
    # on failure: BadInput("could not record the result in runs.db (...); saved to
    #   runs.db.unsaved-20261202T120000-1a2b3c4d.json: load it later with load_saved")
    load_saved("runs.db", "runs.db.unsaved-....json")   # records it once the DB is usable again

The side file goes next to the DB, else into the current directory, else the temp directory
(whichever is writable first). It is strict JSON (non-finite floats written as strings), made with
O_EXCL so it never replaces another file. Tested in tests/test_robust_store.py.
"""
from __future__ import annotations

import json
import math
import os
import sqlite3
import tempfile
import time
from pathlib import Path

from llmbench.errors import BadInput
from llmbench.results.store import ResultsDB, check_path, default_path, explain, make_row

SIDE_KIND = "llmbench-unsaved-result"


def check_not_db(out: str | os.PathLike | None, db: str | os.PathLike | None, flag: str) -> None:
    """BadInput before anything is written when an output file `out` is the results database
    (or one of its SQLite side files): writing it would destroy what is recorded."""
    if not out:
        return
    dbp = default_path(db)
    o, d = os.path.realpath(out), os.path.realpath(dbp)
    if o in (d, d + "-wal", d + "-shm", d + "-journal") or (
            os.path.exists(out) and os.path.exists(dbp) and os.path.samefile(out, dbp)):
        raise BadInput(f"{flag} {out} is the results database {dbp}: writing it would destroy the "
                       "recorded results; name another file")


def check_writable(path: str | os.PathLike | None = None) -> Path:
    """Before the work: an existing DB is opened, its schema checked, and a write transaction run
    and rolled back; a new one needs an existing, writable directory (nothing is created, so bad
    input later leaves no empty file). Returns the path; raises BadInput naming it."""
    path = default_path(path)
    if not path.exists() and str(path) != ":memory:":
        check_path(path, readonly=False)
        if not os.access(path.parent if str(path.parent) else ".", os.W_OK | os.X_OK):
            raise BadInput(f"cannot create results database {path}: directory {path.parent} "
                           "is not writable")
        return path
    with ResultsDB(path) as db:
        con = db._con
        try:
            db._retry(lambda: con.execute("BEGIN IMMEDIATE"))
            con.execute("INSERT OR IGNORE INTO study_points (study, key) VALUES (?, ?)",
                        ("llmbench-write-check", "-"))
        except (sqlite3.Error, OSError) as e:
            raise BadInput(explain(db.path, e)) from None
        finally:
            if con.in_transaction:
                con.execute("ROLLBACK")
        return db.path


def record_or_save(db_path: str | os.PathLike | None, point, **fields) -> str:
    """`ResultsDB(db_path).record(point, **fields)`; if that fails, the result goes to a side file
    and the BadInput raised names it. Returns the key when recorded."""
    path = default_path(db_path)
    try:
        with ResultsDB(path) as db:
            return db.record(point, **fields)
    except (BadInput, sqlite3.Error, OSError) as e:
        reason = str(e) if isinstance(e, BadInput) else explain(path, e)
        row = make_row(point, **fields)
        side = save_side_file(path, row, reason)
        where = f"saved to {side}" if side else "and no side file could be written either"
        raise BadInput(f"could not record the result: {reason}; {where} (load it later with "
                       "llmbench.results.safe.load_saved)") from None


def save_side_file(db_path: Path, row: dict, reason: str) -> Path | None:
    """Write `row` as JSON next to the DB, else in the current or temp directory; None if all fail."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    name = f"{db_path.name or 'llmbench-results.db'}.unsaved-{stamp}-{row['key'][:8]}.json"
    text = json.dumps({"kind": SIDE_KIND, "db": str(db_path), "reason": reason, "row": _finite(row)},
                      indent=1, sort_keys=True, allow_nan=False, default=str) + "\n"
    for folder in (db_path.parent, Path.cwd(), Path(tempfile.gettempdir())):
        target = folder / name
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            continue
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return target
    return None


def _finite(obj):
    """Non-finite floats as text ('nan', 'inf'), so the file is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def load_saved(db_path: str | os.PathLike | None, side_file: str | os.PathLike) -> str:
    """Record a result saved by `record_or_save` into the DB (as it was measured); returns its key."""
    side = Path(side_file)
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BadInput(f"{side}: cannot read a saved result ({e})") from None
    row = data.get("row") if isinstance(data, dict) and data.get("kind") == SIDE_KIND else None
    if not isinstance(row, dict) or not isinstance(row.get("point"), dict):
        raise BadInput(f"{side}: not a saved llmbench result")
    fields = {k: row[k] for k in ("source", "status", "metrics", "environment", "error", "study")
              if k in row}
    made = make_row(_point_of(row, side), **fields, created_at=row.get("created_at"))
    if made["workload_id"] and _is_key(row.get("key")):
        made["key"] = row["key"]  # a tagged result (e.g. a published row's id) keeps its key
    with ResultsDB(db_path) as db, db.transaction():
        db.put_row(made)
    return made["key"]


def _point_of(row: dict, side: Path):
    """The saved row's point: its Workload when it was a workload's result, else the dict."""
    if not row.get("workload_id"):
        return row["point"]
    from llmbench.point import Workload

    try:
        w = Workload.from_dict(row["point"])
    except (TypeError, ValueError) as e:
        raise BadInput(f"{side}: the saved workload does not read back ({e})") from None
    if w.id() != row["workload_id"]:
        raise BadInput(f"{side}: the saved workload does not match its workload_id (edited?)")
    return w


def _is_key(key) -> bool:
    return isinstance(key, str) and len(key) == 64 and all(c in "0123456789abcdef" for c in key)
