"""Issue 23's hostile examples kept in CI: the rows of benchmarks/hostile_inputs.py that need no
torch, each run as a user would (a subprocess, its own $LLMBENCH_HOME, killed at 10 s), and the
leftovers of the last session, each with the test that failed before its fix.

    PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_hostile_inputs.py

The benchmark's 2 s goal is a speed figure (it prints SLOW); here a row must not hang, crash, be
accepted where it must be refused, or be refused without naming its file / row / argument.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from llmbench.errors import BadInput

ROOT = Path(__file__).resolve().parents[1]
_PATH = ROOT / "benchmarks" / "hostile_inputs.py"


def _load():
    spec = importlib.util.spec_from_file_location("hostile_inputs", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


H = _load()
CHEAP = [ex for ex in H.examples() if not ex.torch]


@pytest.mark.parametrize("ex", CHEAP, ids=[ex.name for ex in CHEAP])
def test_example(ex):
    o = H.run_one(ex)
    assert o.verdict in ("ok", "SLOW"), f"{o.command}: {o.verdict} ({o.detail}); stderr: {o.stderr[-600:]}"


def test_the_table_holds_every_bullet_of_the_issue():
    whys = {ex.why for ex in H.examples()}
    assert {"work that grows with a number", "files read without validation", "one bad row breaks the store's "
            "readers", "names that escape", "the Python API"} <= whys
    assert len({ex.name for ex in H.examples()}) == len(H.examples())


@pytest.mark.parametrize("code, out, err, refuse, want", [
    (None, "", "", True, "HANG"),
    (2, "", "Traceback (most recent call last):\n  File x\nZeroDivisionError\n", True, "CRASH"),
    (1, "", "error: internal error: boom, please report it\n", True, "CRASH"),
    (0, "{}", "", True, "ACCEPTED"),
    (2, "", "error: one\nerror: two\n", True, "VAGUE"),
    (2, "", "error: bad value\n", True, "VAGUE"),             # names neither the file nor the key
    (2, "", "error: {tmp}/f.json: key bad\n", True, "ok"),
    (2, "", "error: x\n", False, "WRONG"),
    (0, "not json", "", False, "WRONG"),
])
def test_verdicts_can_fail(tmp_path, code, out, err, refuse, want):
    """The verdict of a run: fed a wrong outcome, each check says so."""
    ex = H.Example(name="t", why="t", argv=("x",), refuse=refuse, names=("{tmp}/f.json", "key"),
                   answer=H.answered_json("step_time_s"))
    assert H.verdict(ex, code, 0.1, out, err.replace("{tmp}", str(tmp_path)), tmp_path)[0] == want
    if want == "ok":
        assert H.verdict(ex, code, 3.0, out, err.replace("{tmp}", str(tmp_path)), tmp_path)[0] == "SLOW"


# ---------------------------------------------------------------- the last session's leftovers

def test_serve_requests_take_e_notation_and_refuse_by_the_bound(cli):
    from llmbench.serve.cli import _concurrency, _requests

    assert _requests("1e3") == 1000 and _concurrency("6.4e1") == 64   # was "must be an integer"
    code, out, err = cli("serve", "--model", "gpt2-small", "--hardware", "a100-80gb", "--rate", "1",
                         "--requests", "1e12")
    assert code == 2 and "--requests: 1,000,000,000,000 exceeds the supported 1,000,000" in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_trace_that_is_a_directory_is_named_so(tmp_path):
    from llmbench.queueing.trace import parse_length, read_trace

    with pytest.raises(BadInput, match=f"trace file {tmp_path}: is a directory"):   # was "no file"
        read_trace(tmp_path)
    with pytest.raises(BadInput, match="no such trace file"):
        read_trace(tmp_path / "missing.csv")
    with pytest.raises(BadInput, match="--prompt-len file .*: is a directory"):
        parse_length(f"file:{tmp_path}")


def test_study_specs_are_read_by_the_shared_reader(tmp_path, monkeypatch):
    import llmbench._files as files
    from llmbench.studies import schema

    seen = []
    monkeypatch.setattr(files, "read_small_text", lambda path, what, limit: seen.append((what, limit)) or "x")
    assert schema.read_text(tmp_path / "s.yaml") == "x" and seen == [("study spec", schema.MAX_SPEC_BYTES)]


def test_hardware_without_a_profile_reads_no_profile_file(tmp_path, monkeypatch):
    """The shipped and $LLMBENCH_HOME folders name profiles <hardware>.json: a hardware without one
    reads nothing there (was: every *.json of the folder, at each start-up)."""
    from llmbench.perfmodel import params

    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("LLMBENCH_PROFILES", raising=False)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "other.json").write_text("[not a profile")   # not read: not l40s.json
    read = []
    real = params.read_profile
    monkeypatch.setattr(params, "read_profile", lambda p: read.append(p.name) or real(p))
    params.find_profile.cache_clear()
    try:
        assert params.find_profile("l40s") == (None, {}) and read == []
        assert params.find_profile("a100-80gb")[1]["hardware"] == "a100-80gb" and read == ["a100-80gb.json"]
    finally:
        params.find_profile.cache_clear()


def test_a_user_profiles_folder_is_still_searched_by_hardware(tmp_path, monkeypatch):
    from llmbench.perfmodel import params

    (tmp_path / "mine.json").write_text(json.dumps({"hardware": "l40s", "params": {"compute_max": 0.5}}))
    monkeypatch.setenv("LLMBENCH_PROFILES", str(tmp_path))
    params.find_profile.cache_clear()
    try:
        assert params.find_profile("l40s")[0] == str(tmp_path / "mine.json")
    finally:
        params.find_profile.cache_clear()


@pytest.fixture
def terms_folder(tmp_path, monkeypatch):
    from llmbench.perfmodel import frameworks, params

    monkeypatch.setenv("LLMBENCH_PROFILES", str(tmp_path))
    frameworks.read_terms.cache_clear()
    params.find_profile.cache_clear()
    yield tmp_path
    frameworks.read_terms.cache_clear()
    params.find_profile.cache_clear()


def test_framework_terms_are_read_once_and_validated(terms_folder, monkeypatch):
    import llmbench._files as files
    from llmbench.perfmodel import frameworks as F

    f = terms_folder / F.TERMS_FILE
    f.write_text(json.dumps({"frameworks": {"nemo": {"compute_max": 0.1}}}))
    reads = []
    real = files.read_small_text
    monkeypatch.setattr(files, "read_small_text", lambda *a: reads.append(a[0]) or real(*a))
    assert F.shipped_terms() == F.shipped_terms() == {"nemo": {"compute_max": 0.1}}
    assert len(reads) == 1   # was: read on every call (each validate row)
    for bad, needle in (({"frameworks": {"nemo": {"compute_max": "x"}}}, "frameworks.nemo.compute_max"),
                        ({"frameworks": {"nemo": {"no_such": 1.0}}}, "frameworks.nemo.no_such"),
                        ([1], "must be a JSON object")):
        f.write_text(json.dumps(bad))
        F.read_terms.cache_clear()
        with pytest.raises(BadInput, match=needle) as e:
            F.shipped_terms()
        assert str(f) in str(e.value)


def test_write_frameworks_writes_what_the_reader_reads(terms_folder):
    from llmbench.perfmodel import calibrate as cal
    from llmbench.perfmodel import frameworks as F
    from llmbench.perfmodel.pooled import FRAMEWORK_KEY

    f = terms_folder / F.TERMS_FILE
    f.write_text('{"frameworks": {}}')   # what an earlier fit wrote: a file saying nothing
    assert cal.write_frameworks(f, None, {}) is None and not f.exists()
    terms = {"nemo": {"compute_max": -0.1}}
    assert cal.write_frameworks(f, None, {FRAMEWORK_KEY: terms}) == str(f)
    assert F.shipped_terms() == terms


def test_stream_compare_uses_measure_trains_public_step():
    for path in ("llmbench/streaming/run.py", "llmbench/measure/train.py"):
        assert "_step_fn" not in (ROOT / path).read_text(), path
    assert "import build_model, make_adamw, step_fn" in (ROOT / "llmbench/streaming/run.py").read_text()
