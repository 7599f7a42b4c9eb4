"""Reading results rows (dicts from `ResultsDB.query`) tolerantly: any field may be missing.

The report is built from whatever the database holds, so every accessor returns None rather than
raising, and the figures and tables show "not measured / not available" for what is absent.
"""
from __future__ import annotations

from collections import defaultdict

# names other areas may use for the same quantity; the first is ours
SYNONYMS = {
    "seq": ("seq", "seq_len", "seq_length", "prompt_len"),
    "batch": ("batch", "batch_size", "global_batch"),
    "devices": ("devices", "nproc", "world_size", "n_devices"),
    "grad_accum": ("grad_accum", "gas", "grad_accumulation"),
    "sparsity": ("sparsity",),
    "precision": ("precision", "dtype"),
}


def field(row: dict, name: str, default=None):
    """A point field (or a metric of that name), trying the known synonyms."""
    for key in SYNONYMS.get(name, (name,)):
        for part in (row.get("point") or {}, row.get("metrics") or {}):
            if part.get(key) is not None:
                return part[key]
        if row.get(key) is not None and key not in ("point", "metrics"):
            return row[key]
    return default


def metric(row: dict, *names: str):
    """The first of `names` found in the row's metrics as a finite number, else None."""
    m = row.get("metrics") or {}
    for n in names:
        v = m.get(n)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and v == v and abs(v) != float("inf"):
            return float(v)
    return None


def ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("status", "ok") == "ok"]


def by(rows: list[dict], *keys: str) -> dict:
    """Group rows by a tuple of fields (a single key groups by its value)."""
    out = defaultdict(list)
    for r in rows:
        k = tuple(field(r, key) if key not in ("hardware", "model", "source", "study", "suite")
                  else r.get(key) for key in keys)
        out[k[0] if len(keys) == 1 else k].append(r)
    return dict(out)


def select(rows: list[dict], **want) -> list[dict]:
    """Rows whose fields equal every given value (top-level columns or point fields)."""
    out = []
    for r in rows:
        for k, v in want.items():
            have = r.get(k) if k in ("hardware", "model", "source", "study", "suite", "status") \
                else field(r, k)
            if have != v:
                break
        else:
            out.append(r)
    return out


def xy(rows: list[dict], x: str, *ys: str) -> tuple[list, list]:
    """Sorted (x, y) pairs of the rows that have both."""
    pts = []
    for r in rows:
        xv, yv = field(r, x), metric(r, *ys)
        if xv is not None and yv is not None:
            pts.append((xv, yv))
    pts.sort()
    return [p[0] for p in pts], [p[1] for p in pts]


def is_mirror(row: dict) -> bool:
    """A prediction of a measured point (drawn next to the measurement, not with the catalog)."""
    return (row.get("point") or {}).get("mirrors") == "measured"


def command_of(row: dict) -> str | None:
    env = row.get("environment") or {}
    return env.get("command") or env.get("argv") or env.get("command_line")


def reference_of(row: dict) -> str | None:
    env = row.get("environment") or {}
    return env.get("reference") or env.get("source")


class Data:
    """All rows of a report, indexed by study (a point linked to several studies is in each)."""

    def __init__(self, rows_by_study: dict[str, list[dict]], all_rows: list[dict]):
        self.by_study = rows_by_study
        self.all = all_rows

    @classmethod
    def from_db(cls, db, studies: tuple[str, ...]) -> "Data":
        by_study = {s: db.query(study=s) for s in studies}
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

    def get(self, study: str | None = None, source: str | None = None, *, status: str | None = "ok",
            **want) -> list[dict]:
        rows = self.all if study is None else self.by_study.get(study, [])
        if source is not None:
            rows = [r for r in rows if r.get("source") == source]
        if status is not None:
            rows = [r for r in rows if r.get("status", "ok") == status]
        return select(rows, **want) if want else rows

    def predicted(self, study: str, *, mirrors: bool = False, **want) -> list[dict]:
        """Predicted rows of a study: the catalog sweep, or (mirrors=True) the predictions of the
        measured points."""
        return [r for r in self.get(study, "predicted", **want) if is_mirror(r) == mirrors]

    def published(self, **want) -> list[dict]:
        return self.get(None, "published", **want)
