"""`llmbench report`: the tables, figures and report.html from what a results database holds.

    llmbench report [--db PATH] [--out DIR] [--json]

(`llmbench reproduce`, which fills the database and then calls this, is studies/cli.py.)
Imports nothing heavy at import time: matplotlib loads inside the command. The measured runs the
database holds no prediction for are predicted in memory by the function the front end passes to
`register` (studies.predict.predict_missing; report/ itself imports no engine and no studies/).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

from llmbench._cliutil import add_db, emit_json

def register(cli, predict_missing=None) -> None:
    """predict_missing: (readonly ResultsDB) -> prediction rows not written (None: none)."""
    p = cli.command("report", report_cmd)
    p.set_defaults(predict_missing=predict_missing)
    add_db(p)
    p.add_argument("--out", type=Path, default=Path("out"), help="output directory for report.html and img/")
    p.add_argument("--json", action="store_true", help="JSON summary (report path, row counts, images)")
    p.add_argument("--price", action="append", default=[], metavar="HW=USD",
                   help="price per device-hour for the energy/cost view, overriding the catalog's "
                        "(repeatable), e.g. --price cs3=60")
    p.add_argument("--no-predict", action="store_true",
                   help="do not predict the measured runs that have no prediction in the database yet "
                        "(by default they are predicted in memory; the database is not written)")


def parse_prices(items: list[str]) -> dict[str, float]:
    """--price HW=USD (repeatable) -> {hw: USD per device-hour}; the hardware must be in the catalog."""
    from llmbench.errors import BadInput
    from llmbench.hardware import catalog

    out = {}
    for item in items:
        hw, _, usd = item.partition("=")
        try:
            price = float(usd)
        except ValueError:
            price = -1.0
        if not hw or not 0 < price < math.inf:
            raise BadInput(f"--price {item!r}: expected HW=USD with a positive price, e.g. --price cs3=60")
        if hw not in catalog():
            raise BadInput(f"--price {item!r}: no hardware {hw!r} in the catalog (llmbench hardware list)")
        out[hw] = price
    return out


def _log(json_out: bool):
    return (lambda m: print(m, file=sys.stderr)) if json_out else print


def _user_report(rdb, out, meta: dict, log) -> dict | None:
    """The page of a database of one's own work (report/user.py): exactly its rows, nothing predicted
    for it here; None when the database holds a study's rows (the full page)."""
    from llmbench.report.rows import Data
    from llmbench.report.user import build_user_report, is_user_db

    data = Data.from_db(rdb)
    if not is_user_db(data):
        return None
    return build_user_report(data, out, meta=meta, log=log)


def report_cmd(a) -> None:
    """Build the report (tables, plots, report.html) from whatever the database holds."""
    from llmbench.report.html import report
    from llmbench.results.store import default_path, open_readonly

    path = default_path(a.db)
    if not path.exists():
        raise ValueError(f"no results database at {path}; run 'llmbench reproduce' or pass --db")
    if a.out.exists() and not a.out.is_dir():
        raise ValueError(f"--out {a.out} is a file: the report is a folder (report.html and img/); "
                         "name a folder")
    kw = {}
    if a.json:
        from llmbench._cliutil import console
        kw["console"] = console(stderr=True)
    prices = parse_prices(a.price)
    with open_readonly(path) as rdb:
        meta = {"db": str(path), "command": "llmbench report", "prices": prices}
        summary = _user_report(rdb, a.out, meta, _log(a.json))
        if summary is None:
            fn = getattr(a, "predict_missing", None)
            extra = fn(rdb) if fn and not a.no_predict else []
            summary = report(rdb, a.out, meta=meta, log=_log(a.json), extra_rows=extra, **kw)
        skipped = rdb.skipped_line()
    if skipped:  # rows that no longer read are left out of the report, and named
        print(skipped, file=sys.stderr)
    summary["db"] = str(path)
    summary["skipped_rows"] = len(rdb.skipped)
    if a.json:
        emit_json(summary)
