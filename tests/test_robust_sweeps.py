"""Crash-proof sweeps: a point that kills its process is recorded `crashed` on the next run and
later points still run; two runs of one study at once measure each point once; the claim's
liveness test (pid, host, boot, process start time). A fast fake suite stands in for torch."""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llmbench.point import Workload
from llmbench.results import ResultsDB
from llmbench.results.claims import LEAVE, RUN, claim, holder_alive, identity
from llmbench.studies.runner import plan_study, run_study
from llmbench.studies.spec import studies

REPO = Path(__file__).resolve().parents[1]
STUDY = "transformer-block"  # quick: 4 fp32 points run on a CPU, 8 bf16/fp16 points are skipped

SUITE = textwrap.dedent("""
    import os, time
    ARRIVED = []
    def _barrier(folder, n=2, timeout_s=60):
        # the first point of each process waits until n processes are measuring at once
        if ARRIVED:
            return
        ARRIVED.append(1)
        open(os.path.join(folder, f"arrived-{os.getpid()}"), "w").close()
        deadline = time.monotonic() + timeout_s
        while len([f for f in os.listdir(folder) if f.startswith("arrived-")]) < n:
            assert time.monotonic() < deadline, "the other run never started measuring"
            time.sleep(0.02)
    def run_workload(w, run):
        if os.environ.get("SWEEP_BARRIER"):
            _barrier(os.environ["SWEEP_BARRIER"])
        with open(os.environ["SWEEP_LOG"], "a") as f:
            f.write(f"{os.getpid()} batch={w.batch}\\n")
        if w.batch == int(os.environ.get("SWEEP_KILL_BATCH", "-1")):
            os.kill(os.getpid(), 9)  # as the kernel OOM killer would
        time.sleep(float(os.environ.get("SWEEP_SLEEP", "0")))
        return w, {"status": "ok", "error": None, "environment": {},
                   "metrics": {"step_time_s": 0.01, "pid": os.getpid()}}
""")


@pytest.fixture
def suite(tmp_path, monkeypatch):
    (tmp_path / "sweep_suite_mod.py").write_text(SUITE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SWEEP_LOG", str(tmp_path / "calls.log"))
    return tmp_path


def _calls(tmp_path):
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def _cmd(db):
    return [sys.executable, "-m", "llmbench", "study", "run", STUDY, "--quick", "--device", "cpu",
            "--db", str(db), "--suite-module", "sweep_suite_mod", "--no-progress", "--json"]


def _env(tmp_path, **kw):
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}",
            "SWEEP_LOG": str(tmp_path / "calls.log"), **{k: str(v) for k, v in kw.items()}}


