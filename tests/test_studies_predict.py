"""Predictions of a study's full-size points recorded next to measured and published values."""
import json

import pytest

from llmbench.cli import main
from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.results import ResultsDB
from llmbench.studies.predict import hardware_precision, predict_study


def test_predict_gas_records_every_point_on_every_hardware(tmp_path):
    db = str(tmp_path / "p.db")
    s = predict_study("gas", ["h100-sxm", "cs2"], db)
    assert s["predicted"] == 4 * 2 and s["block_points_left_out"] == 0
    again = predict_study("gas", ["h100-sxm", "cs2"], db)  # idempotent: same keys, replaced
    assert [r["key"] for r in again["results"]] == [r["key"] for r in s["results"]]
    with ResultsDB(db) as store:
        rows = store.query(source="predicted", study="gas")
        assert len(rows) == 8 and store.count() == 8
    # the recorded figure is the analytical model's, with the global batch = micro x GAS x devices
    from llmbench.perfmodel import predict_train
    row = next(r for r in rows if r["hardware"] == "h100-sxm" and r["point"]["grad_accum"] == 4)
    direct = predict_train(get_model("gpt2-xl"), get_hardware("h100-sxm"), batch=16 * 4, seq=1024,
                           devices=1, precision="bf16", grad_accum=4)
    assert row["status"] == "ok"
    assert row["metrics"]["tokens_per_s"] == pytest.approx(direct.tokens_per_s)
    assert row["metrics"]["tokens_per_s"] == pytest.approx(64 * 1024 / row["metrics"]["step_time_s"])


def test_block_points_are_left_out_and_oom_is_recorded(tmp_path):
    db = str(tmp_path / "p.db")
    assert predict_study("transformer-block", ["h100-sxm"], db)["block_points_left_out"] == 12
    s = predict_study("sparsity", ["a100-40gb"], db)
    by_model = {}
    for r in s["results"]:
        by_model.setdefault(r["model"], set()).add(r["status"])
    assert by_model["gpt3-30b"] == {"oom"}  # 30B x 16 bytes/param of Adam state > 40 GB


def test_precision_falls_back_to_the_hardwares_own():
    assert hardware_precision(get_hardware("h100-sxm"), "fp32") == "fp32"
    assert hardware_precision(get_hardware("sn30"), "fp32") == "bf16"  # no fp32 peak in the catalog


def test_cli_predict_json_and_unknown_hardware(tmp_path, capsys):
    db = str(tmp_path / "p.db")
    try:
        main(["study", "predict", "bert-infer-batch", "--hardware", "cs2", "--db", db, "--json"])
    except SystemExit as e:
        assert e.code == 0
    s = json.loads(capsys.readouterr().out)
    assert set(s) == {"study", "hardware", "db", "predicted", "block_points_left_out", "counts", "results"}
    assert s["predicted"] == 10 and all(r["source"] == "predicted" for r in s["results"])
    assert all(r["metrics"]["latency_s_p50"] > 0 for r in s["results"] if r["status"] == "ok")
    with pytest.raises(SystemExit) as e:
        main(["study", "predict", "gas", "--hardware", "nope", "--db", db])
    assert e.value.code == 2 and "unknown hardware" in capsys.readouterr().err
