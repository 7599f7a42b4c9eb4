"""`llmbench reproduce` and `llmbench report`.

    llmbench reproduce --quick --out out/ [--db PATH]
    llmbench report [--db PATH] [--out DIR]

Imports nothing heavy at import time: matplotlib, torch and the engines load inside the commands.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llmbench._cliutil import add_db, emit_json


def register(cli) -> None:
    p = cli.command("reproduce", reproduce_cmd)
    p.add_argument("--quick", action=argparse.BooleanOptionalAction, default=True,
                   help="--quick (default): shrunk studies under time budgets, < 10 min on 2 CPU cores; "
                        "--no-quick (or --full): the full studies")
    p.add_argument("--full", dest="quick", action="store_false", help="the full studies (= --no-quick)")
    p.add_argument("--out", type=Path, default=Path("out"), help="output directory for report.html and img/")
    add_db(p)
    p.add_argument("--measure", action=argparse.BooleanOptionalAction, default=True,
                   help="run the measured studies here (default)")
    p.add_argument("--json", action="store_true", help="JSON summary (timings, counts, report path)")
    p = cli.command("report", report_cmd)
    add_db(p)
    p.add_argument("--out", type=Path, default=Path("out"), help="output directory for report.html and img/")
    p.add_argument("--json", action="store_true", help="JSON summary (report path, row counts, images)")


def _log(json_out: bool):
    return (lambda m: print(m, file=sys.stderr)) if json_out else print


def reproduce_cmd(a) -> None:
    """Measure here, predict every catalog accelerator, compare with published, write the report."""
    from llmbench.report.reproduce import reproduce

    console = None
    if a.json:  # stdout carries only the JSON; tables and progress go to stderr
        from llmbench._cliutil import console as make_console
        console = make_console(stderr=True)
    summary = reproduce(quick=a.quick, out_dir=a.out, db_path=a.db, measure=a.measure,
                        log=_log(a.json), console=console)
    if a.json:
        emit_json(summary)


def report_cmd(a) -> None:
    """Build the report (tables, plots, report.html) from whatever the database holds."""
    from llmbench.report.reproduce import report
    from llmbench.results.store import default_path, open_readonly

    path = default_path(a.db)
    if not path.exists():
        raise ValueError(f"no results database at {path}; run 'llmbench reproduce' or pass --db")
    kw = {}
    if a.json:
        from llmbench._cliutil import console
        kw["console"] = console(stderr=True)
    with open_readonly(path) as rdb:
        summary = report(rdb, a.out, meta={"db": str(path), "command": "llmbench report"}, log=_log(a.json), **kw)
    summary["db"] = str(path)
    if a.json:
        emit_json(summary)
