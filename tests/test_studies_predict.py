"""The one prediction planner (studies/predict.py): a study's predict: section -> Workloads ->
predict(w) -> recorded next to the measured and published results of the same workloads."""
import json

import pytest

from llmbench.cli import main
from llmbench.hardware import get_hardware
from llmbench.perfmodel.predict import predict
from llmbench.point import Workload
from llmbench.results import ResultsDB
from llmbench.studies.predict import planned, predict_command, predict_measured, predict_study
from llmbench.studies.spec import studies


def test_predict_gas_records_its_section(tmp_path):
    db = str(tmp_path / "p.db")
    s = predict_study("gas", ["h100-sxm", "cs2"], db)
    # the 8-device sweep, the published configurations, Fig. 6(b) (12) and Fig. 6(c) (5)
    assert s["predicted"] == (4 + 4 + 12 + 5) * 2
    again = predict_study("gas", ["h100-sxm", "cs2"], db)  # idempotent: same keys, replaced
    assert [r["key"] for r in again["results"]] == [r["key"] for r in s["results"]]
    with ResultsDB(db) as store:
        rows = store.query(source="predicted", study="gas")
        assert len(rows) == 50 and store.count() == 50
    # the recorded figure is predict(w)'s, for the recorded workload (global batch, its precision)
    row = next(r for r in rows if r["hardware"] == "h100-sxm" and r["point"]["grad_accum"] == 4
               and r["point"]["devices"] == 8)
    w = Workload.from_dict(row["point"])
    assert (w.batch, w.precision) == (32, "bf16") and row["workload_id"] == w.id()
    assert row["status"] == "ok"
    assert row["metrics"]["tokens_per_s"] == pytest.approx(predict(w).tokens_per_s)
    assert row["metrics"]["tokens_per_s"] == pytest.approx(32 * 1024 / row["metrics"]["step_time_s"])
    assert row["environment"]["command"] == ("llmbench predict train --model gpt2-xl --hardware h100-sxm "
                                             "--batch 32 --seq 1024 --devices 8 --grad-accum 4 --precision bf16")


def test_section_hardware_precision_rule_and_blocks():
    by_hw = {}
    for w, hw, ds in planned(studies()["transformer-block"]):
        assert w.suite == "block" and w.hardware == hw.name and ds is None
        by_hw.setdefault(w.hardware, set()).add(w.precision)
    # the seed studies' accelerators, each at the precisions it has a peak for (point.precision_for)
    assert list(by_hw) == ["a100-40gb", "sn30", "bow-ipu", "gaudi2", "mi250"]  # Figs. 3/4's five
    assert by_hw["a100-40gb"] == {"fp32", "fp16", "bf16"}
    assert by_hw["sn30"] == {"bf16"} and by_hw["bow-ipu"] == {"fp32", "fp16"}  # no peak: not asked twice
    # a block is one layer: predicted (not left out), by predict() itself
    w = next(w for w, _, _ in planned(studies()["transformer-block"]) if w.hardware == "sn30")
    assert predict(w).to_dict()["tokens_per_s"] > 0


def test_oom_is_recorded_with_its_metrics(tmp_path):
    s = predict_study("sparsity", ["a100-40gb"], str(tmp_path / "p.db"))
    by_model = {}
    for r in s["results"]:
        by_model.setdefault(r["model"], set()).add(r["status"])
    assert by_model["gpt3-30b"] == {"oom"}  # 30B x 16 bytes/param of Adam state > 40 GB
    oom = next(r for r in s["results"] if r["model"] == "gpt3-30b")
    assert oom["metrics"]["fits"] is False and oom["metrics"]["tokens_per_s"] > 0


def test_projection_is_tagged_with_its_data_set(tmp_path):
    s = predict_study("time-to-train", ["cs2"], str(tmp_path / "p.db"))
    pile = next(r for r in s["results"] if r["model"] == "gpt3-20b")
    assert pile["environment"]["dataset"] == "pile" and "--dataset pile" in pile["environment"]["command"]
    # one epoch of the Pile (300e9 tokens, perfmodel/project.py) at the predicted tokens/s
    assert pile["metrics"]["epoch_time_s"] == pytest.approx(300e9 / pile["metrics"]["tokens_per_s"])
    w = Workload.from_dict(pile["point"])
    assert pile["key"] != w.key("predicted")  # the data set tags it: the workload alone does not say


def test_measured_workloads_are_predicted_on_their_hardware(tmp_path):
    w = Workload(suite="train", model="gpt2-small", hardware="cpu", precision="fp32", devices=1, batch=6,
                 micro_batch=3, grad_accum=2, seq_len=64, resize={"n_layers": 2})
    with ResultsDB(tmp_path / "m.db") as db:
        db.record(w, metrics={"tokens_per_s": 1000.0}, study="gas")
        db.link("dp-scaling", w.key("measured"))
        db.record(w.with_(hardware="no-such-gpu"), metrics={"tokens_per_s": 1.0}, study="gas")
        logs = []
        assert predict_measured(db, log=logs.append) == 1
        assert "no catalog entry for no-such-gpu" in logs[0]
        pred = db.query(source="predicted")
        assert len(pred) == 1 and pred[0]["workload_id"] == w.id()  # joined with the measurement
        assert sorted(db.studies_of(pred[0]["key"])) == ["dp-scaling", "gas"]
        assert pred[0]["status"] == "ok", pred[0]["error"]
        assert pred[0]["metrics"]["tokens_per_s"] > 0 and pred[0]["point"]["batch"] == 6
        assert "resized: n_layers=2" in pred[0]["environment"]["command"]
        assert [r["source"] for r in db.query(workload_id=w.id())] == ["measured", "predicted"]


def test_predicted_commands_are_real_cli_invocations(cli):
    """The caption command of a prediction runs and gives the recorded number."""
    w = Workload(model="gpt2-xl", hardware="a100-80gb", batch=32, seq_len=1024, devices=2, precision="bf16")
    code, out, err = cli(*predict_command(w).split()[1:], "--json")
    assert code == 0, err
    assert json.loads(out)["tokens_per_s"] == pytest.approx(predict(w).tokens_per_s)
    inf = Workload(suite="infer", model="bert-base", hardware="cs2", batch=4, seq_len=128, precision="bf16")
    code, out, err = cli(*predict_command(inf).split()[1:], "--json")
    assert code == 0, err
    assert json.loads(out)["latency_s_p50"] == pytest.approx(predict(inf).to_dict()["latency_s_p50"])


def test_cli_predict_json_and_unknown_hardware(tmp_path, capsys):
    db = str(tmp_path / "p.db")
    try:
        main(["study", "predict", "bert-infer-batch", "--hardware", "cs2", "--db", db, "--json"])
    except SystemExit as e:
        assert e.code == 0
    s = json.loads(capsys.readouterr().out)
    assert set(s) == {"study", "hardware", "db", "predicted", "counts", "results"}
    assert s["predicted"] == 6 and all(r["source"] == "predicted" for r in s["results"])
    assert all(r["metrics"]["latency_s_p50"] > 0 for r in s["results"] if r["status"] == "ok")
    assert get_hardware("cs2").name == s["hardware"][0]
    with pytest.raises(SystemExit) as e:
        main(["study", "predict", "gas", "--hardware", "nope", "--db", db])
    assert e.value.code == 2 and "unknown hardware" in capsys.readouterr().err
