"""`llmbench report`: the tables, figures and report.html from what a results database holds.

    llmbench report [--db PATH] [--out DIR] [--json]

(`llmbench reproduce`, which fills the database and then calls this, is studies/cli.py.)
Imports nothing heavy at import time: matplotlib loads inside the command.
"""
from __future__ import annotations

import sys
from pathlib import Path

from llmbench._cliutil import add_db, emit_json


def register(cli) -> None:
    p = cli.command("report", report_cmd)
    add_db(p)
    p.add_argument("--out", type=Path, default=Path("out"), help="output directory for report.html and img/")
    p.add_argument("--json", action="store_true", help="JSON summary (report path, row counts, images)")


def _log(json_out: bool):
    return (lambda m: print(m, file=sys.stderr)) if json_out else print


def report_cmd(a) -> None:
    """Build the report (tables, plots, report.html) from whatever the database holds."""
    from llmbench.report.html import report
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
