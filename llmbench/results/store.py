"""SQLite store of every measured, predicted or published point (stdlib sqlite3, no torch).

    from llmbench.point import Workload
    from llmbench.results.store import ResultsDB
    w = Workload(suite="block", model="gpt2-xl", hardware="cpu", batch=8, seq_len=1024,
                 precision="fp32")
    with ResultsDB("runs.db") as db:
        key = db.record(w, metrics={"fwd_time_s": 0.12})      # key = w.key("measured")
        db.get(key)["metrics"]
        db.query(workload_id=w.id())     # its measured, predicted and published results
    with ResultsDB("runs.db", readonly=True) as db:   # mode=ro: no journal switch, no CREATE
        db.query(status="ok")

One row per result. A result of a `Workload` (llmbench/point.py) is keyed by `w.key(source)`; its
`point` column holds `w.to_dict()` and its `workload_id` column `w.id()` (indexed), so the
measured, predicted and published results of one workload are joined by it. A result that is not
a workload's (ceilings, a streaming run: a plain dict point) is keyed by `point_key(point, source)`
and has no workload_id. `tag` tells apart results of one workload and source that differ in
something the Workload does not hold (a published row's id). An interrupted sweep resumes
(`db.has(key)`) and nothing is done twice. WAL mode and a busy timeout make several writer
processes safe; every write is one transaction, so a process killed mid-write (SIGKILL) leaves
either the whole row or none of it.

Schema versions (`PRAGMA user_version`): 0 and 1 have no workload_id column; opening such a file
for writing adds it (NULL for the old rows: their points predate the Workload) and stamps 2; a
read-only open reads it as it is.

The file is checked when it is opened (a directory, a missing parent, not SQLite, corrupt, another
program's tables, a newer schema: `PRAGMA user_version`), and every `sqlite3.Error` or `OSError`
inside the store becomes one `llmbench.errors.BadInput` line naming the file. The file is opened
through a quoted `file:` URI, so `a?b.db` is `a?b.db`, not `a`. docs/results.md has the guarantees.

The database path is the argument, else the environment variable LLMBENCH_DB, else
./llmbench-results.db.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import stat
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from llmbench.errors import BadInput

DEFAULT_DB = "llmbench-results.db"
ENV_VAR = "LLMBENCH_DB"
SOURCES = ("measured", "predicted", "published")
#: running: claimed by a sweep process (pid, host, start in environment["claim"]);
#: crashed: that process died without recording a result (llmbench.results.claims)
STATUSES = ("ok", "oom", "error", "skipped", "running", "crashed")
COLUMNS = ("key", "study", "suite", "source", "model", "hardware", "status", "error", "point",
           "metrics", "environment", "created_at", "workload_id")
_JSON_COLUMNS = ("point", "metrics", "environment")
#: PRAGMA user_version of the files this code writes. 0 (unstamped) and 1: the same layout without
#: the workload_id column, which a writable open adds (`_migrate`)
SCHEMA_VERSION = 2
#: columns a file of an older version may lack (added by the migration)
_ADDED_COLUMNS = {"workload_id": 2}

_SCHEMA = {
    "results": """CREATE {temp} TABLE IF NOT EXISTS results (
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
        created_at TEXT NOT NULL,
        workload_id TEXT)""",
    # a point may belong to several studies (the same measurement is shared, never redone)
    "study_points": """CREATE {temp} TABLE IF NOT EXISTS study_points (
        study TEXT NOT NULL,
        key TEXT NOT NULL,
        PRIMARY KEY (study, key))""",
}
_INDEXES = """
CREATE INDEX IF NOT EXISTS results_study ON results (study);
CREATE INDEX IF NOT EXISTS results_model_hw ON results (model, hardware);
CREATE INDEX IF NOT EXISTS results_workload ON results (workload_id);
"""
_TABLES = {"results": COLUMNS, "study_points": ("study", "key")}


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


def point_key(point, source: str = "measured", tag: str | None = None) -> str:
    """The key of a result: `point.key(source)` for a Workload (with `tag`: sha256 of that key and
    the tag), else sha256 hex of the canonical JSON of the dict `point` plus `source`."""
    if _is_workload(point):
        key = point.key(source)
        return key if tag is None else hashlib.sha256(f"{key}:{tag}".encode()).hexdigest()
    if not isinstance(point, dict):
        raise ValueError(f"a point is a Workload or a dict, got {type(point).__name__}")
    body = {"point": point, "source": source, **({"tag": tag} if tag is not None else {})}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def _is_workload(point) -> bool:
    """A llmbench.point.Workload (duck-typed: this module imports nothing of llmbench's above it)."""
    return hasattr(point, "key") and hasattr(point, "id") and hasattr(point, "to_dict")


def default_path(path: str | os.PathLike | None = None) -> Path:
    """The DB path: the argument, else $LLMBENCH_DB, else ./llmbench-results.db."""
    return Path(path or os.environ.get(ENV_VAR) or DEFAULT_DB)


def now() -> str:
    """UTC time, ISO 8601 with microseconds: sorts as text (the `created_at` column)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def explain(path, e: BaseException) -> str:
    """One line for an sqlite3/OS error met on the results database at `path`."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    hints = {"file is not a database": "is not an SQLite database (or is corrupt)",
             "malformed": "is corrupt or truncated (database disk image is malformed)",
             "readonly database": "is read-only here (it can be listed and reported, not written)",
             "database is locked": "is locked by another process (waited for the busy timeout)",
             "unable to open database file": "cannot be opened (permissions, or its -wal/-shm "
                                             "files cannot be created)"}
    for needle, text in hints.items():
        if needle in msg:
            return f"results database {path} {text}"
    if isinstance(e, OSError):
        return f"results database {path}: {e.strerror or msg}"
    return f"results database {path}: {msg}"


