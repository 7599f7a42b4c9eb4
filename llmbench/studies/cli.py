"""`llmbench study ...` and `llmbench reproduce`: every plan of work (studies/).

    llmbench study list [--json]
    llmbench study show NAME [--quick] [--device D] [--db PATH] [--json]
    llmbench study run NAME [--quick] [--device D] [--db PATH] [--force] [--redo] [--json]
    llmbench study predict NAME [--hardware a100-40gb,cs2] [--db PATH] [--json]
    llmbench reproduce --quick --out out/ [--db PATH] [--no-measure] [--json]

No torch at import time (the suites import it when a point runs).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llmbench._cliutil import add_db, add_device, add_json, emit_json, headline, table

RETRY_HELP = "measure again points recorded as crashed (their process died while measuring)"


def study_rows() -> list[dict]:
    from llmbench.studies.spec import studies

    rows = []
    for s in studies().values():
        rows.append({"name": s.name, "title": s.title, "suite": s.suite, "source": s.source,
                     "points": len(s.points()), "quick_points": len(s.points(quick=True)),
                     "predictions": len(s.predict_points()),
                     "published": list(s.published), "quick_shrink": " ".join(s.quick.get("shrink", "").split())})
    return rows


def _flat(point: dict) -> dict:
    return {**point, **(point.get("layout") or {})}


def _varying(points: list[dict]) -> list[str]:
    """Workload fields whose value differs between points (the study's axes)."""
    points = [_flat(p) for p in points]
    keys = []
    for k in points[0] if points else []:
        if k in ("suite", "hardware", "resize", "layout"):
            continue
        if len({repr(p.get(k)) for p in points}) > 1:
            keys.append(k)
    return keys


def _print_results(summary: dict) -> None:
    rows, c = summary["results"], summary["counts"]
    axes = _varying([r["point"] for r in rows]) or ["model"]
    out = []
    for r in rows:
        result = headline(r["metrics"]) if r["status"] == "ok" else (r["error"] or "")
        out.append([str(_flat(r["point"]).get(k)) for k in axes] + [r["status"], result])
    table(f"{summary['study']}{' (quick)' if summary['quick'] else ''} on {summary['hardware']}",
          axes + ["status", "result"], out)
    counts = ", ".join(f"{c.get(k, 0)} {k}" for k in ("ok", "oom", "error", "skipped", "crashed", "running"))
    print(f"{counts}; this run: ran {summary['ran']}, skipped {summary['skipped_now']}, already "
          f"recorded {summary['already_recorded']}; results in {summary['db']}")


def register(cli) -> None:
    g = cli.group("study", "Published studies as runnable sweeps (YAML specs).")
    add_json(g.command("list", study_list))
    p = g.command("show", study_show)
    _name(p)
    p.add_argument("--quick", action="store_true", help="the shrunk points")
    add_device(p)
    add_db(p)
    p.add_argument("--force", action="store_true", help="plan bf16/fp16 on a CPU too")
    p.add_argument("--retry-crashed", action="store_true", help=RETRY_HELP)
    add_json(p)
    p = g.command("run", study_run)
    _name(p)
    p.add_argument("--quick", action="store_true", help="shrunk sizes that fit a 2-core CPU in minutes")
    add_device(p)
    add_db(p)
    p.add_argument("--force", action="store_true",
                   help="run bf16/fp16 on a CPU anyway; retry points recorded as skipped")
    p.add_argument("--redo", action="store_true", help="measure every point again, recorded or not")
    p.add_argument("--retry-crashed", action="store_true", help=RETRY_HELP)
    p.add_argument("--suite-module", help=argparse.SUPPRESS)  # module with run_suite (tests only)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="JSON output (the recorded results)")
    p = g.command("predict", study_predict)
    _name(p)
    p.add_argument("--hardware", help="comma-separated catalog names (default: the study's predict: "
                   "section, else every accelerator)")
    add_db(p)
    add_json(p)
    p = cli.command("reproduce", reproduce_cmd)
    mode = p.add_mutually_exclusive_group()  # --quick --full contradict: refused (one line, exit 2)
    mode.add_argument("--quick", action=argparse.BooleanOptionalAction, default=True,
                      help="--quick (default): shrunk studies under time budgets, < 10 min on 2 CPU cores; "
                           "--no-quick (or --full): the full studies")
    mode.add_argument("--full", dest="quick", action="store_false", help="the full studies (= --no-quick)")
    p.add_argument("--out", type=Path, default=Path("out"), help="output directory for report.html and img/")
    add_db(p)
    p.add_argument("--measure", action=argparse.BooleanOptionalAction, default=True,
                   help="run the measured studies here (default)")
    p.add_argument("--json", action="store_true", help="JSON summary (timings, counts, report path)")
    p.add_argument("--docs", action="store_true",
                   help="also write docs/results/fidelity.md (a source checkout: the counts the docs quote)")
    p.add_argument("--price", action="append", default=[], metavar="HW=USD",
                   help="price per device-hour for the energy/cost view, overriding the catalog's "
                        "(repeatable), e.g. --price cs3=60")


def _name(p) -> None:
    p.add_argument("name", help="study name (llmbench study list)")


def study_list(a) -> None:
    """List the studies with their point counts and sources."""
    rows = study_rows()
    if a.json:
        return emit_json(rows)
    table("llmbench studies", ("name", "suite", "points", "quick", "predict points", "source", "published"),
          [(r["name"], r["suite"], r["points"], r["quick_points"], r["predictions"],
            f"{r['source']['paper']} {r['source'].get('where', '')}", len(r["published"])) for r in rows])


def study_show(a) -> None:
    """The study's points and what a run would do with each (run, skip and why, done)."""
    from dataclasses import asdict

    from llmbench.results.store import open_readonly
    from llmbench.studies.runner import describe, plan_study
    from llmbench.studies.spec import get_study

    spec = get_study(a.name)
    with open_readonly(a.db, missing_ok=True) as store:
        plan = plan_study(spec, store, quick=a.quick, device=a.device, force=a.force,
                          retry_crashed=a.retry_crashed)
    rows = [{"key": p.key, "action": p.action, "reason": p.reason, "recorded_status": p.recorded_status,
             "point": p.workload.to_dict(), "run": asdict(p.run)} for p in plan.points]
    info = {"study": spec.name, "title": spec.title, "suite": spec.suite, "source": spec.source,
            "description": " ".join(spec.description.split()), "published": list(spec.published),
            "quick": a.quick, "quick_shrink": " ".join(spec.quick.get("shrink", "").split()),
            "hardware": plan.local.hardware, "points": rows}
    if a.json:
        return emit_json(info)
    print(f"{spec.title} ({spec.source['paper']}, {spec.source.get('where', '')})")
    if a.quick:
        print(f"quick: {info['quick_shrink']}")
    table(None, ("point", "action", "reason / status"),
          [(describe(p.workload), p.action, p.reason or p.recorded_status or "") for p in plan.points])


def study_run(a) -> None:
    """Measure the study's points here; skip (and record why) what cannot run; resume on rerun."""
    from llmbench.studies.runner import run_study

    summary = run_study(a.name, quick=a.quick, device=a.device, db=a.db, force=a.force, redo=a.redo,
                        retry_crashed=a.retry_crashed, suite_module=a.suite_module,
                        progress=not a.no_progress)
    if a.json:
        return emit_json(summary)
    _print_results(summary)


def study_predict(a) -> None:
    """Record the analytical model's predictions for the study's full-size points."""
    from llmbench.studies.predict import predict_study
    from llmbench.studies.runner import describe

    from llmbench.point import Workload

    hws = [h.strip() for h in a.hardware.split(",") if h.strip()] if a.hardware else None
    summary = predict_study(a.name, hws, a.db)
    if a.json:
        return emit_json(summary)
    rows = [(r["hardware"], describe(Workload.from_dict(r["point"])), r["status"],
             headline(r["metrics"]) if r["status"] == "ok" else (r["error"] or "")) for r in summary["results"]]
    table(f"{summary['study']} predicted on {len(summary['hardware'])} kinds of hardware: "
          + ", ".join(f"{v} {k}" for k, v in summary["counts"].items() if v),
          ("hardware", "point", "status", "result"), rows)
    print(f"results in {summary['db']}")


def _log(json_out: bool):
    return (lambda m: print(m, file=sys.stderr)) if json_out else print


def predict_missing(db):
    """What `llmbench report` predicts in memory: the measured runs the database has no
    prediction for (llmbench/cli.py passes it to report's register)."""
    from llmbench.studies import predict

    return predict.predict_missing(db)


def reproduce_cmd(a) -> None:
    """Measure here, predict what every study plans, compare with published, write the report."""
    from llmbench.report.cli import parse_prices
    from llmbench.studies.reproduce import reproduce

    prices = parse_prices(a.price)
    console = None
    if a.json:  # stdout carries only the JSON; tables and progress go to stderr
        from llmbench._cliutil import console as make_console
        console = make_console(stderr=True)
    summary = reproduce(quick=a.quick, out_dir=a.out, db_path=a.db, measure=a.measure,
                        log=_log(a.json), console=console, prices=prices, docs=a.docs)
    if a.json:
        emit_json(summary)
