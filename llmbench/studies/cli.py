"""`llmbench study ...`: list the published studies, show their points, run them.

    llmbench study list [--json]
    llmbench study show NAME [--quick] [--device D] [--db PATH] [--json]
    llmbench study run NAME [--quick] [--device D] [--db PATH] [--force] [--redo] [--json]
    llmbench study predict NAME [--hardware a100-40gb,cs2] [--db PATH] [--json]

No torch at import time (the suites import it when a point runs).
"""
from __future__ import annotations

import argparse

from llmbench._cliutil import add_db, add_device, add_json, emit_json, headline, table

RETRY_HELP = "measure again points recorded as crashed (their process died while measuring)"


def study_rows() -> list[dict]:
    from llmbench.studies.spec import studies

    rows = []
    for s in studies().values():
        rows.append({"name": s.name, "title": s.title, "suite": s.suite, "source": s.source,
                     "points": len(s.points()), "quick_points": len(s.points(quick=True)),
                     "published": list(s.published), "quick_shrink": " ".join(s.quick.get("shrink", "").split())})
    return rows


def _varying(points: list[dict]) -> list[str]:
    """Point fields whose value differs between points (the study's axes)."""
    keys = []
    for k in points[0] if points else []:
        if k in ("suite", "hardware", "resize"):
            continue
        if len({repr(p.get(k)) for p in points}) > 1:
            keys.append(k)
    return keys


def _print_results(summary: dict) -> None:
    rows = summary["results"]
    axes = _varying([r["point"] for r in rows]) or ["model"]
    c = summary["counts"]
    out = []
    for r in rows:
        result = headline(r["metrics"]) if r["status"] == "ok" else (r["error"] or "")
        out.append([str(r["point"].get(k)) for k in axes] + [r["status"], result])
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
    p.add_argument("--hardware", help="comma-separated catalog names (default: every accelerator)")
    add_db(p)
    add_json(p)


def _name(p) -> None:
    p.add_argument("name", help="study name (llmbench study list)")


def study_list(a) -> None:
    """List the studies with their point counts and sources."""
    rows = study_rows()
    if a.json:
        return emit_json(rows)
    table("llmbench studies", ("name", "suite", "points", "quick", "source", "published"),
          [(r["name"], r["suite"], r["points"], r["quick_points"],
            f"{r['source']['paper']} {r['source'].get('where', '')}", len(r["published"])) for r in rows])


def study_show(a) -> None:
    """The study's points and what a run would do with each (run, skip and why, done)."""
    from llmbench.results.store import open_readonly
    from llmbench.studies.runner import describe, plan_study
    from llmbench.studies.spec import get_study

    spec = get_study(a.name)
    with open_readonly(a.db, missing_ok=True) as store:
        plan = plan_study(spec, store, quick=a.quick, device=a.device, force=a.force,
                          retry_crashed=a.retry_crashed)
    rows = [{"key": p.key, "action": p.action, "reason": p.reason,
             "recorded_status": p.recorded_status, "point": p.point} for p in plan.points]
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
          [(describe(p.point), p.action, p.reason or p.recorded_status or "") for p in plan.points])


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

    hws = [h.strip() for h in a.hardware.split(",") if h.strip()] if a.hardware else None
    summary = predict_study(a.name, hws, a.db)
    if a.json:
        return emit_json(summary)
    rows = [(r["hardware"], describe(r["point"]), r["status"],
             headline(r["metrics"]) if r["status"] == "ok" else (r["error"] or "")) for r in summary["results"]]
    table(f"{summary['study']} predicted on {len(summary['hardware'])} devices: "
          + ", ".join(f"{v} {k}" for k, v in summary["counts"].items()), ("hardware", "point", "status", "result"), rows)
    if summary["block_points_left_out"]:
        print(f"{summary['block_points_left_out']} block points left out: the analytical "
              "model predicts whole models, not one layer")
    print(f"results in {summary['db']}")
