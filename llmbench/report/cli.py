"""`llmbench reproduce` and `llmbench report` (registered into the main typer app).

    llmbench reproduce --quick --out out/ [--db PATH]
    llmbench report [--db PATH] [--out DIR]

Imports nothing heavy at import time: matplotlib, torch and the engines load inside the commands.
"""
from __future__ import annotations

from pathlib import Path

import typer

DB_HELP = "results database (default $LLMBENCH_DB or ./llmbench-results.db)"


def register(app: typer.Typer) -> None:
    app.command("reproduce")(reproduce_cmd)
    app.command("report")(report_cmd)


def reproduce_cmd(
    quick: bool = typer.Option(True, "--quick/--full",
                               help="--quick (default): shrunk studies under time budgets, "
                                    "< 10 min on 2 CPU cores"),
    out: Path = typer.Option(Path("out"), "--out", help="output directory for report.html and img/"),
    db: Path = typer.Option(None, "--db", help=DB_HELP),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="run the measured studies here"),
    json_out: bool = typer.Option(False, "--json", help="JSON summary (timings, counts, report path)"),
) -> None:
    """Measure here, predict every catalog accelerator, compare with published, write the report."""
    from llmbench.report.reproduce import reproduce

    log = (lambda m: typer.echo(m, err=True)) if json_out else typer.echo
    console = None
    if json_out:  # stdout carries only the JSON; tables and progress go to stderr
        from rich.console import Console

        console = Console(stderr=True)
    summary = reproduce(quick=quick, out_dir=out, db_path=db, measure=measure, log=log, console=console)
    if json_out:
        from llmbench.cli import emit_json

        emit_json(summary)


def report_cmd(
    db: Path = typer.Option(None, "--db", help=DB_HELP),
    out: Path = typer.Option(Path("out"), "--out", help="output directory for report.html and img/"),
    json_out: bool = typer.Option(False, "--json", help="JSON summary (report path, row counts, images)"),
) -> None:
    """Build the report (tables, plots, report.html) from whatever the database holds."""
    from llmbench.report.reproduce import report
    from llmbench.results.store import ResultsDB, default_path

    path = default_path(db)
    if not path.exists():
        raise ValueError(f"no results database at {path}; run 'llmbench reproduce' or pass --db")
    log = (lambda m: typer.echo(m, err=True)) if json_out else typer.echo
    with ResultsDB(path) as rdb:
        if json_out:
            from rich.console import Console

            summary = report(rdb, out, meta={"db": str(path), "command": "llmbench report"}, log=log,
                             console=Console(stderr=True))
        else:
            summary = report(rdb, out, meta={"db": str(path), "command": "llmbench report"}, log=log)
    summary["db"] = str(path)
    if json_out:
        from llmbench.cli import emit_json

        emit_json(summary)
