"""`llmbench results ...`: list, export and load the published reference values.

    llmbench results list [--db PATH] [--study S] [--source measured] [--json]
    llmbench results export --format csv|json|parquet [-o FILE] [--db PATH] [filters]
    llmbench results load-published [--db PATH] [--json]

No torch, nothing heavy at import time.
"""
from __future__ import annotations

from pathlib import Path

import typer

from llmbench._cliutil import console

DB_HELP = "results database (default: $LLMBENCH_DB, else ./llmbench-results.db)"


# metrics shown in the table, first present wins
_HEADLINE = ("latency_s_p50", "tokens_per_s", "samples_per_s", "fwd_bwd_tflops", "achieved_tflops",
             "step_time_s", "fwd_bwd_time_s", "latency_s")


def _open_existing(db: str | None):
    from llmbench.results.store import ResultsDB, default_path

    path = default_path(db)
    if not Path(path).exists():
        raise ValueError(f"no results database at {path} (run `llmbench study run NAME` or pass --db)")
    return ResultsDB(path)


def _filters(study, source, suite, model, hardware, status) -> dict:
    return {"study": study, "source": source, "suite": suite, "model": model,
            "hardware": hardware, "status": status}


def headline(metrics: dict) -> str:
    """The one or two figures that say most: a rate or time, then the fraction of a ceiling."""
    out = []
    for name in _HEADLINE:
        v = metrics.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(f"{name}={v:.4g}")
            break
    for name in ("frac_of_ceiling", "mfu", "scaling_efficiency"):
        v = metrics.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(f"{name}={v:.3g}")
            break
    if not out:
        for name, v in metrics.items():
            return f"{name}={v:.4g}" if isinstance(v, float) else f"{name}={v}"
    return " ".join(out)


def point_summary(point: dict) -> str:
    skip = {"suite", "model", "hardware", "published_id"}

    def fmt(v):
        return ",".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else str(v)

    return " ".join(f"{k}={fmt(v)}" for k, v in point.items() if k not in skip and v is not None)


def print_table(rows: list[dict], title: str) -> None:
    from rich.table import Table

    t = Table(title=title)
    for col in ("key", "study", "source", "suite", "model", "hardware", "point", "status", "headline"):
        t.add_column(col, overflow="fold")
    for r in rows:
        status = r["status"] if not r["error"] else f"{r['status']}: {r['error']}"
        t.add_row(r["key"][:10], r["study"] or "-", r["source"], r["suite"] or "-", r["model"] or "-",
                  r["hardware"] or "-", point_summary(r["point"]), status, headline(r["metrics"]))
    console().print(t)


def register(app: typer.Typer) -> None:
    results_app = typer.Typer(help="Results store (SQLite): list, export, load published values.",
                              no_args_is_help=True)
    app.add_typer(results_app, name="results")

    @results_app.command("list")
    def results_list(
        db: str = typer.Option(None, "--db", help=DB_HELP),
        study: str = typer.Option(None, "--study", help="only points of this study"),
        source: str = typer.Option(None, "--source", help="measured | predicted | published"),
        suite: str = typer.Option(None, "--suite"),
        model: str = typer.Option(None, "--model"),
        hardware: str = typer.Option(None, "--hardware"),
        status: str = typer.Option(None, "--status", help="ok | oom | error | skipped"),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
    ) -> None:
        """List stored results (one row per point)."""
        with _open_existing(db) as store:
            rows = store.query(**_filters(study, source, suite, model, hardware, status))
            path = str(store.path)
        if json_out:
            from llmbench.cli import emit_json

            return emit_json(rows)
        print_table(rows, f"{len(rows)} results in {path}")

    @results_app.command("export")
    def results_export(
        fmt: str = typer.Option("csv", "--format", "-f", help="csv | json | parquet"),
        output: str = typer.Option(None, "--output", "-o", help="file (default: stdout; parquet needs one)"),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        study: str = typer.Option(None, "--study"),
        source: str = typer.Option(None, "--source"),
        suite: str = typer.Option(None, "--suite"),
        model: str = typer.Option(None, "--model"),
        hardware: str = typer.Option(None, "--hardware"),
        status: str = typer.Option(None, "--status"),
        json_out: bool = typer.Option(False, "--json", help="print a JSON summary of the export"),
    ) -> None:
        """Export results as CSV (metrics flattened to columns), JSON or Parquet."""
        from llmbench.results.export import FORMATS, export

        if fmt not in FORMATS:
            raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
        with _open_existing(db) as store:
            rows = store.query(**_filters(study, source, suite, model, hardware, status))
        text = export(rows, fmt, output)
        if json_out:
            from llmbench.cli import emit_json

            return emit_json({"format": fmt, "rows": len(rows), "output": output})
        if text is not None:
            typer.echo(text, nl=False)
        else:
            typer.echo(f"wrote {len(rows)} results to {output}", err=True)

    @results_app.command("load-published")
    def results_load_published(
        db: str = typer.Option(None, "--db", help=DB_HELP),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
    ) -> None:
        """Record llmbench/reference/published.csv as source=published results (idempotent)."""
        from llmbench.results.published import record_published
        from llmbench.results.store import ResultsDB

        with ResultsDB(db) as store:
            keys = record_published(store)
            path = str(store.path)
        if json_out:
            from llmbench.cli import emit_json

            return emit_json({"db": path, "recorded": len(keys), "keys": keys})
        typer.echo(f"recorded {len(keys)} published values in {path}")
