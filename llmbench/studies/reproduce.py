"""`llmbench reproduce`: measure here, predict what every study's `predict:` section plans,
compare with published.csv, store it all in the results database, then let report/ print the
summary tables and write DIR/report.html.

    llmbench reproduce --quick --out out/       # `make reproduce`; < 10 minutes on a 2-core CPU

Each measured piece runs as its own `llmbench` subprocess under a time budget (seconds, printed),
so one slow or failing piece costs at most its budget and never the report: a study cut short keeps
the points it finished (the results database is keyed per point, and rerunning resumes it).
Predictions (studies/predict.py) and the validation (studies/validation.py) run in process.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from llmbench.report.rows import flat_ceilings
from llmbench.studies.fidelity import counts_line
from llmbench.studies.runner import Terminated, sigterm_unwinds


@dataclass(frozen=True, kw_only=True)
class Step:
    name: str
    argv: tuple[str, ...]
    """arguments after `llmbench`"""
    budget_s: float
    """wall-clock budget of the subprocess (quick mode); the full mode has none"""
    python_args: tuple[str, ...] = ("-m", "llmbench")
    """what the interpreter runs before `argv` (tests replace it)"""


def measure_plan(quick: bool = True) -> list[Step]:
    """The measured pieces, cheapest first; budgets sum to ~7 minutes (the rest: predict + report).
    Every shipped study with points to measure has its budget here (tests/test_report.py checks).
    Seed 002 Fig. 8 (sparse against dense loss curves, studies/sparse_loss.py) has 2 of them."""
    q = ("--quick",) if quick else ()
    # 3 repeats of the square GEMM in quick mode: on a loaded 2-core CPU 5 did not fit 35 s
    repeats = ("--repeats", "3") if quick else ()
    steps = [Step(name="ceilings", argv=("measure", "ceilings", "--json") + repeats, budget_s=35)]
    for name, budget in (("transformer-block", 40), ("gpt2-seq-length", 35), ("gas", 35),
                         ("sparsity", 35), ("bert-train-batch", 35), ("bert-infer-batch", 25),
                         ("genslm", 30), ("dp-scaling", 40)):
        steps.append(Step(name=name, argv=("study", "run", name, "--no-progress") + q, budget_s=budget))
    # weight streaming (optional in the report): the same small GPT trained resident and streamed
    steps.append(Step(name="streaming", argv=STREAM_ARGV if quick else STREAM_ARGV_FULL, budget_s=35))
    steps.append(Step(name="sparse-loss", argv=("--quick",) if quick else ("--full",), budget_s=120,
                      python_args=("-m", "llmbench.studies.sparse_loss")))
    return steps


STREAM_ARGV = ("stream", "compare", "--model", "gpt2-small", "--layers", "4", "--width", "256",
               "--heads", "4", "--vocab", "1024", "--batch", "8", "--seq", "128", "--steps", "6", "--json")
STREAM_ARGV_FULL = ("stream", "compare", "--model", "gpt2-small", "--batch", "8", "--seq", "512",
                    "--steps", "20", "--json")


def _json_output(result: dict) -> dict | None:
    """The JSON object a finished piece printed, or None (failed, stopped, or not a JSON object)."""
    if result["status"] != "ok":
        return None
    try:
        data = json.loads(result["stdout"])
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def record_streaming(db, result: dict) -> None:
    """Store `llmbench stream compare --json` as a measured row of study "streaming"."""
    data = _json_output(result)
    if data is None:
        return
    keys = ("model", "n_layers", "d_model", "batch", "seq", "steps", "device", "prefetch")
    point = {"suite": "stream", "hardware": "cpu" if data.get("device", "cpu") == "cpu" else data["device"],
             **{k: data.get(k) for k in keys}}
    db.record(point, source="measured", metrics=data, study="streaming",
              environment={"command": result["command"]})


def run_step(step: Step, db_path: Path, *, quick: bool, deadline: float, log=print) -> dict:
    """Run one measured piece as a subprocess; stop its process group when over budget, or when
    reproduce itself is interrupted (Ctrl-C) or terminated (SIGTERM: passed on to the piece, which
    has STOP_WAIT_S to end, and then reproduce ends by it): no orphan goes on writing the database."""
    budget = min(step.budget_s, max(5.0, deadline - time.monotonic())) if quick else None
    env = {**os.environ, "LLMBENCH_DB": str(db_path)}
    cmd = [sys.executable, *step.python_args, *step.argv]
    t0 = time.monotonic()
    with sigterm_unwinds():
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=budget)
            status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}: {_last_line(err)}"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            status = f"stopped at its budget of {budget:.0f} s (finished points are kept)"
        except BaseException as e:  # the child has its own session: pass the signal on, end it
            if isinstance(e, Terminated):
                _kill_group(proc, signal.SIGTERM, wait_s=STOP_WAIT_S)
            else:
                _kill_group(proc)
            raise
    dt = time.monotonic() - t0
    log(f"  {step.name:<18} {dt:6.1f} s  {status}")
    head = "llmbench" if step.python_args == ("-m", "llmbench") else "python " + " ".join(step.python_args)
    return {"step": step.name, "command": head + " " + " ".join(step.argv), "seconds": dt,
            "status": status, "stdout": out or ""}


#: seconds a terminated piece has to record its state and exit before it is killed (a study
#: releases its running point and exits at once; `timeout` sends SIGKILL only if asked, -k)
STOP_WAIT_S = 15.0


def _kill_group(proc: subprocess.Popen, first: int = signal.SIGINT, wait_s: float = 5.0) -> None:
    """End the subprocess we started and its children (torchrun workers), its own process group:
    `first`, then SIGKILL if it has not exited within wait_s."""
    for sig in (first, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(text: str | None) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def record_ceilings(db, result: dict) -> None:
    """File the ceilings under study "ceilings": link the row `measure ceilings` recorded, or
    record its JSON output when it recorded none."""
    rows = db.query(source="measured", suite="ceilings")
    if rows:
        for r in rows:
            db.link("ceilings", r["key"])
        return
    data = _json_output(result)
    if data is None:
        return
    metrics = flat_ceilings(data)
    if metrics:
        point = {"suite": "ceilings", "hardware": data.get("profile", "cpu"), "device": data.get("device")}
        db.record(point, source="measured", metrics=metrics, study="ceilings",
                  environment={"command": result["command"]})


def reproduce(*, quick: bool = True, out_dir: str | Path = "out", db_path: str | Path | None = None,
              measure: bool = True, predict: bool = True, log=print, console=None,
              prices: dict | None = None, docs: bool = False) -> dict:
    """The whole job; returns a summary (timings, counts, report path). docs: also write
    docs/results/fidelity.md (what README.md and docs/reproduce.md quote)."""
    from llmbench.report.html import report
    from llmbench.results import record_published
    from llmbench.results.store import ResultsDB, default_path

    t_start = time.monotonic()
    deadline = t_start + 8.0 * 60  # measured pieces stop here; predict + report take the rest
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    db_path = default_path(db_path)
    timings = []
    with ResultsDB(db_path) as db:
        n_pub = len(record_published(db))
        log(f"results database: {db_path} ({n_pub} published rows loaded)")
        if measure:
            log("measuring on this machine (each piece under its time budget):")
            for step in measure_plan(quick):
                if quick and time.monotonic() > deadline - 5:
                    timings.append({"step": step.name, "seconds": 0.0,
                                    "status": "skipped: time budget spent"})
                    continue
                res = run_step(step, db_path, quick=quick, deadline=deadline, log=log)
                if step.name == "ceilings":
                    record_ceilings(db, res)
                elif step.name == "streaming":
                    record_streaming(db, res)
                res.pop("stdout", None)
                timings.append(res)
        if predict:
            timings += _predict_all(db, log=log)
        t0 = time.monotonic()
        fid = _fidelity(db, log=log)
        timings.append({"step": "fidelity", "seconds": time.monotonic() - t0, "status": counts_line(fid["counts"])})
        t0 = time.monotonic()
        command = "llmbench reproduce " + ("--quick" if quick else "--full")
        summary = report(db, out, meta={"timings": timings, "db": str(db_path), "command": command,
                                        "headline": fid["headline"], "prices": prices or {}},
                         log=log, console=console)
        timings.append({"step": "report", "seconds": time.monotonic() - t0, "status": "ok"})
    summary.update(timings=timings, total_s=time.monotonic() - t_start, db=str(db_path), fidelity=fid)
    (out / "reproduce.json").write_text(json.dumps(summary, indent=2, default=str))
    from llmbench.studies.fidelity_md import write_fidelity_md

    mode = command + ("" if measure else " --no-measure")
    for p in write_fidelity_md(fid, out, mode, docs=docs):
        log(f"wrote {p} (the fidelity counts the docs quote)")
    log(f"reproduce finished in {summary['total_s']:.0f} s: {summary['report']}")
    log("seed fidelity: " + counts_line(fid["counts"]) + " (per claim: report.html#t-fidelity)")
    return summary


def _fidelity(db, *, log=print) -> dict:
    """The seed-fidelity table (studies/fidelity.py), recorded as study "fidelity"."""
    from llmbench.studies.fidelity import fidelity, record

    fid = fidelity(db)
    record(db, fid)
    log("seed fidelity: " + counts_line(fid["counts"]))
    return fid


def _predict_all(db, *, log=print) -> list[dict]:
    from llmbench.studies.predict import predict_all, predict_measured
    from llmbench.studies.validation import record_validation

    timings = []
    t0 = time.monotonic()
    log("predicting what each study's predict: section plans (catalog accelerators):")
    res = predict_all(db, log=lambda m: log("  " + m))
    bad = {k: v for k, v in res["counts"].items() if k == "error"}
    timings.append({"step": "predict", "seconds": time.monotonic() - t0,
                    "status": "ok" if not bad else f"errors: {bad['error']}"})
    t0 = time.monotonic()  # also with --no-measure: the database may hold earlier measurements
    n = predict_measured(db, log=log)
    timings.append({"step": "predict measured points", "seconds": time.monotonic() - t0,
                    "status": f"{n} measured points predicted"})
    t0 = time.monotonic()
    status = record_validation(db, log=lambda m: log("  " + m))
    timings.append({"step": "validate", "seconds": time.monotonic() - t0, "status": status})
    from llmbench.studies.serving import record_serving  # the serving page (report/serving.py)
    timings.append(record_serving(db, log=log))
    return timings
