"""The three engines' results of one workload are one query apart (issue 19): `measure train`'s row,
the prediction `predict train` records, and the rows of `stream train` and `stream compare`, each
written by its engine's own record function, come back from one `results list --workload-of KEY`.
No model is trained here: the measured metrics are a run's figures, the prediction is a real one."""
from __future__ import annotations

import json

import pytest

from llmbench.point import Workload
from llmbench.results.store import ResultsDB, same_run

BASE = Workload(model="gpt2-small", batch=2, seq_len=32)
#: what the runs of docs/results.md measured (tokens/s, CPU, loaded machine): distinct on purpose,
#: so a row one engine overwrote with another's shows
MEASURE = {"tokens_per_s": 45.4, "step_time_s": 1.41}
STREAM = {"tokens_per_s": 23.5, "step_time_s": 2.72, "loss": [10.89, 11.02], "warmup_s": 3.1}
COMPARE = {"streamed_tokens_per_s": 21.0, "resident_tokens_per_s": 40.2, "streamed_step_time_s": 3.05,
           "resident_step_time_s": 1.59, "streamed_loss": [10.89, 11.02], "resident_loss": [10.89, 11.02]}


@pytest.fixture
def measured_workload():
    """BASE as `measure train --device cpu` resolves it (its own resolver)."""
    torch = pytest.importorskip("torch")
    from llmbench.measure.options import RunOptions
    from llmbench.measure.suites import resolve_workload

    return resolve_workload(BASE, torch.device("cpu"), RunOptions(device="cpu"))


def _record_all(db: str, w: Workload, cli) -> str:
    """Each engine's rows of `w` through its own record function; returns measure's key."""
    from llmbench.measure.cli import record as measure_record
    from llmbench.streaming.run import record as stream_record

    key = measure_record(w, {"status": "ok", "metrics": MEASURE, "info": {}, "error": None}, db)
    code, _, err = cli("predict", "train", "--model", w.model, "--hardware", w.hardware, "--batch", str(w.batch),
                       "--seq", str(w.seq_len), "--precision", w.precision, "--db", db)
    assert code in (0, None), err
    streamed = w.with_(mode="weight_streaming").to_dict()
    stream_record(db, {"device": "cpu", "workload": streamed, **STREAM})
    stream_record(db, {"device": "cpu", "workload": streamed, **COMPARE})
    measure_record(w.with_(batch=4, micro_batch=4), {"status": "ok", "metrics": MEASURE, "info": {}, "error": None},
                   db)  # another workload: never in the answer
    return key


def test_one_query_gives_every_engines_results(tmp_path, measured_workload, cli):
    db = str(tmp_path / "r.db")
    key = _record_all(db, measured_workload, cli)
    with ResultsDB(db, readonly=True) as store:
        rows = store.query(workload_of=key[:10])
        assert store.count() == 6
        by_id = store.query(workload_id=measured_workload.id())
    seen = sorted((r["source"], r["point"]["layout"]["mode"], r["metrics"].get("tokens_per_s")) for r in rows)
    predicted = next(r for r in rows if r["source"] == "predicted")
    assert seen == sorted([("measured", "resident", 45.4),           # measure train, not overwritten
                           ("measured", "weight_streaming", 23.5),   # stream train
                           ("measured", "weight_streaming", 21.0),   # stream compare, streamed side
                           ("measured", "resident", 40.2),           # stream compare, resident side
                           ("predicted", predicted["point"]["layout"]["mode"],
                            predicted["metrics"]["tokens_per_s"])])  # predict train (the planner's mode)
    assert predicted["environment"] and predicted["point"]["batch"] == 2
    # the workload id alone joins the resident runs only: the streamed ones are another mode
    assert {r["point"]["layout"]["mode"] for r in by_id} == {"resident"} and len(by_id) < len(rows)
    code, out, err = cli("results", "list", "--db", db, "--workload-of", key[:10], "--json")
    assert code in (0, None) and sorted(r["key"] for r in json.loads(out)) == sorted(r["key"] for r in rows)


def test_same_run_ignores_only_how_it_runs(measured_workload):
    w = measured_workload.to_dict()
    assert same_run(w, measured_workload.with_(mode="weight_streaming", offload="weights").to_dict())
    assert same_run(w, measured_workload.with_(ep=1).to_dict())
    for other in (dict(batch=4, micro_batch=4), dict(precision="bf16"), dict(zero=1), dict(recompute="full"),
                  dict(resize={"n_layers": 2})):
        assert not same_run(w, measured_workload.with_(**other).to_dict()), other


def test_a_bad_key_is_one_line(tmp_path, measured_workload, cli):
    db = str(tmp_path / "r.db")
    from llmbench.measure.cli import record as measure_record

    key = measure_record(measured_workload, {"status": "ok", "metrics": MEASURE, "info": {}, "error": None}, db)
    with ResultsDB(db) as store:
        plain = store.record({"suite": "ceilings", "hardware": "cpu"}, metrics={"x": 1.0})
    for arg, words in (("zz", "a (prefix of a) hex key"), ("0" * 12 if not key.startswith("0") else "f" * 12,
                                                          "matches no result"),
                       (plain[:10], "is not a workload's result")):
        code, out, err = cli("results", "list", "--db", db, "--workload-of", arg)
        assert code == 2 and out == "" and words in err and err.strip().count("\n") == 0, err
