"""calibrate writes fitted profiles to $LLMBENCH_HOME (never into the installed package) unless
ship=True from a source checkout; predict refuses a pipeline degree that does not divide the
layers (issue 12)."""
import hashlib
import json

import pytest

from llmbench.errors import BadInput
from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.perfmodel import calibrate as cal
from llmbench.perfmodel.params import PROFILE_DIR, load_profile
from llmbench.perfmodel.train import as_run, predict_train
from llmbench.point import Workload

HW = "h100-sxm"  # the pooled fit runs on a subset of its rows (fixture `home`)


def _shipped_digest():
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in PROFILE_DIR.glob("*.json")}


@pytest.fixture
def home(tmp_path, monkeypatch):
    from llmbench.perfmodel import validate

    few = [pt for pt in validate.fit_points() if pt["source"].startswith("NVIDIA NeMo")]  # 7 h100 rows
    monkeypatch.setattr(validate, "fit_points", lambda: few)  # the pooled fit on a subset: fast
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LLMBENCH_PROFILES", raising=False)
    yield tmp_path / "home"
    load_profile.cache_clear()


def test_published_profiles_go_to_llmbench_home_not_the_package(home):
    before = _shipped_digest()
    (rep,) = cal.calibrate_published(write=True, only=HW)
    written = home / "profiles" / f"{HW}.json"
    assert rep["written"] == str(written) and json.loads(written.read_text())["hardware"] == HW
    assert _shipped_digest() == before
    assert [p.name for p in written.parent.iterdir()] == [f"{HW}.json"]  # no temp file left


def test_llmbench_profiles_folder_wins_and_is_read_back(home, tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBENCH_PROFILES", str(tmp_path / "mine"))
    (rep,) = cal.calibrate_published(write=True, only=HW)
    assert rep["written"] == str(tmp_path / "mine" / f"{HW}.json")
    load_profile.cache_clear()
    assert load_profile(HW)["source"].startswith("llmbench calibrate --published")


def test_dry_run_writes_nothing(home):
    (rep,) = cal.calibrate_published(write=False, only=HW)
    assert "written" not in rep and not home.exists()


def test_ship_needs_a_source_checkout(home, tmp_path, monkeypatch):
    installed = tmp_path / "site-packages" / "llmbench"
    installed.mkdir(parents=True)
    monkeypatch.setattr(cal, "PACKAGE_DIR", installed)
    before = _shipped_digest()
    with pytest.raises(BadInput, match="source checkout") as e:
        cal.calibrate_published(write=True, only=HW, ship=True)
    assert str(home / "profiles") in str(e.value) and _shipped_digest() == before
    # a checkout (.git next to the package): the shipped folder is rewritten
    src = tmp_path / "src"
    (src / "llmbench" / "perfmodel" / "profiles").mkdir(parents=True)
    (src / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git is a file
    monkeypatch.setattr(cal, "PACKAGE_DIR", src / "llmbench")
    monkeypatch.setattr(cal, "PROFILE_DIR", src / "llmbench" / "perfmodel" / "profiles")
    (rep,) = cal.calibrate_published(write=True, only=HW, ship=True)
    assert rep["written"] == str(src / "llmbench" / "perfmodel" / "profiles" / f"{HW}.json")


def test_write_profile_to_a_missing_folder_is_one_line(tmp_path, home):
    (rep,) = cal.calibrate_published(write=False, only=HW)
    with pytest.raises(BadInput, match="cannot write the profile .*nope"):
        cal.write_profile(tmp_path / "nope" / "p.json", rep, "test")
    assert not (tmp_path / "nope").exists()


# ---------------------------------------------------------------- pipeline degree

def _pp_run(spec, hw, *, n: int, pp: int) -> Workload:
    """n sequences of 1,024 tokens on n devices at pipeline degree pp, the rest plain (as_run)."""
    return as_run(Workload(model=spec.name, hardware=hw.name, batch=n, seq_len=1024, devices=n, layout={"pp": pp}), hw)


def test_pipeline_degree_must_divide_the_layers():
    spec, hw = get_model("gpt2-xl"), get_hardware("a100-80gb")
    assert spec.n_layers == 48
    with pytest.raises(BadInput, match="pp 7 does not split gpt2-xl's 48 layers .* nearest valid pp: 6 or 8"):
        predict_train(spec, hw, _pp_run(spec, hw, n=56, pp=7))
    with pytest.raises(BadInput, match="nearest valid pp: 24 or 48"):
        predict_train(spec, hw, _pp_run(spec, hw, n=47, pp=47))
    assert predict_train(spec, hw, _pp_run(spec, hw, n=48, pp=8)).step_time_s > 0
