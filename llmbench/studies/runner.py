"""Run a study: expand its points, skip what cannot run here, measure the rest one by one.

    llmbench study run transformer-block --quick --device cpu --db runs.db

Every point is recorded in the results store the moment it finishes (ok, oom, error) or is
skipped (with its reason), keyed by its full configuration. A rerun skips points already recorded
as ok, oom or skipped, so after Ctrl-C or SIGKILL rerunning the same command finishes the study
without redoing or losing a point; points that ended in `error` are tried again.

Points run through `llmbench.measure.suites.run_suite(suite, config) -> {status, metrics, error,
environment}`. Tests swap in a fast fake suite with `--suite-module` or $LLMBENCH_SUITE_MODULE
(a module defining the same `run_suite`).
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field

from llmbench.results.store import ResultsDB, point_key
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
    """run | skip | done (already recorded as ok/oom/skipped)"""
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
        raise ValueError(f"cannot import the suite module {name!r} ({e.msg})") from None
    if not hasattr(mod, "run_suite"):
        raise ValueError(f"suite module {name!r} has no run_suite(suite, config)")
    return mod.run_suite


def plan_study(spec: StudySpec, db: ResultsDB, *, quick: bool = False, device: str | None = None,
               force: bool = False, redo: bool = False, local: LocalDevice | None = None) -> StudyPlan:
    """What a run would do with each point: run it, skip it (and why), or nothing (recorded).
    `redo` plans every point again (re-measure what is recorded, e.g. after a noisy run)."""
    local = local or local_device(device)
    plan = StudyPlan(spec=spec, quick=quick, local=local)
    for point in spec.points(quick=quick, hardware=local.hardware):
        key = point_key(point, "measured")
        row = db.get(key)
        if row is not None and row["status"] in DONE and not redo \
                and not (force and row["status"] == "skipped"):
            plan.points.append(PlannedPoint(point, key, "done", row["error"], row["status"]))
            continue
        reason = skip_reason(point, local, force=force)
        plan.points.append(PlannedPoint(point, key, "skip" if reason else "run", reason,
                                        row["status"] if row else None))
    return plan


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
              suite_module: str | None = None, progress: bool = True) -> dict:
    """Run (or finish) a study; returns a summary with every point's recorded result."""
    from llmbench.results.environment import base_environment

    spec = get_study(name)
    local = local_device(device)
    with ResultsDB(db) as store:
        plan = plan_study(spec, store, quick=quick, local=local, force=force, redo=redo)
        to_run = [p for p in plan.points if p.action == "run"]
        run_suite = load_run_suite(suite_module) if to_run else None
        env = {**base_environment(), "study": spec.name, "quick": quick, "device": local.device,
               "device_name": local.name}
        with _progress(progress, len(plan.points)) as bar:
            for p in plan.points:
                bar.describe(f"{spec.name}: {describe(p.point)}")
                if p.action == "done":
                    store.link(spec.name, p.key)
                elif p.action == "skip":
                    store.record(p.point, status="skipped", error=p.reason, environment=env,
                                 study=spec.name)
                else:
                    res = run_one(run_suite, p.point, local, suite_module=suite_module,
                                  extra=baseline_for(store, p.point))
                    store.record(p.point, status=res["status"], metrics=res.get("metrics") or {},
                                 error=res.get("error"),
                                 environment={**env, **(res.get("environment") or {})},
                                 study=spec.name)
                bar.advance()
        rows = [store.get(p.key) for p in plan.points]
        db_path = str(store.path)
    return summary(plan, rows, db_path)


def published_values(ids) -> list[dict]:
    """The rows of reference/published.csv a study is compared with (id, system, model, metric,
    value, unit, source)."""
    from llmbench.results.published import published_rows

    wanted = set(ids)
    keep = ("id", "system", "model", "task", "precision", "batch", "seq_len", "devices", "metric",
            "value", "unit", "source")
    return [{k: r[k] for k in keep} for r in published_rows() if r["id"] in wanted]


def summary(plan: StudyPlan, rows: list[dict], db_path: str) -> dict:
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "oom", "error", "skipped")}
    return {"study": plan.spec.name, "title": plan.spec.title, "suite": plan.spec.suite,
            "source": plan.spec.source, "published": list(plan.spec.published),
            "published_values": published_values(plan.spec.published),
            "quick": plan.quick, "device": plan.local.device, "hardware": plan.local.hardware,
            "db": db_path, "points": len(rows), "ran": plan.count("run"),
            "skipped_now": plan.count("skip"), "already_recorded": plan.count("done"),
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