def _guarded(method):
    """sqlite3.Error and OSError inside the store -> one BadInput line naming the file."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.Error, OSError) as e:
            raise BadInput(explain(self.path, e)) from None
    return wrapper


def check_path(path: Path, readonly: bool) -> None:
    """The path errors SQLite reports badly ('unable to open database file'), said plainly."""
    if path.is_dir():
        raise BadInput(f"results database {path} is a directory, not a database file")
    if path.exists():
        if not stat.S_ISREG(path.stat().st_mode):
            raise BadInput(f"results database {path} is not a regular file")
        return
    if readonly:
        raise BadInput(f"no results database at {path} (run a study or measure first, or pass --db)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():  # created only when asked: a typo must not make a tree of folders
        raise BadInput(f"cannot create results database {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise BadInput(f"cannot create results database {path}: {parent} is not a directory")


def _connect(path: Path, readonly: bool, timeout_s: float) -> sqlite3.Connection:
    """A connection through a quoted file: URI (so '?' and '#' are part of the name)."""
    if str(path) == ":memory:":
        return sqlite3.connect(":memory:", isolation_level=None)
    uri = f"file:{quote(str(path.absolute()))}?mode={'ro' if readonly else 'rwc'}"
    con = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
    if not readonly:
        return con
    try:
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.OperationalError as e:
        if "unable to open" not in str(e):
            con.close()
            raise
    # A WAL file in a read-only directory without its -wal/-shm files (a clean close removes them):
    # SQLite cannot create them, so read it as immutable. Nobody can be writing it: no one else can
    # create the -wal file either.
    con.close()
    return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=timeout_s, isolation_level=None)


def connect(path: str | os.PathLike, *, readonly: bool = True,
            timeout_s: float = 60.0) -> sqlite3.Connection:
    """A plain sqlite3 connection to any user's SQLite file (no schema check), opened as
    ResultsDB opens it: path checks, quoted file: URI, read-only with the immutable fallback.
    Errors are one BadInput line naming the file. (calibrate --from reads foreign DBs this way.)"""
    path = Path(path)
    try:
        check_path(path, readonly)
        return _connect(path, readonly, timeout_s)
    except (sqlite3.Error, OSError) as e:
        raise BadInput(explain(path, e)) from None


def _tables(con: sqlite3.Connection) -> dict[str, set[str]]:
    names = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    return {n: {r[1] for r in con.execute(f"PRAGMA table_info({json.dumps(n)})")} for n in names}


def check_schema(path, con: sqlite3.Connection) -> tuple[int, set[str]]:
    """Raise BadInput unless the file is empty or holds llmbench's tables; returns its
    user_version and the llmbench tables it has."""
    version = con.execute("PRAGMA user_version").fetchone()[0]
    tables = _tables(con)
    if version > SCHEMA_VERSION:
        raise BadInput(f"results database {path} has schema version {version}, newer than this "
                       f"llmbench reads ({SCHEMA_VERSION}): upgrade llmbench")
    if tables and "results" not in tables:
        raise BadInput(f"{path} is an SQLite database but not an llmbench results database "
                       f"(its tables: {', '.join(sorted(tables)[:8])})")
    for name, cols in _TABLES.items():
        missing = set(cols) - tables.get(name, set(cols))
        if version < SCHEMA_VERSION:
            missing -= {c for c, v in _ADDED_COLUMNS.items() if v > version}
        if missing:
            raise BadInput(f"{path} is not an llmbench results database: its {name} table lacks "
                           f"column(s) {', '.join(sorted(missing))}")
    return version, set(tables) & set(_TABLES)


class ResultsDB:
    """The results table of one SQLite file. Use as a context manager or call `close()`.

    readonly=True opens with mode=ro: no journal-mode switch, no CREATE, no write; a read-only
    file or directory can be listed. A missing file is then an error, not a new database."""

    def __init__(self, path: str | os.PathLike | None = None, *, timeout_s: float = 60.0,
                 readonly: bool = False):
        self.path = default_path(path)
        self.readonly = readonly
        self.timeout_s = timeout_s
        self._con = None
        self._select = ", ".join(f"r.{c}" for c in COLUMNS)
        #: key -> why, for every row a query skipped because it no longer reads (bad JSON, a point
        #: that is not an object or no longer makes a Workload): readers name them, never fail
        self.skipped: dict[str, str] = {}
        self._open()

    @_guarded
    def _open(self) -> None:
        if str(self.path) != ":memory:":
            check_path(self.path, self.readonly)
        self._con = _connect(self.path, self.readonly, self.timeout_s)
        try:
            self._con.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
            version, present = check_schema(self.path, self._con)
            if self.readonly:
                # a fresh empty file: empty TEMP tables stand in, so queries answer "nothing"
                for name in set(_TABLES) - present:
                    self._con.execute(_SCHEMA[name].format(temp="TEMP"))
                have = _tables(self._con).get("results", set())
                self._select = ", ".join(f"r.{c}" if c in have else f"NULL AS {c}" for c in COLUMNS)
                return
            self._retry(lambda: self._con.execute("PRAGMA journal_mode = WAL"))
            # NORMAL is durable against a killed process in WAL mode (only a power cut loses the tail)
            self._con.execute("PRAGMA synchronous = NORMAL")
            if "results" in present:
                self._migrate()
            script = ";\n".join(_SCHEMA[n].format(temp="") for n in _TABLES) + ";" + _INDEXES
            self._retry(lambda: self._con.executescript(script))
            if version != SCHEMA_VERSION:
                self._retry(lambda: self._con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}"))
        except BaseException:
            self.close()
            raise

    def _migrate(self) -> None:
        """Add the columns of newer schema versions to an older file, in one write transaction
        (two processes opening an old file at once add each column once)."""
        con = self._con
        self._retry(lambda: con.execute("BEGIN IMMEDIATE"))
        try:
            have = _tables(con)["results"]
            for col in _ADDED_COLUMNS:
                if col not in have:
                    con.execute(f"ALTER TABLE results ADD COLUMN {col} TEXT")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def _retry(self, fn, timeout_s: float | None = None):
        """Run fn, retrying while another process holds the lock (schema/WAL set-up races)."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
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
    @_guarded
    def journal_mode(self) -> str:
        return self._con.execute("PRAGMA journal_mode").fetchone()[0]

    @property
    @_guarded
    def schema_version(self) -> int:
        return self._con.execute("PRAGMA user_version").fetchone()[0]

    # ------------------------------------------------------------ writing
    def _writable(self) -> None:
        if self.readonly:
            raise BadInput(f"results database {self.path} was opened read-only; nothing is written")

    @contextmanager
    def transaction(self):
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception: what is read inside is not
        changed by another writer before the commit (the claims of llmbench.results.claims)."""
        self._writable()
        con = self._con
        try:
            self._retry(lambda: con.execute("BEGIN IMMEDIATE"))
        except (sqlite3.Error, OSError) as e:
            raise BadInput(explain(self.path, e)) from None
        try:
            yield self
            con.execute("COMMIT")
        except BaseException as e:
            if con.in_transaction:
                con.execute("ROLLBACK")
            if isinstance(e, (sqlite3.Error, OSError)):
                raise BadInput(explain(self.path, e)) from None
            raise

    def record(self, point, *, source: str = "measured", status: str = "ok",
               metrics: dict | None = None, environment: dict | None = None,
               error: str | None = None, study: str | None = None, tag: str | None = None) -> str:
        """Insert or replace the result of `point` (a Workload, or a plain dict for what is not a
        workload's result) in one transaction; returns its key."""
        row = make_row(point, source=source, status=status, metrics=metrics,
                       environment=environment, error=error, study=study, tag=tag)
        with self.transaction():
            self.put_row(row)
        return row["key"]

    def put_row(self, row: dict) -> None:
        """Write one decoded row as it is (inside `transaction()`); links its study."""
        self._writable()
        values = [canonical_json(row[c] or {}) if c in _JSON_COLUMNS else row.get(c) for c in COLUMNS]
        self._con.execute(f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) "
                          f"VALUES ({', '.join('?' * len(COLUMNS))})", values)
        if row.get("study"):
            self._con.execute("INSERT OR IGNORE INTO study_points (study, key) VALUES (?, ?)",
                              (row["study"], row["key"]))

    @_guarded
    def link(self, study: str, key: str) -> None:
        """Mark an already recorded point as part of `study` too (shared measurements)."""
        self._writable()
        self._con.execute("INSERT OR IGNORE INTO study_points (study, key) VALUES (?, ?)",
                          (study, key))

    def remove_row(self, key: str) -> bool:
        """Delete one row and its study links (inside `transaction()`); True if it existed."""
        self._writable()
        n = self._con.execute("DELETE FROM results WHERE key = ?", (key,)).rowcount
        self._con.execute("DELETE FROM study_points WHERE key = ?", (key,))
        return n > 0

    def delete(self, key: str) -> bool:
        """Remove one result (e.g. to redo it); True if it existed."""
        with self.transaction():
            return self.remove_row(key)

    # ------------------------------------------------------------ reading
    @_guarded
    def has(self, key: str) -> bool:
        return self._con.execute("SELECT 1 FROM results WHERE key = ?", (key,)).fetchone() is not None

    @_guarded
    def get(self, key: str) -> dict | None:
        """The decoded row of `key`, or None if it was never recorded."""
        cur = self._con.execute(f"SELECT {self._select} FROM results r WHERE r.key = ?", (key,))
        row = cur.fetchone()
        return self._decode(row) if row else None

    @_guarded
    def query(self, study: str | None = None, source: str | None = None, suite: str | None = None,
              model: str | None = None, hardware: str | None = None,
              status: str | None = None, workload_id: str | None = None,
              workload_of: str | None = None) -> list[dict]:
        """Rows matching every given filter (None = any), oldest first, JSON fields decoded.

        `study` matches the points linked to that study (a shared point belongs to each study
        that recorded it), not only the study that wrote the row last. `workload_id` gives the
        measured, predicted and published results of one Workload (`w.id()`); `workload_of` (a
        result's key, or a prefix of one as `results list` prints it) every engine's results of
        that result's workload in any execution mode (same_run)."""
        if workload_of is None:
            return self._query(study, source, suite, model, hardware, status, workload_id)
        ref = self.workload_row(workload_of)
        # the indexed columns narrow the scan; a filter given too still applies (AND)
        suite, model, hardware = (ref[k] if v is None else v for k, v in
                                  (("suite", suite), ("model", model), ("hardware", hardware)))
        rows = self._query(study, source, suite, model, hardware, status, workload_id)
        return [r for r in rows if r.get("workload_id") and same_run(r["point"], ref["point"])]

    def _query(self, study, source, suite, model, hardware, status, workload_id) -> list[dict]:
        where, args = [], []
        if workload_id is not None and "NULL AS workload_id" in self._select:
            return []  # an old file read as it is: no row has a workload id
        for col, val in (("source", source), ("suite", suite), ("model", model),
                         ("hardware", hardware), ("status", status), ("workload_id", workload_id)):
            if val is not None:
                where.append(f"r.{col} = ?")
                args.append(val)
        if study is not None:
            where.append("(r.study = ? OR r.key IN (SELECT key FROM study_points WHERE study = ?))")
            args += [study, study]
        sql = f"SELECT {self._select} FROM results r"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY r.created_at, r.key"
        rows = []
        for r in self._con.execute(sql, args).fetchall():
            try:
                rows.append(_readable(self._decode(r)))
            except BadInput as e:
                self.skipped[str(r[0])] = str(e)
        return rows

    def workload_row(self, key: str) -> dict:
        """The row of result `key` (or a prefix of it), which must be a Workload's; BadInput if not."""
        ref = self.get(self.resolve_key(key))
        if not ref.get("workload_id"):
            raise BadInput(f"result {ref['key'][:10]} is not a workload's result (its point: "
                           f"{canonical_json(ref['point'])[:80]}): give a measured or predicted run's key")
        return ref

    @_guarded
    def resolve_key(self, key: str) -> str:
        """The full key of the one result whose key starts with `key`; BadInput (one line) if none
        or several do."""
        if not key or any(c not in "0123456789abcdef" for c in key):
            raise BadInput(f"result key {key!r}: a (prefix of a) hex key as `llmbench results list` prints it")
        hits = [r[0] for r in self._con.execute(
            "SELECT key FROM results WHERE key >= ? AND key < ? LIMIT 2", (key, key + "g")).fetchall()]
        if len(hits) != 1:
            raise BadInput(f"result key {key!r} matches {'no result' if not hits else 'several results'} "
                           f"in {self.path}" + ("; give more of it" if hits else ""))
        return hits[0]

    @_guarded
    def studies(self) -> dict[str, int]:
        """Study name -> number of linked points."""
        cur = self._con.execute("SELECT study, COUNT(*) FROM study_points GROUP BY study ORDER BY study")
        return dict(cur.fetchall())

    @_guarded
    def studies_of(self, key: str) -> list[str]:
        """The studies a recorded point belongs to (the one that wrote it, and every link)."""
        cur = self._con.execute("SELECT study FROM results WHERE key = ? AND study IS NOT NULL "
                                "UNION SELECT study FROM study_points WHERE key = ?", (key, key))
        return sorted(r[0] for r in cur.fetchall())

    @_guarded
    def count(self) -> int:
        return self._con.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    @_guarded
    def integrity_check(self) -> str:
        return self._con.execute("PRAGMA integrity_check").fetchone()[0]

    def _decode(self, row) -> dict:
        d = dict(zip(COLUMNS, row))
        for col in _JSON_COLUMNS:
            try:
                d[col] = json.loads(d[col]) if d[col] else {}
            except (TypeError, ValueError):
                raise BadInput(f"results database {self.path}: row {str(d['key'])[:12]} holds "
                               f"invalid JSON in column {col}") from None
            if not isinstance(d[col], dict):
                raise BadInput(f"results database {self.path}: row {str(d['key'])[:12]} holds a JSON "
                               f"{type(d[col]).__name__} in column {col}, not an object")
        return d

    def skipped_line(self) -> str | None:
        """One line naming the rows the queries so far skipped (None if none): for a reader's stderr."""
        if not self.skipped:
            return None
        key, why = next(iter(self.skipped.items()))
        more = f" and {len(self.skipped) - 1} more" if len(self.skipped) > 1 else ""
        return (f"warning: {self.path}: skipped {len(self.skipped)} row(s) that no longer validate "
                f"(row {key[:12]}: {why}{more})")


