"""SIGTERM stops a study and `reproduce` promptly: the point being measured goes back to what it was
(studies/runner.py), finished points stay recorded, no row is left `running`, and reproduce ends the
study it started in its own session (no orphan goes on writing the database).

The regression (a fuzzer's `timeout 20 llmbench study run transformer-block`): SIGTERM raised inside
a measurement was caught by measure/suites.py's broad handler, recorded as an `error` point, and the
sweep went on. Here the real suites.run_workload measures, with a block runner that sleeps past the
first point (`slow_block_mod`, given with --suite-module) so the signal lands inside a measurement.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llmbench.results import ResultsDB

REPO = Path(__file__).resolve().parents[1]

SLOW_BLOCK = textwrap.dedent("""
    import time
    import llmbench.measure.block as block
    from llmbench.measure.suites import run_workload  # the real one, with its error handling

    real_run_block = block.run_block

    def run_block(w, run, device):  # the first point is measured; the next ones take a minute
        if w.batch > 8:
            time.sleep(60)
        return real_run_block(w, run, device)

    block.run_block = run_block
""")


@pytest.fixture
def slow(tmp_path):
    (tmp_path / "slow_block_mod.py").write_text(SLOW_BLOCK)
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}


def _study_argv(db, *extra):
    return ("study", "run", "transformer-block", "--quick", "--device", "cpu", "--db", str(db),
            "--no-progress", *extra)


def _rows(db) -> list[dict]:
    if not db.exists():
        return []
    with ResultsDB(db, readonly=True) as store:
        return store.query()


def _wait_for_running(db, proc, timeout_s=60) -> list[dict]:
    """Until one point is recorded and the next one is being measured (its `running` row)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "finished before it could be terminated"
        rows = _rows(db)
        if any(r["status"] == "ok" for r in rows) and any(r["status"] == "running" for r in rows):
            return rows
        time.sleep(0.1)
    raise AssertionError("no point recorded")


def _check_db(db):
    """One point ok, the interrupted one released (no row), no `running` or `error` row."""
    rows = _rows(db)
    assert [r["status"] for r in rows] == ["ok"], [(r["status"], r["error"]) for r in rows]
    assert rows[0]["point"]["batch"] == 8


def test_run_workload_lets_sigterm_through(monkeypatch):
    """Function level: Terminated (and Ctrl-C) pass through the suites, other failures are results."""
    import llmbench.measure.block as block
    from llmbench.measure.options import RunOptions
    from llmbench.measure.suites import run_workload
    from llmbench.point import Workload
    from llmbench.studies.runner import Terminated

    w = Workload(suite="block", model="gpt2-xl", resize={"n_layers": 1, "d_model": 64, "n_heads": 4},
                 batch=1, seq_len=8)
    run = RunOptions(device="cpu", repeats=1, warmup=0)
    for exc in (Terminated, KeyboardInterrupt):
        def interrupted(*_, exc=exc):
            raise exc()

        monkeypatch.setattr(block, "run_block", interrupted)
        with pytest.raises(exc):
            run_workload(w, run)
    monkeypatch.setattr(block, "run_block", lambda *a: 1 / 0)
    assert run_workload(w, run)[1]["status"] == "error"


def _slow_study(db, env) -> subprocess.Popen:
    """`study run` with the slow suite module, once its second point is running."""
    proc = subprocess.Popen([sys.executable, "-m", "llmbench", *_study_argv(db, "--suite-module", "slow_block_mod")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_running(db, proc)
    return proc


def test_sigterm_stops_the_study_and_keeps_finished_points(slow, tmp_path):
    db = tmp_path / "t.db"
    proc = _slow_study(db, slow)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the study went on after SIGTERM")
    assert time.monotonic() - t0 < 15
    assert proc.returncode == -signal.SIGTERM, err  # 143 in a shell, as before
    _check_db(db)


def test_sigint_stops_the_study_and_keeps_finished_points(slow, tmp_path):
    db = tmp_path / "i.db"
    proc = _slow_study(db, slow)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 130 and "rerun" in err
    _check_db(db)


def _parent(script: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_sigterm_of_reproduce_ends_its_study(slow, tmp_path):
    """reproduce runs each piece in its own session: SIGTERM is passed on to that process group,
    so the study releases its point and exits; reproduce then ends by SIGTERM too."""
    db = tmp_path / "r.db"
    argv = _study_argv(db, "--suite-module", "slow_block_mod")
    parent = _parent(f"""
        import time
        from llmbench.studies.reproduce import Step, run_step
        run_step(Step(name="s", argv={argv!r}, budget_s=100), {str(db)!r}, quick=False,
                 deadline=time.monotonic() + 100)
    """, slow)
    rows = _wait_for_running(db, parent)
    child = next(r for r in rows if r["status"] == "running")["environment"]["claim"]["pid"]
    t0 = time.monotonic()
    parent.send_signal(signal.SIGTERM)
    _, err = parent.communicate(timeout=30)
    assert parent.returncode == -signal.SIGTERM, err
    assert time.monotonic() - t0 < 15
    if not _gone(child, 5):
        os.kill(child, signal.SIGKILL)
        pytest.fail("the study outlived its terminated reproduce")
    _check_db(db)


def test_sigterm_of_reproduce_kills_a_piece_that_ignores_it(tmp_path):
    marker = tmp_path / "child.pid"
    code = (f"import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            f"open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)")
    parent = _parent(f"""
        import time
        import llmbench.studies.reproduce as r
        r.STOP_WAIT_S = 1.0  # the bounded wait (15 s) before SIGKILL, shortened
        r.run_step(r.Step(name="s", argv=(), budget_s=100, python_args=("-c", {code!r})),
                   {str(tmp_path / 'x.db')!r}, quick=False, deadline=time.monotonic() + 100)
    """, {**os.environ, "PYTHONPATH": str(REPO)})
    for _ in range(300):
        if marker.exists() and marker.read_text():
            break
        time.sleep(0.05)
    child = int(marker.read_text())
    parent.send_signal(signal.SIGTERM)
    _, err = parent.communicate(timeout=15)
    assert parent.returncode == -signal.SIGTERM, err
    if not _gone(child, 5):
        os.kill(child, signal.SIGKILL)
        pytest.fail("a piece that ignores SIGTERM outlived reproduce")


@pytest.mark.parametrize("argv", [("--quick", "--full"), ("--full", "--quick"), ("--no-quick", "--full")])
def test_reproduce_quick_and_full_contradict(cli, tmp_path, monkeypatch, argv):
    import llmbench.studies.reproduce as rep

    monkeypatch.setattr(rep, "reproduce", lambda **k: pytest.fail(f"ran with {k}"))  # nothing starts
    code, out, err = cli("reproduce", *argv, "--db", str(tmp_path / "n.db"), "--out", str(tmp_path / "o"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "not allowed" in err
    assert not (tmp_path / "n.db").exists() and not (tmp_path / "o").exists()
