"""Bad input that once passed, found by a fuzz of every command (2026-12-05): an output path that is
the results database, NaN and infinite numbers, a profile or model config that says nothing or
contradicts itself, a mode and an offload that contradict each other, and a user hardware file
that `predict` ran but `plan` and `project` looked up again by its name. Each is one line, exit 2,
and nothing recorded is lost; the hardware file works everywhere."""
from __future__ import annotations

import json

import pytest

from llmbench.hardware.lookup import init_toml

TRAIN = ["--model", "gpt2-small", "--batch", "8", "--seq", "1024"]


def _one_line(code, err):
    return code == 2 and len(err.strip().splitlines()) == 1


@pytest.fixture
def db(cli, tmp_path):
    path = tmp_path / "r.db"
    code, _, _ = cli("predict", "train", *TRAIN, "--hardware", "a100-80gb", "--db", str(path))
    assert code == 0 and path.exists()
    return path


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_export_onto_the_database_is_refused_and_the_results_stay(cli, db, suffix):
    code, _, err = cli("results", "export", "--db", str(db), "-o", str(db) + suffix)
    assert _one_line(code, err) and "results database" in err
    code, out, _ = cli("results", "list", "--db", str(db), "--json")
    assert code == 0 and len(json.loads(out)) == 1


def test_report_into_a_file_is_refused(cli, db):
    code, _, err = cli("report", "--db", str(db), "--out", str(db))
    assert _one_line(code, err) and "is a file" in err
    assert cli("results", "list", "--db", str(db), "--json")[0] == 0


@pytest.mark.parametrize("argv", [
    ["project", *TRAIN, "--hardware", "a100-80gb", "--dataset", "nan"],
    ["project", *TRAIN, "--hardware", "a100-80gb", "--dataset", "inf"],
    ["predict", "train", *TRAIN, "--hardware", "a100-80gb", "--mode", "sram_pipeline"],
    ["predict", "train", *TRAIN, "--hardware", "a100-80gb", "--offload", "weights", "--mode", "resident"],
    ["predict", "train", *TRAIN, "--hardware", "a100-80gb", "--offload", "none",
     "--mode", "weight_streaming"],
])
def test_contradictory_or_non_finite_options_are_one_line(cli, argv):
    code, out, err = cli(*argv)
    assert _one_line(code, err) and not out


def test_an_infinite_price_is_refused(cli, db):
    code, _, err = cli("report", "--db", str(db), "--price", "h100-sxm=inf")
    assert _one_line(code, err) and "positive price" in err


def test_a_profile_that_sets_nothing_is_refused(cli, tmp_path):
    prof = tmp_path / "empty.json"
    prof.write_text("{}")
    code, _, err = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                       "--profile", str(prof))
    assert _one_line(code, err) and "sets no parameters" in err


def test_a_config_whose_heads_do_not_divide_its_width_is_refused(cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 770, "num_hidden_layers": 2,
                               "num_attention_heads": 12, "vocab_size": 1000, "intermediate_size": 3072,
                               "max_position_embeddings": 1024}))
    code, _, err = cli("models", "show", str(cfg))
    assert _one_line(code, err) and "770" in err and "12" in err
    cfg.write_text(cfg.read_text().replace("770", "768"))  # the same config with a width the heads divide
    assert cli("models", "show", str(cfg))[0] == 0


@pytest.mark.parametrize("argv", [
    ["predict", "train", *TRAIN],
    ["plan", *TRAIN, "--devices", "2"],
    ["project", *TRAIN, "--dataset", "owt"],
    ["predict", "infer", "--model", "llama-3.1-8b"],
])
def test_a_user_hardware_file_runs_every_prediction(cli, tmp_path, argv):
    hw = tmp_path / "my.toml"
    hw.write_text(init_toml("h100-sxm", name="myacc"))
    code, out, err = cli(*argv, "--hardware", str(hw))
    assert code == 0, err
    assert "myacc" in out or "calibration" in out


@pytest.mark.parametrize("hw, engine, ok", [
    ("mi300x", "trtllm", False), ("h100-sxm", "vllm-rocm", False), ("cs2", "vllm", False),
    ("h100-sxm", "jetstream", False), ("mi300x", "vllm", True), ("gaudi2", "tgi", True),
    ("cs3", "native", True),
])
def test_an_engine_runs_only_where_it_runs(cli, hw, engine, ok):
    code, out, err = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", hw, "--engine", engine)
    assert code == 0 if ok else _one_line(code, err) and "--engine" in err


def test_calibrate_published_refuses_an_out_it_would_ignore(cli, tmp_path):
    code, _, err = cli("calibrate", "--published", "--dry-run", "--out", str(tmp_path / "p.json"))
    assert _one_line(code, err) and "--out" in err and not (tmp_path / "p.json").exists()


def test_plans_that_differ_in_any_input_are_recorded_apart(cli, tmp_path):
    db = str(tmp_path / "p.db")
    base = ["plan", "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--rate", "4",
            "--slo-ttft-ms", "500", "--slo-tpot-ms", "50", "--db", db, "--json"]
    for extra in ([], ["--kv-precision", "fp8"], ["--prompt-len", "512"], []):
        assert cli(*base, *extra)[0] == 0
    code, out, _ = cli("results", "list", "--db", db, "--json")
    assert code == 0 and len(json.loads(out)) == 3  # the last run repeats the first: one point
