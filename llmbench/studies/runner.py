"""Run a study: expand its points, skip what cannot run here, measure the rest one by one.

    llmbench study run transformer-block --quick --device cpu --db runs.db

Every point is recorded in the results store the moment it finishes (ok, oom, error) or is
skipped (with its reason), keyed by its full configuration. A rerun skips points already recorded
as ok, oom or skipped, so after Ctrl-C or SIGKILL rerunning the same command finishes the study
without redoing or losing a point; points that ended in `error` are tried again.

Before a point runs it is claimed (llmbench.results.claims): marked `running` with this process's
pid, host and start time in one BEGIN IMMEDIATE transaction. So a point that kills its process
(the OOM killer, a segfault) is found `crashed` by the next run and skipped unless
`retry_crashed`, and later points still run; two runs of one study at once never measure a point
twice (a point running in a live process, or recorded since this run started, is left alone).
Ctrl-C or SIGTERM during a point puts its row back as it was.

Points run through `llmbench.measure.suites.run_suite(suite, config) -> {status, metrics, error,
environment}`. Tests swap in a fast fake suite with `--suite-module` or $LLMBENCH_SUITE_MODULE
(a module defining the same `run_suite`).
"""
from __future__ import annotations

import importlib
import os
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

from llmbench.errors import BadInput
from llmbench.results.claims import LEAVE, RUN, SKIP, claim, crashed_row, describe_holder, \
    holder_alive, release
from llmbench.results.store import ResultsDB, now, point_key
from llmbench.studies.feasibility import LocalDevice, local_device, skip_reason
from llmbench.studies.spec import StudySpec, get_study

SUITE_MODULE = "llmbench.measure.suites"
SUITE_ENV = "LLMBENCH_SUITE_MODULE"
DONE = ("ok", "oom", "skipped")  # recorded outcomes a rerun does not redo
_NOT_CONFIG = ("suite", "hardware", "devices")


@dataclass
class PlannedPoint:
    point: dict
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


def load_run_suite(module: str | None = None):
    """`run_suite` of the measure suites, or of the module given (tests: a fake fast suite)."""
    name = module or os.environ.get(SUITE_ENV) or SUITE_MODULE
    try:
        mod = importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise BadInput(f"cannot import the suite module {name!r} ({e.msg})") from None
    if not hasattr(mod, "run_suite"):
        raise BadInput(f"suite module {name!r} has no run_suite(suite, config)")
    return mod.run_suite


def plan_study(spec: StudySpec, db: ResultsDB, *, quick: bool = False, device: str | None = None,
               force: bool = False, redo: bool = False, retry_crashed: bool = False,
               local: LocalDevice | None = None) -> StudyPlan:
    """What a run would do with each point: run it, skip it (and why), nothing (recorded), leave
    it to the live process measuring it (busy), or leave it crashed. Writes nothing.
    `redo` plans every point again (re-measure what is recorded, e.g. after a noisy run)."""
    local = local or local_device(device)
    plan = StudyPlan(spec=spec, quick=quick, local=local)
    for point in spec.points(quick=quick, hardware=local.hardware):
        key = point_key(point, "measured")
        row = db.get(key)
        if row is not None and row["status"] == "running" \
                and not holder_alive(row["environment"].get("claim")):
            row = crashed_row(row)  # what the next claim will write
        action, reason = decide(row, point, local, force=force, redo=redo,
                                retry_crashed=retry_crashed)
        plan.points.append(PlannedPoint(point, key, action, reason, row["status"] if row else None))
    return plan


