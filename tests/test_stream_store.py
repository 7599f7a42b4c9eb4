"""Safe disk stores (issue 12): one run per store (flock), no silent wipe, never another program's
files, a validated manifest. Each case is a regression test of a defect found by hand."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from llmbench.errors import BadInput
from llmbench.streaming.config import workload_and_options as S
from llmbench.streaming.run import run_train
from llmbench.streaming.store import AdamConfig, ParameterStore

GROUPS = {"ends": {"w": torch.ones(4)}, "block.0": {"x": torch.ones(3, 2)}}
HOLD = ("import sys, time; from pathlib import Path; from llmbench.streaming.storedir import StoreDir; "
        "d = StoreDir.lock(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)")


def _store(tmp_path, **kw):
    return ParameterStore.create(f"disk:{tmp_path}", GROUPS, adam=AdamConfig(), **kw)


def test_second_run_on_a_locked_store_is_refused_with_the_holders_pid(tmp_path):
    _store(tmp_path).close()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(BadInput, match=f"store {tmp_path} is in use by pid {holder.pid}$"):
            ParameterStore.open(f"disk:{tmp_path}")
        with pytest.raises(BadInput, match="in use by pid"):
            _store(tmp_path, overwrite=True)
    finally:
        holder.kill()
        holder.wait()
    ParameterStore.open(f"disk:{tmp_path}").close()  # the lock died with its process


def test_two_runs_in_one_process_conflict_too(tmp_path):
    with _store(tmp_path):
        with pytest.raises(BadInput, match=f"in use by pid {os.getpid()}"):
            ParameterStore.open(f"disk:{tmp_path}")


def test_existing_store_needs_resume_or_overwrite(tmp_path):
    cfg = dict(model="tiny", layers=2, batch=2, seq=16, store=f"disk:{tmp_path}")
    run_train(*S(**cfg, steps=2))
    with pytest.raises(BadInput, match="holds a run at step 2; pass --resume .* or --overwrite"):
        run_train(*S(**cfg, steps=3))
    assert json.loads((tmp_path / "manifest.json").read_text())["step"] == 2  # untouched
    (tmp_path / "notes.txt").write_text("mine")
    again = run_train(*S(**cfg, steps=1, overwrite=True))
    assert again["start_step"] == 0 and len(again["loss"]) == 1
    assert (tmp_path / "notes.txt").read_text() == "mine"  # only the store's files were replaced


def test_a_foreign_manifest_is_refused_not_replaced(tmp_path):
    (tmp_path / "manifest.json").write_text('{"name": "another program"}')
    for kw in ({}, {"overwrite": True}):
        with pytest.raises(BadInput, match="is not an llmbench store manifest"):
            _store(tmp_path, **kw)
    with pytest.raises(BadInput, match="is not an llmbench store manifest"):
        ParameterStore.open(f"disk:{tmp_path}")
    assert (tmp_path / "manifest.json").read_text() == '{"name": "another program"}'


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "ends.0.f32").write_bytes(b"someone's data")
    with pytest.raises(BadInput, match="ends.0.f32 exists and is not part of a store"):
        _store(tmp_path, overwrite=True)
    assert (tmp_path / "ends.0.f32").read_bytes() == b"someone's data"


def _tamper(tmp_path, fn):
    _store(tmp_path).close()
    mf = tmp_path / "manifest.json"
    m = json.loads(mf.read_text())
    fn(m)
    mf.write_text(json.dumps(m))


@pytest.mark.parametrize("tamper, match", [
    (lambda m: m["groups"].update({"../../etc/x": m["groups"].pop("ends")}), "not a plain file-name part"),
    (lambda m: m["groups"].update({"/abs": m["groups"].pop("ends")}), "not a plain file-name part"),
    (lambda m: m["groups"]["ends"].update(numel=5), "numel says"),
    (lambda m: m["groups"]["ends"]["params"][0].__setitem__(1, [2, 2, 2]), "numel says"),
    (lambda m: m.update(step=-1), "'step'"),
    (lambda m: m.update(dtype="<f8"), "'dtype'"),
    (lambda m: m.update(slot=2), "'slot'"),
    (lambda m: m.update(losses=["x"]), "'losses'"),
    (lambda m: m.pop("groups"), "'groups'"),
])
def test_bad_manifests_are_one_line_errors(tmp_path, tamper, match):
    _tamper(tmp_path, tamper)
    with pytest.raises(BadInput, match=match):
        ParameterStore.open(f"disk:{tmp_path}")


def test_traversal_through_a_symlinked_store_file_is_refused(tmp_path):
    store = tmp_path / "st"
    _store(store).close()
    outside = tmp_path / "outside.f32"
    outside.write_bytes((store / "ends.0.f32").read_bytes())
    (store / "ends.0.f32").unlink()
    (store / "ends.0.f32").symlink_to(outside)
    with pytest.raises(BadInput, match="outside the store directory"):
        ParameterStore.open(f"disk:{store}")


def test_truncated_file_and_garbage_manifest(tmp_path):
    _store(tmp_path).close()
    with open(tmp_path / "block.0.1.f32", "r+b") as f:
        f.truncate(8)
    with pytest.raises(BadInput, match="block.0.1.f32 is missing or is not 72 bytes"):
        ParameterStore.open(f"disk:{tmp_path}")
    (tmp_path / "manifest.json").write_bytes(b"\xff\x00garbage")
    with pytest.raises(BadInput, match="not JSON"):
        ParameterStore.open(f"disk:{tmp_path}")


def test_interrupted_creation_needs_overwrite(tmp_path, monkeypatch):
    from llmbench.streaming import store as store_mod

    def boom(self, *a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(store_mod.ParameterStore, "_fill_new", boom)
    with pytest.raises(KeyboardInterrupt):
        _store(tmp_path)
    monkeypatch.undo()
    with pytest.raises(BadInput, match="never completed"):
        ParameterStore.open(f"disk:{tmp_path}")
    with pytest.raises(BadInput, match="was being created"):
        _store(tmp_path)
    _store(tmp_path, overwrite=True).close()
    ParameterStore.open(f"disk:{tmp_path}").close()


def test_store_path_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(BadInput, match="is not a directory"):
        _store(f)
