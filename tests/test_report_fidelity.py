"""The seed-fidelity table: verdicts computed from values (a changed value flips a verdict), every
claim of the claims file has a row, and the report shows the table.

    .venv/bin/python -m pytest -q tests/test_report_fidelity.py
"""
from __future__ import annotations

import pytest

from llmbench.results import ResultsDB
from llmbench.studies.fidelity import fidelity, load_claims
from llmbench.studies.verdict import numeric_verdict


def _validation(predicted: float, in_sample: float | None = None) -> dict:
    return {"rows": [{"id": "cs2-bert-base-2048", "published": "14000", "predicted": predicted,
                      "loso_predicted": predicted, "in_sample_predicted": predicted if in_sample is None else in_sample,
                      "error": predicted / 14000 - 1, "tolerance": 0.25}],
            "trends": [{"id": "cs2-bert-trend-base", "passed": predicted > 0, "detail": ""}]}


VALIDATE_CLAIM = {"id": "000-2", "seed": "000", "where": "Statistics", "claim": "14,000 samples/s",
                  "published": "14000", "check": "validate", "row": "cs2-bert-base-2048", "hardware": "cs2"}


@pytest.mark.parametrize("predicted, verdict", [(15000.0, "reproduced"), (9000.0, "partial"),
                                                (50000.0, "contradicted")])
def test_a_changed_result_flips_the_verdict(predicted, verdict):
    fid = fidelity(claims=[VALIDATE_CLAIM], validation=_validation(predicted))
    row = fid["rows"][0]
    assert row["verdict"] == verdict and fid["counts"][verdict] == 1
    assert row["source"] == "predicted, leave one source out"  # validate's held-out prediction decides


def test_a_row_that_matches_only_in_sample_is_labelled_so():
    row = fidelity(claims=[VALIDATE_CLAIM], validation=_validation(9000.0, in_sample=14500.0))["rows"][0]
    assert row["verdict"] == "in-sample" and "in-sample" in row["source"]


def test_numeric_verdict_ranges_and_factor():
    assert numeric_verdict(1.9, "1.8-2.0") == ("reproduced", 0.0)
    assert numeric_verdict(2.6, "1.8-2.0")[0] == "partial"
    assert numeric_verdict(14.0, "4")[0] == "contradicted"


def test_a_prediction_check_follows_the_model_and_the_published_value():
    claim = {"id": "x-1", "seed": "x", "where": "-", "claim": "A100 fp16 over fp32", "check": "predict",
             "w": {"model": "gpt2-xl", "suite": "block", "hardware": "a100-40gb", "seq_len": 1024, "batch": 64,
                   "precision": "fp16"}, "over": {"precision": "fp32"}, "metric": "achieved_tflops"}
    ratio = float(fidelity(claims=[{**claim, "published": "4"}], validation=_validation(1))["rows"][0]["llmbench"])
    near = fidelity(claims=[{**claim, "published": f"{ratio:.3f}"}], validation=_validation(1))["rows"][0]
    far = fidelity(claims=[{**claim, "published": f"{ratio / 10:.3f}"}], validation=_validation(1))["rows"][0]
    assert (near["verdict"], far["verdict"]) == ("reproduced", "contradicted")


def test_a_claim_without_counterpart_or_that_the_model_refuses_is_missing():
    claims = [{"id": "x-1", "seed": "x", "where": "-", "claim": "c", "check": "none", "why": "not modelled"},
              {"id": "x-2", "seed": "x", "where": "-", "claim": "c", "check": "predict", "published": "1",
               "w": {"model": "no-such-model", "hardware": "cs2"}, "metric": "tokens_per_s"}]
    rows = fidelity(claims=claims, validation=_validation(1))["rows"]
    assert [r["verdict"] for r in rows] == ["missing", "missing"]


def test_measured_fig8_claim_reads_the_loss_curves(tmp_path):
    claim = next(c for c in load_claims() if c["id"] == "002-34")
    with ResultsDB(tmp_path / "f.db") as db:
        assert fidelity(db, [claim], validation=_validation(1))["rows"][0]["verdict"] == "missing"
        for s, end in ((0.0, 4.0), (0.6, 4.2), (0.8, 4.4), (0.9, 4.6)):
            db.record({"suite": "sparse-loss", "sparsity": s, "phase": "pretrain"}, study="sparse-loss",
                      metrics={"loss_curve": [6.0] * 10 + [end] * 10, "tokens": 1000})
        row = fidelity(db, [claim], validation=_validation(1))["rows"][0]
        assert row["source"] == "measured" and row["verdict"] == "reproduced"  # +15 % at 0.9
        for s, end in ((0.6, 4.08), (0.8, 4.16), (0.9, 4.24)):  # right order, a gap of 6 % (seed: 15 %)
            db.record({"suite": "sparse-loss", "sparsity": s, "phase": "pretrain"}, study="sparse-loss",
                      metrics={"loss_curve": [6.0] * 10 + [end] * 10, "tokens": 1000})
        row = fidelity(db, [claim], validation=_validation(1))["rows"][0]
        assert row["verdict"] == "partial" and row["tolerance"].startswith("±50% (partial within 3×")  # shown = applied
        for s, end in ((0.6, 4.02), (0.8, 4.05), (0.9, 4.08)):  # right order, a gap of 2 %: beyond 3x
            db.record({"suite": "sparse-loss", "sparsity": s, "phase": "pretrain"}, study="sparse-loss",
                      metrics={"loss_curve": [6.0] * 10 + [end] * 10, "tokens": 1000})
        assert fidelity(db, [claim], validation=_validation(1))["rows"][0]["verdict"] == "contradicted"
        db.record({"suite": "sparse-loss", "sparsity": 0.9, "phase": "pretrain"}, study="sparse-loss",
                  metrics={"loss_curve": [6.0] * 10 + [3.9] * 10, "tokens": 1000})
        assert fidelity(db, [claim], validation=_validation(1))["rows"][0]["verdict"] == "contradicted"