def decide(row: dict | None, point: dict, local: LocalDevice, *, force: bool = False,
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
    reason = skip_reason(point, local, force=force)
    return ("skip", reason) if reason else ("run", None)


_CLAIM_ACTION = {"run": RUN, "skip": SKIP}


def suite_config(point: dict, local: LocalDevice) -> dict:
    """The config handed to run_suite: the point's workload fields, the resized model's sizes as
    top-level keys (n_layers, d_model, ...: llmbench.measure.common.model_from_config) and the
    torch device. `devices` is not passed: more than one runs through torchrun (studies/ddp.py)."""
    cfg = {k: v for k, v in point.items() if k not in _NOT_CONFIG}
    cfg.update(cfg.pop("resize", None) or {})
    cfg["device"] = local.device
    return cfg


def run_one(run_suite, point: dict, local: LocalDevice, *, suite_module: str | None = None,
            extra: dict | None = None) -> dict:
    """Run one point; any exception becomes an `error` result (one line), never a crash."""
    config = {**suite_config(point, local), **(extra or {})}
    try:
        if int(point.get("devices", 1) or 1) > 1:
            from llmbench.studies.ddp import launch

            res = launch(config, int(point["devices"]), suite_module=suite_module)
        else:
            res = run_suite(point["suite"], config)
    except MemoryError as e:
        return {"status": "oom", "metrics": {}, "error": f"MemoryError: {e}", "environment": {}}
    except Exception as e:  # a broken point must not stop the sweep
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return {"status": "error", "metrics": {}, "error": f"{type(e).__name__}: {msg}",
                "environment": {}}
    if not isinstance(res, dict) or res.get("status") not in ("ok", "oom", "error"):
        return {"status": "error", "metrics": {}, "environment": {},
                "error": f"run_suite returned no valid status: {str(res)[:200]}"}
    return res


def baseline_for(store: ResultsDB, point: dict) -> dict:
    """For a data-parallel point, ask the suite to measure its own one-process baseline inside the
    same torchrun launch (rank 0 alone, same threads per process, same machine load), so the
    scaling efficiency compares like with like; a 1-device row recorded earlier, under another
    load and thread count, gave efficiencies of 2-6 on a shared 2-core CPU."""
    del store
    if int(point.get("devices", 1) or 1) <= 1 or point["suite"] != "train":
        return {}
    return {"baseline": True}


def run_study(name: str, *, quick: bool = False, device: str | None = None,
              db: str | None = None, force: bool = False, redo: bool = False,
              retry_crashed: bool = False, suite_module: str | None = None,
              progress: bool = True) -> dict:
    """Run (or finish) a study; returns a summary with every point's recorded result."""
    from llmbench.results.environment import base_environment

    spec = get_study(name)
    local = local_device(device)
    started = now()
    with _sigterm_unwinds(), ResultsDB(db) as store:
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
                bar.describe(f"{spec.name}: {describe(p.point)}")
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
        action, reason = decide(row, p.point, local, **opts)
        p.action, p.reason = action, reason
        return _CLAIM_ACTION.get(action, LEAVE), reason

    action, _, before = claim(store, p.point, choose, study=spec.name, environment=env)
    if action == LEAVE:
        store.link(spec.name, p.key)
    if action != RUN:
        return
    try:
        res = run_one(suite.get(), p.point, local, suite_module=suite.module,
                      extra=baseline_for(store, p.point))
    except BaseException:  # Ctrl-C, SIGTERM: no result, so the row goes back to what it was
        release(store, p.point, before)
        raise
    store.record(p.point, status=res["status"], metrics=res.get("metrics") or {},
                 error=res.get("error"), environment={**env, **(res.get("environment") or {})},
                 study=spec.name)


class _Suite:
    """run_suite, imported on first use (a run whose points are all recorded imports nothing)."""

    def __init__(self, module: str | None):
        self.module, self._fn = module, None

    def get(self):
        if self._fn is None:
            self._fn = load_run_suite(self.module)
        return self._fn


class _Terminated(BaseException):
    """SIGTERM inside a sweep: unwinds like Ctrl-C so the claimed point is released."""


@contextmanager
def _sigterm_unwinds():
    """While a sweep runs, SIGTERM raises _Terminated (the claim is released on the way out); the
    signal is then delivered again with the previous handler, so the exit status stays SIGTERM's."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise _Terminated()

    old = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, old)
        os.kill(os.getpid(), signal.SIGTERM)
        raise KeyboardInterrupt from None  # only reached when the old handler did not exit
    finally:
        signal.signal(signal.SIGTERM, old)


def published_values(ids) -> list[dict]:
    """The rows of reference/published.csv a study is compared with (id, system, model, metric,
    value, unit, source)."""
    from llmbench.results.published import published_rows

    wanted = set(ids)
    keep = ("id", "system", "model", "task", "precision", "batch", "seq_len", "devices", "metric",
            "value", "unit", "source")
    return [{k: r[k] for k in keep} for r in published_rows() if r["id"] in wanted]


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


def describe(point: dict) -> str:
    parts = [point["model"] + ("*" if point.get("resize") else "")]
    for k in ("batch", "seq", "precision", "grad_accum", "devices", "sparsity"):
        if k in point and not (k in ("grad_accum", "devices") and point[k] == 1) \
                and not (k == "sparsity" and not point[k]):
            parts.append(f"{k}={point[k]}")
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
