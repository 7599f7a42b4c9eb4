"""`llmbench results ...`: list, export and load the published reference values.

    llmbench results list [--db PATH] [--study S] [--source measured] [--workload-of KEY] [--json]
    llmbench results export --format csv|json|parquet [-o FILE] [--db PATH] [filters]
    llmbench results load-published [--db PATH] [--json]

No torch, nothing heavy at import time.
"""
from __future__ import annotations

from pathlib import Path

from llmbench._cliutil import add_db, add_json, emit_json, headline, table

FILTERS = ("study", "source", "suite", "model", "hardware", "status", "workload_id", "workload_of")


def _open_existing(db: str | None):
    """The results DB, read-only (a read-only file or folder can be listed and exported)."""
    from llmbench.results.store import default_path, open_readonly

    path = default_path(db)
    if not Path(path).exists():
        raise ValueError(f"no results database at {path} (run `llmbench study run NAME` or pass --db)")
    return open_readonly(path)


def _filters(a) -> dict:
    return {k: getattr(a, k) for k in FILTERS}


def _add_filters(p) -> None:
    p.add_argument("--study", help="only points of this study")
    p.add_argument("--source", choices=("measured", "predicted", "published"))
    p.add_argument("--suite")
    p.add_argument("--model")
    p.add_argument("--hardware")
    p.add_argument("--status", help="ok | oom | error | skipped | running | crashed")
    p.add_argument("--workload-id", help="the measured, predicted and published results of one "
                   "workload (its id: sha256 of llmbench.point.Workload.to_dict())")
    p.add_argument("--workload-of", metavar="KEY", help="every engine's results of the workload of "
                   "result KEY (a key or its first characters, as listed): measure, predict and stream "
                   "runs of it, in any execution mode (resident, weight_streaming, sram_pipeline)")


def point_summary(point: dict) -> str:
    """The point's fields but suite, model and hardware (their own columns); a Workload's layout
    knobs flat, fields left at their empty value (None, {}, 0 sparsity or gen_len) left out."""
    skip = {"suite", "model", "hardware", "published_id"}
    flat = {**point, **(point.get("layout") or {})} if isinstance(point.get("layout"), dict) else point

    def fmt(v):
        return ",".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else str(v)

    return " ".join(f"{k}={fmt(v)}" for k, v in flat.items()
                    if k not in skip and k != "layout" and v not in (None, {}) and
                    not (k in ("sparsity", "gen_len") and v == 0))


def print_table(rows: list[dict], title: str) -> None:
    out = []
    for r in rows:
        status = r["status"] if not r["error"] else f"{r['status']}: {r['error']}"
        out.append((r["key"][:10], r["study"] or "-", r["source"], r["suite"] or "-", r["model"] or "-",
                    r["hardware"] or "-", point_summary(r["point"]), status, headline(r["metrics"])))
    table(title, ("key", "study", "source", "suite", "model", "hardware", "point", "status", "headline"), out)


def register(cli) -> None:
    g = cli.group("results", "Results store (SQLite): list, export, load published values.")
    p = g.command("list", results_list)
    add_db(p)
    _add_filters(p)
    add_json(p)
    p = g.command("export", results_export)
    p.add_argument("--format", "-f", dest="fmt", default="csv", choices=("csv", "json", "parquet"),
                   help="csv | json | parquet (default csv)")
    p.add_argument("--output", "-o", help="file (default: stdout; parquet needs one)")
    add_db(p)
    _add_filters(p)
    p.add_argument("--json", action="store_true", help="print a JSON summary of the export")
    p = g.command("load-published", results_load_published)
    add_db(p)
    add_json(p)
    p = g.command("import", results_import)
    p.add_argument("file", help="a result saved to a side file when the DB could not be written")
    add_db(p)
    add_json(p)


def results_import(a) -> None:
    """Record a result that was saved to a side file (the DB was unusable when it was measured)."""
    from llmbench.results.safe import load_saved

    key = load_saved(a.db, a.file)
    if a.json:
        return emit_json({"key": key, "file": a.file})
    print(f"recorded {a.file} as {key[:10]}")


def _warn_skipped(store) -> None:
    """Rows that no longer read are skipped by the store; say so on stderr (one line)."""
    import sys

    line = store.skipped_line()
    if line:
        print(line, file=sys.stderr)


def results_list(a) -> None:
    """List stored results (one row per point)."""
    with _open_existing(a.db) as store:
        rows = store.query(**_filters(a))
        path = str(store.path)
        _warn_skipped(store)
    if a.json:
        return emit_json(rows)
    print_table(rows, f"{len(rows)} results in {path}")


def results_export(a) -> None:
    """Export results as CSV (metrics flattened to columns), JSON or Parquet."""
    import sys

    from llmbench.results.export import export
    from llmbench.results.safe import check_not_db

    check_not_db(a.output, a.db, "--output")
    with _open_existing(a.db) as store:
        rows = store.query(**_filters(a))
        _warn_skipped(store)
    text = export(rows, a.fmt, a.output)
    if a.json:
        return emit_json({"format": a.fmt, "rows": len(rows), "output": a.output})
    if text is not None:
        sys.stdout.write(text)
    else:
        print(f"wrote {len(rows)} results to {a.output}", file=sys.stderr)


def results_load_published(a) -> None:
    """Record llmbench/reference/published.csv as source=published results (idempotent)."""
    from llmbench.results.published import record_published
    from llmbench.results.store import ResultsDB

    with ResultsDB(a.db) as store:
        keys = record_published(store)
        path = str(store.path)
    if a.json:
        return emit_json({"db": path, "recorded": len(keys), "keys": keys})
    print(f"recorded {len(keys)} published values in {path}")
