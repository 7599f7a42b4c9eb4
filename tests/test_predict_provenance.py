"""Every prediction says which calibration made it and how far off such predictions were (issue 20):
the calibration block and band (perfmodel/provenance.py), --profile FILE, the memory reserve
(perfmodel/reserve.py, --memory-fraction) and the MFU convention. Fast: no fit runs here."""
from __future__ import annotations

import json

import pytest

from llmbench.hardware import get_hardware
from llmbench.perfmodel import provenance as P
from llmbench.perfmodel.params import load_profile
from llmbench.perfmodel.reserve import usable_bytes

TRAIN = ["predict", "train", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "8", "--batch", "64",
         "--seq", "8192"]


@pytest.fixture(autouse=True)
def _no_user_profiles(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LLMBENCH_PROFILES", raising=False)
    load_profile.cache_clear()
    yield
    load_profile.cache_clear()


def test_train_json_carries_calibration_band_and_mfu_convention(cli, monkeypatch):
    from llmbench.perfmodel import pooled

    monkeypatch.setattr(pooled, "solve", lambda *a, **k: pytest.fail("a prediction must not fit"))
    code, out, err = cli(*TRAIN, "--json")
    assert code == 0, err
    d = json.loads(out)
    c = d["calibration"]
    assert c["profile"] == "h100-sxm" and c["origin"] == "shipped" and c["fitted_on_rows"] >= 20 and c["sources"]
    assert c["loso_scope"] == "h100-sxm training" and c["band_rows"] >= P.MIN_BAND_ROWS
    assert c["tokens_per_s_low"] < d["tokens_per_s"] < c["tokens_per_s_high"]
    assert 0 < c["loso_median_abs_error"] < 0.5
    assert d["mfu_causal"] < d["mfu"] and "T x T" in d["mfu_convention"]


def test_band_is_the_p10_p90_of_comparable_rows():
    rows = [{"hardware": "h100-sxm", "kind": "gpu", "task": "train", "rate_error": e}
            for e in (-0.2, -0.1, 0.0, 0.1, 0.2, 0.3)] + \
           [{"hardware": "a100-80gb", "kind": "gpu", "task": "train", "rate_error": 5.0}]
    errs, scope = P.comparable(rows, "h100-sxm", "gpu", "train")
    assert scope == "h100-sxm training" and 5.0 not in errs
    errs, scope = P.comparable(rows, "l40s", "gpu", "train")  # no rows of its own: its kind's
    assert scope == "gpu family training" and len(errs) == 7
    assert P._pct([-0.2, -0.1, 0.0, 0.1, 0.2, 0.3], 0.9) == pytest.approx(0.25)


def test_text_prints_the_band_beside_tokens_per_s(cli):
    code, out, _ = cli(*TRAIN)
    line = next(ln for ln in out.splitlines() if ln.startswith("tokens/s"))
    assert code == 0 and "LOSO p10-p90 on" in line and "h100-sxm training rows" in line
    assert "calibration" in out and "(shipped)" in out and "% of 80.0 GiB" in out


def test_uncalibrated_hardware_says_so(cli):
    code, out, _ = cli("predict", "train", "--model", "gpt2-small", "--hardware", "l40s", "--batch", "8", "--seq",
                       "1024", "--json")
    c = json.loads(out)["calibration"]
    assert code == 0 and c["profile"] is None and c["origin"] == "uncalibrated priors"
    assert c["loso_scope"].startswith("uncalibrated priors") and "gpu family" in c["loso_scope"]


def test_profile_file_by_any_name(cli, tmp_path, monkeypatch):
    prof = tmp_path / "my-h100.json"  # what calibrate --out writes: named by the user
    prof.write_text(json.dumps({"hardware": "h100-sxm", "params": {"compute_max": 0.3}, "points": 3,
                                "sources": ["my runs"]}))
    base = json.loads(cli(*TRAIN, "--json")[1])
    code, out, err = cli(*TRAIN, "--profile", str(prof), "--json")
    d = json.loads(out)
    assert code == 0, err
    assert d["calibration"]["origin"] == "user file (--profile)" and d["calibration"]["sources"] == ["my runs"]
    assert d["tokens_per_s"] < 0.7 * base["tokens_per_s"]
    # $LLMBENCH_PROFILES: the file itself, or its folder (found by its "hardware", not its name)
    for where in (prof, tmp_path):
        monkeypatch.setenv("LLMBENCH_PROFILES", str(where))
        load_profile.cache_clear()
        d = json.loads(cli(*TRAIN, "--json")[1])
        assert d["calibration"]["origin"] == "user file" and d["tokens_per_s"] == pytest.approx(
            json.loads(out)["tokens_per_s"])


def test_profile_of_another_hardware_is_refused(cli, tmp_path):
    prof = tmp_path / "a100.json"
    prof.write_text(json.dumps({"hardware": "a100-80gb", "params": {}}))
    code, _, err = cli(*TRAIN, "--profile", str(prof))
    assert code == 2 and "a100-80gb, not h100-sxm" in err and len(err.strip().splitlines()) == 1


def test_planned_layout_stays_under_the_reserve(cli):
    hw = get_hardware("h100-sxm")
    cap = hw.device_memory.capacity_bytes
    assert usable_bytes(hw) == pytest.approx(cap - max(2 * 1024 ** 3, 0.05 * cap))
    d = json.loads(cli(*TRAIN, "--json")[1])
    assert d["peak_mem_bytes"] <= usable_bytes(hw)
    full = json.loads(cli(*TRAIN, "--memory-fraction", "1.0", "--json")[1])
    assert full["peak_mem_bytes"] > usable_bytes(hw)  # without the reserve the planner fills the device
    code, out, _ = cli("plan", *TRAIN[2:], "--top", "3", "--json")
    assert code == 0 and all(p["peak_mem_bytes"] <= usable_bytes(hw) for p in json.loads(out)["layouts"])
    assert usable_bytes(get_hardware("cs2")) == get_hardware("cs2").memory_tiers[0].capacity_bytes


def test_project_carries_hours_band(cli):
    code, out, _ = cli("project", "--model", "gpt3-20b", "--hardware", "cs2", "--dataset", "pile", "--batch", "256",
                       "--seq", "2048", "--precision", "cbf16", "--json")
    d = json.loads(out)
    assert code == 0 and d["hours_low"] < d["hours"] < d["hours_high"] and d["calibration"]["profile"] == "cs2"


def test_framework_is_stated_and_selects_its_mechanism(cli):
    args = ["predict", "train", "--model", "megatron-1.7b", "--hardware", "a100-80gb", "--devices", "32", "--batch",
            "512", "--seq", "2048", "--tp", "1", "--pp", "1", "--zero", "0", "--recompute", "full", "--micro-batch",
            "1", "--precision", "fp16", "--json"]
    fused = json.loads(cli(*args)[1])
    old = json.loads(cli(*args, "--framework", "megatron-2021")[1])
    assert fused["framework"].startswith("fused") and "default" in fused["framework"]
    assert old["framework"].startswith("megatron-2021")
    # unfused attention at hidden 2304, seq 2048: the scores' memory passes cost a third of the step
    assert 0.5 < old["tokens_per_s"] / fused["tokens_per_s"] < 0.8
    code, out, _ = cli(*args[:-1])
    assert code == 0 and "framework           fused" in out


def test_megatron_core_hides_tensor_parallel_communication_under_the_gemms(cli):
    """--framework megatron (Megatron-Core --tp-comm-overlap): at tp 8 the TP collectives run under
    the GEMMs, so the step is shorter than with them between the GEMMs, by at most the TP time; at
    tp 1 there is nothing to hide and the two agree."""
    common = ["predict", "train", "--hardware", "h100-sxm", "--seq", "4096", "--zero", "1", "--recompute", "none",
              "--micro-batch", "1", "--json"]
    cases = ((["--model", "llama-2-70b", "--devices", "64", "--batch", "128", "--tp", "8", "--pp", "4"], True),
             (["--model", "llama-2-7b", "--devices", "8", "--batch", "64", "--tp", "1", "--pp", "1"], False))
    for args, faster in cases:
        fused, mc = (json.loads(cli(*common, *args, *extra)[1]) for extra in ((), ("--framework", "megatron")))
        assert mc["framework"].startswith("megatron:"), mc["framework"]
        if faster:
            assert mc["tokens_per_s"] > 1.05 * fused["tokens_per_s"]
        else:
            assert mc["tokens_per_s"] == pytest.approx(fused["tokens_per_s"], rel=1e-9)


@pytest.mark.parametrize("content", ["[1, 2]", "not json", '{"params": [1]}', '{"params": {"compute_max": "x"}}'])
def test_a_bad_profile_file_is_one_line(cli, tmp_path, content):
    prof = tmp_path / "p.json"
    prof.write_text(content)
    code, _, err = cli(*TRAIN, "--profile", str(prof))
    assert code == 2 and len(err.strip().splitlines()) == 1
