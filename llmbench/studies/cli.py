"""`llmbench study ...`: list the published studies, show their points, run them.

    llmbench study list [--json]
    llmbench study show NAME [--quick] [--device D] [--db PATH] [--json]
    llmbench study run NAME [--quick] [--device D] [--db PATH] [--force] [--redo] [--json]
    llmbench study predict NAME [--hardware a100-40gb,cs2] [--db PATH] [--json]

No torch at import time (the suites import it when a point runs).
"""
from __future__ import annotations

import os
import sys

import typer

from llmbench._cliutil import console

DB_HELP = "results database (default: $LLMBENCH_DB, else ./llmbench-results.db)"


DEVICE_HELP = "torch device: auto (default: the accelerator if any), cpu, cuda, cuda:1, ..."


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
    from rich.table import Table

    from llmbench.results.cli import headline

    rows = summary["results"]
    axes = _varying([r["point"] for r in rows]) or ["model"]
    c = summary["counts"]
    t = Table(title=f"{summary['study']}{' (quick)' if summary['quick'] else ''} on {summary['hardware']}")
    for col in axes + ["status", "result"]:
        t.add_column(col, overflow="fold")
    for r in rows:
        result = headline(r["metrics"]) if r["status"] == "ok" else (r["error"] or "")
        t.add_row(*[str(r["point"].get(k)) for k in axes], r["status"], result)
    con = console()
    con.print(t)
    con.print(f"{c['ok']} ok, {c['oom']} oom, {c['error']} error, {c['skipped']} skipped; this run: "
              f"ran {summary['ran']}, skipped {summary['skipped_now']}, already recorded "
              f"{summary['already_recorded']}; results in {summary['db']}")


def register(app: typer.Typer) -> None:
    study_app = typer.Typer(help="Published studies as runnable sweeps (YAML specs).",
                            no_args_is_help=True)
    app.add_typer(study_app, name="study")

    @study_app.command("list")
    def study_list(json_out: bool = typer.Option(False, "--json", help="JSON output")) -> None:
        """List the studies with their point counts and sources."""
        rows = study_rows()
        if json_out:
            from llmbench.cli import emit_json

            return emit_json(rows)
        from rich.table import Table

        t = Table(title="llmbench studies")
        for col in ("name", "suite", "points", "quick", "source", "published"):
            t.add_column(col, overflow="fold")
        for r in rows:
            t.add_row(r["name"], r["suite"], str(r["points"]), str(r["quick_points"]),
                      f"{r['source']['paper']} {r['source'].get('where', '')}",
                      str(len(r["published"])))
        console().print(t)

    @study_app.command("show")
    def study_show(
        name: str = typer.Argument(..., help="study name (llmbench study list)"),
        quick: bool = typer.Option(False, "--quick", help="the shrunk points"),
        device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        force: bool = typer.Option(False, "--force", help="plan bf16/fp16 on a CPU too"),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
    ) -> None:
        """The study's points and what a run would do with each (run, skip and why, done)."""
        from llmbench.results.store import ResultsDB
        from llmbench.studies.runner import plan_study
        from llmbench.studies.spec import get_study

        spec = get_study(name)
        with ResultsDB(db) as store:
            plan = plan_study(spec, store, quick=quick, device=device, force=force)
        rows = [{"key": p.key, "action": p.action, "reason": p.reason,
                 "recorded_status": p.recorded_status, "point": p.point} for p in plan.points]
        info = {"study": spec.name, "title": spec.title, "suite": spec.suite, "source": spec.source,
                "description": " ".join(spec.description.split()), "published": list(spec.published),
                "quick": quick, "quick_shrink": " ".join(spec.quick.get("shrink", "").split()),
                "hardware": plan.local.hardware, "points": rows}
        if json_out:
            from llmbench.cli import emit_json

            return emit_json(info)
        from rich.table import Table

        from llmbench.studies.runner import describe

        con = console()
        con.print(f"[bold]{spec.title}[/bold] ({spec.source['paper']}, {spec.source.get('where', '')})")
        if quick:
            con.print(f"quick: {info['quick_shrink']}")
        t = Table()
        for col in ("point", "action", "reason / status"):
            t.add_column(col, overflow="fold")
        for p in plan.points:
            t.add_row(describe(p.point), p.action, p.reason or p.recorded_status or "")
        con.print(t)

    @study_app.command("run")
    def study_run(
        name: str = typer.Argument(..., help="study name (llmbench study list)"),
        quick: bool = typer.Option(False, "--quick", help="shrunk sizes that fit a 2-core CPU in minutes"),
        device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        force: bool = typer.Option(False, "--force",
                                   help="run bf16/fp16 on a CPU anyway; retry points recorded as skipped"),
        redo: bool = typer.Option(False, "--redo", help="measure every point again, recorded or not"),
        json_out: bool = typer.Option(False, "--json", help="JSON output (the recorded results)"),
        suite_module: str = typer.Option(None, "--suite-module", hidden=True,
                                         help="module with run_suite(suite, config) (tests only)"),
        no_progress: bool = typer.Option(False, "--no-progress", help="no progress bar"),
    ) -> None:
        """Measure the study's points here; skip (and record why) what cannot run; resume on rerun."""
        from llmbench.studies.runner import run_study

        try:
            summary = run_study(name, quick=quick, device=device, db=db, force=force, redo=redo,
                                suite_module=suite_module, progress=not no_progress)
        except KeyboardInterrupt:
            typer.echo("interrupted: every finished point is recorded; rerun the same command to "
                       "finish the study", err=True)
            # The results DB is closed by now. Exit here: typer.Exit is returned (not raised) by
            # click under standalone_mode=False, and a SystemExit reaching llmbench.cli.main
            # meets its `except click.exceptions.Abort`, which typer's vendored click lacks.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        if json_out:
            from llmbench.cli import emit_json

            return emit_json(summary)
        _print_results(summary)

    @study_app.command("predict")
    def study_predict(
        name: str = typer.Argument(..., help="study name (llmbench study list)"),
        hardware: str = typer.Option(None, "--hardware",
                                     help="comma-separated catalog names (default: every accelerator)"),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
    ) -> None:
        """Record the analytical model's predictions for the study's full-size points."""
        from llmbench.studies.predict import predict_study

        hws = [h.strip() for h in hardware.split(",") if h.strip()] if hardware else None
        summary = predict_study(name, hws, db)
        if json_out:
            from llmbench.cli import emit_json

            return emit_json(summary)
        from rich.table import Table

        from llmbench.results.cli import headline
        from llmbench.studies.runner import describe

        t = Table(title=f"{summary['study']} predicted on {len(summary['hardware'])} devices: "
                        + ", ".join(f"{v} {k}" for k, v in summary["counts"].items()))
        for col in ("hardware", "point", "status", "result"):
            t.add_column(col, overflow="fold")
        for r in summary["results"]:
            result = headline(r["metrics"]) if r["status"] == "ok" else (r["error"] or "")
            t.add_row(r["hardware"], describe(r["point"]), r["status"], result)
        con = console()
        con.print(t)
        if summary["block_points_left_out"]:
            con.print(f"{summary['block_points_left_out']} block points left out: the analytical "
                      "model predicts whole models, not one layer")
        con.print(f"results in {summary['db']}")
