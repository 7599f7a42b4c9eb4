"""Run a study: expand its points, skip what cannot run here, measure the rest one by one.

    llmbench study run transformer-block --quick --device cpu --db runs.db

Each point of the spec (a Workload and its RunOptions, studies/spec.py) is resolved for this
machine first (`resolve`: the hardware here, its precision when the spec leaves it open, the
devices, and the micro-batch and micro-steps of a training batch): that Workload is what the
point is recorded under (`ResultsDB.record(w)`, key `w.key("measured")`), so a plan knows each
key before anything runs. Every point is recorded the moment it finishes (ok, oom, error) or is
skipped (with its reason). A rerun skips points already recorded as ok, oom or skipped, so after
Ctrl-C or SIGKILL rerunning the same command finishes the study without redoing or losing a
point; points that ended in `error` are tried again.

Before a point runs it is claimed (llmbench.results.claims): marked `running` with this process's
pid, host and start time in one BEGIN IMMEDIATE transaction. So a point that kills its process
(the OOM killer, a segfault) is found `crashed` by the next run and skipped unless
`retry_crashed`, and later points still run; two runs of one study at once never measure a point
twice (a point running in a live process, or recorded since this run started, is left alone).
Ctrl-C or SIGTERM during a point puts its row back as it was.

Points run through `llmbench.measure.suites.run_workload(w, run) -> (w as measured, {status,
metrics, error, environment})`; a data-parallel point through torchrun (studies/ddp.py). Tests
swap in a fast fake with `--suite-module` or $LLMBENCH_SUITE_MODULE (a module defining the same
`run_workload`).
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace

from llmbench.measure.options import RunOptions
from llmbench.point import Workload, precision_for
from llmbench.results.claims import LEAVE, RUN, SKIP, claim, crashed_row, describe_holder, \
    holder_alive, release
from llmbench.results.store import ResultsDB, now
from llmbench.studies.ddp import launch, load_run_workload
from llmbench.studies.feasibility import LocalDevice, local_device, skip_reason
from llmbench.studies.spec import StudySpec, get_study

DONE = ("ok", "oom", "skipped")  # recorded outcomes a rerun does not redo
#: suites whose batch is split into data-parallel replicas and micro-steps
TRAINING = ("train", "genslm")


@dataclass
class PlannedPoint:
    workload: Workload
    """resolved for this machine: what the point is recorded under"""
    run: RunOptions
    key: str
    action: str
    """run | skip | done (recorded as ok/oom/skipped) | busy (running in a live process) |
    crashed (its process died while measuring it: skipped unless retry_crashed)"""
    reason: str | None = None
    recorded_status: str | None = None


@dataclass
class StudyPlan:
    spec: StudySpec
    quick: bool
    local: LocalDevice
    points: list[PlannedPoint] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(p.action == action for p in self.points)


def resolve(w: Workload, local: LocalDevice) -> Workload:
    """The workload as this machine measures it: its hardware, the precision (the spec's, else
    the hardware's: point.precision_for), the devices (1 unless the spec says), and for training
    the micro-batch and micro-steps of the global batch (Workload.micro_steps, the one rule)."""
    w = w.with_(hardware=local.hardware, precision=w.precision or _precision_here(local),
                devices=w.devices or 1)
    if w.suite in TRAINING:
        micro, grad_accum = w.micro_steps(dp=w.devices)
        w = w.with_(micro_batch=micro, grad_accum=grad_accum)
    return w


def _precision_here(local: LocalDevice) -> str:
    from llmbench.hardware import get_hardware

    try:
        return precision_for(get_hardware(local.hardware))
    except ValueError:  # an accelerator without a catalog entry: as llmbench.measure does
        return "fp32" if local.type == "cpu" else "bf16"


def run_options(p_run: RunOptions, w: Workload, local: LocalDevice) -> RunOptions:
    """The point's RunOptions on this device. A data-parallel training point measures its own
    one-process baseline inside the same torchrun launch (rank 0 alone, same threads per
    process, same machine load), so the scaling efficiency compares like with like; a 1-device
    row recorded earlier, under another load and thread count, gave efficiencies of 2-6 on a
    shared 2-core CPU."""
    baseline = (w.devices or 1) > 1 and w.suite in TRAINING
    return replace(p_run, device=local.device, baseline=baseline or p_run.baseline)


def plan_study(spec: StudySpec, db: ResultsDB, *, quick: bool = False, device: str | None = None,
               force: bool = False, redo: bool = False, retry_crashed: bool = False,
               local: LocalDevice | None = None) -> StudyPlan:
    """What a run would do with each point: run it, skip it (and why), nothing (recorded), leave
    it to the live process measuring it (busy), or leave it crashed. Writes nothing.
    `redo` plans every point again (re-measure what is recorded, e.g. after a noisy run)."""
    local = local or local_device(device)
    plan = StudyPlan(spec=spec, quick=quick, local=local)
    seen = set()
    for sp in spec.points(quick=quick):
        w = resolve(sp.workload, local)
        key = w.key("measured")
        if key in seen:  # two spec points that are one workload here (run options aside)
            continue
        seen.add(key)
        row = db.get(key)
        if row is not None and row["status"] == "running" \
                and not holder_alive(row["environment"].get("claim")):
            row = crashed_row(row)  # what the next claim will write
        action, reason = decide(row, w, local, force=force, redo=redo, retry_crashed=retry_crashed)
        plan.points.append(PlannedPoint(w, run_options(sp.run, w, local), key, action, reason,
                                        row["status"] if row else None))
    return plan


def decide(row: dict | None, w: Workload, local: LocalDevice, *, force: bool = False,
           redo: bool = False, retry_crashed: bool = False,
           started: str | None = None) -> tuple[str, str | None]:
    """The action for one point given its recorded row: (run | skip | done | busy | crashed, why).
    `started`: this run's start; a row recorded since then is another run's work, left alone."""
    if row is not None:
        status = row["status"]
        if status == "running":
            return "busy", f"being measured by {describe_holder(row['environment'].get('claim') or {})}"
        if started is not None and row["created_at"] >= started:
            return "done", row["error"]
        if status == "crashed" and not retry_crashed:
            return "crashed", row["error"]
        if status in DONE and not redo and not (force and status == "skipped"):
            return "done", row["error"]
    reason = skip_reason(w, local, force=force)
    return ("skip", reason) if reason else ("run", None)


_CLAIM_ACTION = {"run": RUN, "skip": SKIP}


def run_one(run_workload, w: Workload, run: RunOptions, *,
            suite_module: str | None = None) -> tuple[Workload, dict]:
    """Measure one point: (the workload as measured, result); any exception becomes an `error`
    result (one line), never a crash. More than one device runs through torchrun. The hardware
    is left to the measurement to detect (point.hardware_for_device, as `resolve` named it): a
    named one is also the datasheet MFU is taken against, and a CPU has none (its catalog entry
    is a placeholder, or this machine's measured ceilings: MFU stays None, DESIGN.md)."""
    here = w.with_(hardware=None)
    try:
        if (w.devices or 1) > 1:
            measured, res = launch(here, run, suite_module=suite_module)
        else:
            measured, res = run_workload(here, run)
    except MemoryError as e:
        return w, {"status": "oom", "metrics": {}, "error": f"MemoryError: {e}", "environment": {}}
    except Exception as e:  # a broken point must not stop the sweep
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return w, {"status": "error", "metrics": {}, "error": f"{type(e).__name__}: {msg}",
                   "environment": {}}
    if not isinstance(res, dict) or res.get("status") not in ("ok", "oom", "error"):
        return w, {"status": "error", "metrics": {}, "environment": {},
                   "error": f"run_workload returned no valid status: {str(res)[:200]}"}
    return measured if isinstance(measured, Workload) else w, res


def run_study(name: str, *, quick: bool = False, device: str | None = None,
              db: str | None = None, force: bool = False, redo: bool = False,
              retry_crashed: bool = False, suite_module: str | None = None,
              progress: bool = True) -> dict:
    """Run (or finish) a study; returns a summary with every point's recorded result."""
    from llmbench.results.environment import base_environment

    spec = get_study(name)
    local = local_device(device)
    started = now()
    with sigterm_unwinds(), ResultsDB(db) as store:
        plan = plan_study(spec, store, quick=quick, local=local, force=force, redo=redo,
                          retry_crashed=retry_crashed)
        env = {**base_environment(), "study": spec.name, "quick": quick, "device": local.device,
               "device_name": local.name}
        suite = _Suite(suite_module)
        if plan.count("run"):
            suite.get()  # a bad --suite-module fails before any point is claimed
        opts = {"force": force, "redo": redo, "retry_crashed": retry_crashed, "started": started}
        with _progress(progress, len(plan.points)) as bar:
            for p in plan.points:
                bar.describe(f"{spec.name}: {describe(p.workload)}")
                if p.action == "done":
                    store.link(spec.name, p.key)
                else:
                    _claim_and_run(store, spec, p, local, env, suite, opts)
                bar.advance()
        rows = [store.get(p.key) for p in plan.points]
        db_path = str(store.path)
    return summary(plan, rows, db_path)


def _claim_and_run(store: ResultsDB, spec: StudySpec, p: PlannedPoint, local: LocalDevice,
                   env: dict, suite: "_Suite", opts: dict) -> None:
    """Claim one point (or record its skip, or leave it), measure it, record the result. The plan
    was made before; the claim decides again inside its transaction (another run may have moved)."""
    def choose(row):
        action, reason = decide(row, p.workload, local, **opts)
        p.action, p.reason = action, reason
        return _CLAIM_ACTION.get(action, LEAVE), reason

    env = {**env, "run": asdict(p.run)}
    action, _, before = claim(store, p.workload, choose, study=spec.name, environment=env)
    if action == LEAVE:
        store.link(spec.name, p.key)
    if action != RUN:
        return
    try:
        measured, res = run_one(suite.get(), p.workload, p.run, suite_module=suite.module)
        if measured.id() != p.workload.id():  # recorded under the planned key all the same
            env["measured_as"] = measured.to_dict()
        store.record(p.workload, status=res["status"], metrics=res.get("metrics") or {},
                     error=res.get("error"), environment={**env, **(res.get("environment") or {})},
                     study=spec.name)
    except BaseException:  # Ctrl-C, SIGTERM before the result is in: the row goes back to what it was
        release(store, p.workload, before)  # (a recorded result is not this claim's row: left alone)
        raise


class _Suite:
    """run_workload, imported on first use (a run whose points are all recorded imports nothing)."""

    def __init__(self, module: str | None):
        self.module, self._fn = module, None

    def get(self):
        if self._fn is None:
            self._fn = load_run_workload(self.module)
        return self._fn


class Terminated(BaseException):
    """SIGTERM inside a sweep: unwinds like Ctrl-C so the claimed point is released. Not an
    Exception, so no `except Exception` of a measurement turns it into an `error` result."""


@contextmanager
def sigterm_unwinds():
    """While a sweep runs, SIGTERM raises Terminated (the claim is released on the way out); the
    signal is then delivered again with the previous handler, so the exit status stays SIGTERM's
    (143 in a shell). Also used by studies/reproduce.py around its subprocesses."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated()

    old = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, old)
        os.kill(os.getpid(), signal.SIGTERM)
        raise KeyboardInterrupt from None  # only reached when the old handler did not exit
    finally:
        signal.signal(signal.SIGTERM, old)


def published_values(ids) -> list[dict]:
    """The rows of reference/published.csv a study is compared with (id, system, model, metric,
    value, unit, source)."""
    from llmbench.published import PUBLISHED_CSV, published_rows

    wanted = set(ids)
    keep = ("id", "system", "model", "task", "precision", "batch", "seq_len", "devices", "metric",
            "value", "unit", "source")
    return [{k: r[k] for k in keep} for r in published_rows(PUBLISHED_CSV) if r["id"] in wanted]


def summary(plan: StudyPlan, rows: list[dict], db_path: str) -> dict:
    counts = {s: sum(r is not None and r["status"] == s for r in rows)
              for s in ("ok", "oom", "error", "skipped", "running", "crashed")}
    return {"study": plan.spec.name, "title": plan.spec.title, "suite": plan.spec.suite,
            "source": plan.spec.source, "published": list(plan.spec.published),
            "published_values": published_values(plan.spec.published),
            "quick": plan.quick, "device": plan.local.device, "hardware": plan.local.hardware,
            "db": db_path, "points": len(rows), "ran": plan.count("run"),
            "skipped_now": plan.count("skip"), "already_recorded": plan.count("done"),
            "running_elsewhere": plan.count("busy"), "crashed_left": plan.count("crashed"),
            "counts": counts, "results": rows}


def describe(w: Workload) -> str:
    """'gpt2-xl* batch=8 seq_len=128 precision=fp32 grad_accum=2': a shrunk model has a star;
    devices and grad_accum of 1, no sparsity, no generated tokens are left out."""
    parts = [w.model + ("*" if w.resize else "")]
    for k in ("batch", "seq_len", "gen_len", "precision", "grad_accum", "devices", "sparsity"):
        v = getattr(w, k)
        if v is not None and not (k in ("grad_accum", "devices") and v == 1) \
                and not (k in ("sparsity", "gen_len") and not v):
            parts.append(f"{k}={v}")
    return " ".join(parts)


class _progress:
    """A rich progress bar on stderr (or nothing), one step per point."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total = enabled, total
        self._bar = self._task = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task("", total=self.total)
        return self

    def describe(self, text: str) -> None:
        if self._bar:
            self._bar.update(self._task, description=text)

    def advance(self) -> None:
        if self._bar:
            self._bar.advance(self._task)

    def __exit__(self, *exc):
        if self._bar:
            self._bar.__exit__(*exc)
