"""Crash safety: kill -9 a streamed run on a disk store, `--resume`, and the loss curve equals an
uninterrupted run's (subprocesses, tiny model)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

ARGS = ["--model", "tiny", "--layers", "3", "--batch", "2", "--seq", "16", "--json"]


def _train(store, steps, *extra, env=None):
    cmd = [sys.executable, "-m", "llmbench", "stream", "train", *ARGS, "--steps", str(steps),
           "--store", store, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted run (in process: the same ops as the subprocesses, so the same floats)."""
    from llmbench.streaming.config import workload_and_options as S
    from llmbench.streaming.run import run_train

    return run_train(*S(model="tiny", layers=3, batch=2, seq=16, steps=12))["loss"]


def test_injected_kill_then_resume_equals_uninterrupted(tmp_path, reference):
    """SIGKILL in the middle of step 4's store updates (the 13th layer update of the run): the
    store shows step 3, and resuming finishes the curve. (The kill between the flush and the
    manifest flip is tested in test_stream.py.)"""
    store = f"disk:{tmp_path}"
    r = _train(store, 12, env={**os.environ, "LLMBENCH_STREAM_CRASH": "update:13"})
    assert r.returncode == -signal.SIGKILL
    committed = json.loads((tmp_path / "manifest.json").read_text())["step"]
    assert committed == 3  # 4 groups per step: updates 13-16 are step 4's
    r = _train(store, 12, "--resume")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["start_step"] == committed
    assert out["loss"] == pytest.approx(reference, rel=1e-6)


def test_external_kill_9_then_resume_equals_uninterrupted(tmp_path, reference):
    store = f"disk:{tmp_path}"
    cmd = [sys.executable, "-m", "llmbench", "stream", "train", *ARGS, "--steps", "400", "--store", store]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manifest = tmp_path / "manifest.json"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if json.loads(manifest.read_text())["step"] >= 3:
                break
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    committed = json.loads(manifest.read_text())["step"]
    assert 3 <= committed < 400
    # the store was made for 400 steps; the reference covers the first 12
    r = _train(store, max(committed + 2, 12), "--resume")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["loss"][:12] == pytest.approx(reference, rel=1e-6)
