"""`llmbench calibrate --from DB --hardware H` on measured rows of sharded, tensor-parallel and
recomputed layouts (llmbench/perfmodel/calibrate.py, the user-points path).

Rows made by the model itself under a known profile are the one case whose answer is known: the fit
must recover that profile, with in-sample and leave-one-out error ~0, and only if every row is
predicted with the layout it was measured with (the layouts here differ by 10-100% in tokens/s)."""
import json

import pytest

from llmbench.hardware import get_hardware
from llmbench.perfmodel.calibrate import _prior, calibrate_from
from llmbench.perfmodel.train import as_run, predict_train
from llmbench.point import Workload
from llmbench.results.store import ResultsDB

TRUE = {"compute_max": 0.3, "compute_half_dim": 60.0, "network": 0.35}  # prior: 0.6, 32, 0.7
LAYOUTS = (dict(tp=1, zero=0, recompute="none"), dict(tp=1, zero=3, recompute="full"),
           dict(tp=2, zero=0, recompute="none"), dict(tp=2, zero=3, recompute="selective"))


def synthetic_db(path, params) -> list[dict]:
    """Measured rows (as `measure train` records them) of each layout at two shapes; predicted and
    other-hardware rows beside them, which calibration must skip."""
    hw = get_hardware("cpu")
    made = []
    with ResultsDB(path) as store:
        for lay in LAYOUTS:
            for batch, seq in ((4, 64), (16, 256)):
                devices = 4 if lay["tp"] == 2 and lay["zero"] else 2
                w = Workload(model="gpt2-small", hardware="cpu", precision="fp32", devices=devices, batch=batch,
                             seq_len=seq, resize={"n_layers": 2}).with_(pp=1, offload="none", mode="resident", **lay)
                w = as_run(w, hw)
                p = predict_train(w.spec(), hw, w, params)
                metrics = {k: getattr(p, k) for k in ("tokens_per_s", "samples_per_s", "step_time_s", "achieved_tflops")}
                store.record(w.to_dict(), source="measured", metrics=metrics)
                store.record(w.to_dict(), source="predicted", metrics={"tokens_per_s": 1.0})
                store.record(w.with_(hardware="a100-80gb").to_dict(), source="measured", metrics=metrics)
                made.append({"workload": w, "tokens_per_s": p.tokens_per_s})
    return made


def test_fit_on_measured_layout_rows_recovers_the_profile(tmp_path):
    db = tmp_path / "a?b.db"  # '?' would end a file: URI's path if it were not quoted
    made = synthetic_db(db, {**_prior("cpu"), **TRUE})
    by_shape = {}
    for m in made:
        by_shape.setdefault(m["workload"].batch, []).append(m["tokens_per_s"])
    assert all(max(v) / min(v) > 1.1 for v in by_shape.values())  # the layout matters
    before = db.read_bytes()
    rep, skipped = calibrate_from(str(db), "cpu")
    assert db.read_bytes() == before  # opened read-only
    assert rep["status"] == "fitted" and rep["points"] == len(made) == 8 and skipped == 16
    assert set(rep["fitted"]) == set(TRUE)
    for k, v in TRUE.items():
        assert rep["params"][k] == pytest.approx(v, rel=1e-3), k
    assert rep["prior_mean_abs_error"] > 0.3 and rep["fit_mean_abs_error"] < 1e-6 and rep["loo_mean_abs_error"] < 1e-6
    layouts = {r["layout"].split(", recompute")[0] for r in rep["rows"]}
    assert {"tp 2 x pp 1 x dp 2, ZeRO 3", "tp 1 x pp 1 x dp 2, ZeRO 3", "tp 2 x pp 1 x dp 1, ZeRO 0"} <= layouts


def test_a_db_is_known_by_its_header_and_the_cli_writes_a_profile_predict_reads(tmp_path, cli, monkeypatch):
    db = tmp_path / "runs"  # no suffix: still a results database
    synthetic_db(db, {**_prior("cpu"), **TRUE})
    folder = tmp_path / "profiles"
    folder.mkdir()
    monkeypatch.setenv("LLMBENCH_PROFILES", str(folder))
    code, out, err = cli("calibrate", "--from", str(db), "--hardware", "cpu", "--out", str(folder / "cpu.json"), "--json")
    assert code == 0, err
    rep = json.loads(out)[0]
    assert rep["loo_mean_abs_error"] < 1e-6 and len(rep["rows"]) == 8
    from llmbench.perfmodel.params import load_profile, resolve_params
    load_profile.cache_clear()
    try:
        assert resolve_params(get_hardware("cpu"))["compute_max"] == pytest.approx(TRUE["compute_max"], rel=1e-3)
    finally:
        load_profile.cache_clear()