#: layout knobs that say how a workload runs, not what runs: measure and the resident stream
#: trainer run it resident, the streaming engine weight_streaming, the pipeline sram_pipeline (and
#: the offload that goes with each); results that differ only in these are one workload's runs
EXECUTION_KNOBS = ("mode", "offload")


def same_run(a: dict, b: dict) -> bool:
    """Whether two Workload points (`to_dict()`) are one workload run by different engines: equal
    but for the layout's EXECUTION_KNOBS, and ep 1 the same as ep unset (no expert parallelism:
    the planner writes ep 1 for a dense model, measure leaves it out)."""
    def strip(p: dict) -> dict:
        lay = {k: v for k, v in (p.get("layout") or {}).items()
               if k not in EXECUTION_KNOBS and not (k == "ep" and v in (None, 1))}
        return {**p, "layout": lay}

    return canonical_json(strip(a)) == canonical_json(strip(b))


def _readable(d: dict) -> dict:
    """`d` if its point still makes a Workload (rows with a workload_id); else BadInput naming why."""
    if d.get("workload_id"):
        from llmbench.point import Workload
        try:
            Workload.from_dict(d["point"])
        except (BadInput, TypeError, ValueError) as e:
            raise BadInput(f"point no longer validates: {e}") from None
    return d


def open_readonly(path: str | os.PathLike | None = None, *, missing_ok: bool = False) -> ResultsDB:
    """ResultsDB(path, readonly=True); with missing_ok an absent file reads as an empty store (an
    in-memory one: e.g. `study show` planning against a DB not made yet)."""
    p = default_path(path)
    if missing_ok and not p.exists() and not p.is_symlink():
        return ResultsDB(":memory:")
    return ResultsDB(p, readonly=True)


def make_row(point, *, source: str = "measured", status: str = "ok",
             metrics: dict | None = None, environment: dict | None = None,
             error: str | None = None, study: str | None = None, tag: str | None = None,
             created_at: str | None = None) -> dict:
    """One decoded results row (what `get` returns), checked; `record` writes it. `point` is a
    Workload (point column = its to_dict(), workload_id = its id()) or a plain dict."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    key = point_key(point, source, tag)
    workload_id = point.id() if _is_workload(point) else None
    point = point.to_dict() if workload_id else point
    return {"key": key, "study": study,
            "suite": _str_or_none(point.get("suite")), "source": source,
            "model": _str_or_none(point.get("model")),
            "hardware": _str_or_none(point.get("hardware")), "status": status, "error": error,
            "point": point, "metrics": metrics or {}, "environment": environment or {},
            "created_at": created_at or now(), "workload_id": workload_id}


def _str_or_none(x) -> str | None:
    return None if x is None else str(x)