def test_point_that_kills_its_process_is_recorded_crashed_and_later_points_run(suite, tmp_path):
    db = tmp_path / "k.db"
    env = _env(tmp_path, SWEEP_KILL_BATCH=16)  # the 2nd of batch 8, 16, 32, 64
    first = subprocess.run(_cmd(db), env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == -signal.SIGKILL
    with ResultsDB(db, readonly=True) as store:
        by_batch = {r["point"]["batch"]: r for r in store.query() if r["point"]["precision"] == "fp32"}
    assert by_batch[8]["status"] == "ok" and by_batch[16]["status"] == "running"
    assert 32 not in by_batch and 64 not in by_batch
    assert by_batch[16]["environment"]["claim"]["host"] == socket.gethostname()

    # the rerun, with the killer still in place, does not die on it again
    second = subprocess.run(_cmd(db), env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    s = json.loads(second.stdout)
    assert s["counts"]["ok"] == 3 and s["counts"]["crashed"] == 1 and s["crashed_left"] == 1
    assert s["ran"] == 2 and s["counts"]["running"] == 0
    (crashed,) = [r for r in s["results"] if r["status"] == "crashed"]
    assert crashed["point"]["batch"] == 16 and "died without a result" in crashed["error"]
    assert [c.split()[1] for c in _calls(tmp_path)] == ["batch=8", "batch=16", "batch=32", "batch=64"]

    # a third run leaves it crashed; retry_crashed measures it again (now it survives)
    s = run_study(STUDY, quick=True, device="cpu", db=str(db), suite_module="sweep_suite_mod",
                  progress=False)
    assert s["ran"] == 0 and s["counts"]["crashed"] == 1
    s = run_study(STUDY, quick=True, device="cpu", db=str(db), suite_module="sweep_suite_mod",
                  retry_crashed=True, progress=False)
    assert s["ran"] == 1 and s["counts"]["ok"] == 4 and s["counts"]["crashed"] == 0


def test_two_concurrent_runs_measure_each_point_once(suite, tmp_path):
    db = tmp_path / "c.db"
    (tmp_path / "barrier").mkdir()
    env = _env(tmp_path, SWEEP_SLEEP=0.2, SWEEP_BARRIER=tmp_path / "barrier")
    procs = [subprocess.Popen(_cmd(db), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    calls = _calls(tmp_path)
    batches = sorted(int(c.split("batch=")[1]) for c in calls)
    assert batches == [8, 16, 32, 64]  # each point measured exactly once over both runs
    summaries = [json.loads(o[0]) for o in outs]
    assert sum(s["ran"] for s in summaries) == 4 and all(s["ran"] >= 1 for s in summaries)
    assert len({c.split()[0] for c in calls}) == 2  # both processes measured (the barrier)
    with ResultsDB(db, readonly=True) as store:
        rows = store.query(study=STUDY)
        assert len(rows) == 12 and {r["status"] for r in rows} == {"ok", "skipped"}
        assert store.integrity_check() == "ok"


def test_a_point_running_in_a_live_process_is_left_alone(suite, tmp_path):
    db = tmp_path / "b.db"
    spec = studies()[STUDY]
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with ResultsDB(db) as store:
            point = plan_study(spec, store, quick=True, device="cpu").points[0].workload

            def take(row):
                return RUN, None
            claim(store, point, take, study=STUDY)
            # make the claim the other (live) process's, as a second sweep's would be
            row = store.get(store.query()[0]["key"])
            row["environment"]["claim"] = identity(other.pid)
            with store.transaction():
                store.put_row(row)
            plan = plan_study(spec, store, quick=True, device="cpu")
            assert plan.points[0].action == "busy" and f"pid {other.pid}" in plan.points[0].reason
        s = run_study(STUDY, quick=True, device="cpu", db=str(db), suite_module="sweep_suite_mod",
                      progress=False)
        assert s["running_elsewhere"] == 1 and s["ran"] == 3 and s["counts"]["running"] == 1
        assert "batch=8" not in " ".join(_calls(tmp_path))
    finally:
        other.kill()
        other.wait()
    # its process is gone: the next plan sees it crashed, a run records that
    with ResultsDB(db) as store:
        assert plan_study(spec, store, quick=True, device="cpu").points[0].action == "crashed"
    s = run_study(STUDY, quick=True, device="cpu", db=str(db), suite_module="sweep_suite_mod",
                  progress=False)
    assert s["counts"]["crashed"] == 1 and s["ran"] == 0


def test_holder_alive_checks_host_boot_pid_and_start_time():
    me = identity()
    assert holder_alive(me)
    assert not holder_alive({**me, "proc_start": (me["proc_start"] or 0) + 1})  # pid reused
    assert not holder_alive({**me, "boot_id": "another-boot"})
    assert holder_alive({**me, "host": "some-other-host", "pid": 999999999})  # cannot know: alive
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not holder_alive(identity(dead.pid)) and not holder_alive({**me, "pid": dead.pid})
    assert not holder_alive(None) and not holder_alive({"pid": "1"})


def test_zombie_holder_is_dead(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    holder = identity(child.pid)
    deadline = time.monotonic() + 10
    while holder_alive(holder) and time.monotonic() < deadline:  # exited, not yet reaped
        time.sleep(0.02)
    assert not holder_alive(holder) and child.poll() == 0


@pytest.mark.parametrize("point", [{"suite": "train", "model": "m", "batch": 1},
                                   Workload(model="gpt2-small", hardware="cpu", batch=1)])
def test_a_crash_during_a_redo_keeps_the_previous_result(tmp_path, point):
    with ResultsDB(tmp_path / "r.db") as store:
        store.record(point, metrics={"tokens_per_s": 10.0})
        claim(store, point, lambda row: (RUN, None))
        row = store.query()[0]
        assert row["status"] == "running"
        assert row["environment"]["previous"]["metrics"] == {"tokens_per_s": 10.0}
        row["environment"]["claim"]["pid"] = 2**22 + 12345  # a pid that is not running
        with store.transaction():
            store.put_row(row)
        action, _, seen = claim(store, point, lambda row: (LEAVE, "crashed"))
        assert action == LEAVE and seen["status"] == "crashed"
        row = store.query()[0]
        assert row["status"] == "crashed" and row["environment"]["previous"]["status"] == "ok"
