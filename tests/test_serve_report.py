"""The report's serving page (report/serving.py) draws what studies/serving.py records, and says
so when nothing is recorded."""
import pytest

from llmbench.report.rows import Data, UnknownMetric
from llmbench.report.serving import NOT_RUN, draw_serving, serve_metric, serving_plan_table
from llmbench.results.store import ResultsDB


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from llmbench.serve.config import Deployment, Load
    from llmbench.queueing.metrics import Slo
    from llmbench.serve.plan import plan_serve
    from llmbench.serve.run import result_row, run

    db_path = tmp_path_factory.mktemp("serve") / "r.db"
    with ResultsDB(db_path) as db:
        for hw in ("h100-sxm", "cs3"):
            for rate in (1, 4):
                load = Load(rate_per_s=rate, requests=60, prompt_len="512", output_len="64")
                row = result_row(run(Deployment(model="llama-3.1-8b", hardware=hw), load, Slo(ttft_ms=500, tpot_ms=50)), load)
                db.record(row.pop("point"), study="serving", **row)
        res = plan_serve("llama-3.1-8b", Load(rate_per_s=4, requests=100, prompt_len="512", output_len="64"),
                         Slo(ttft_ms=500, tpot_ms=50), hardware=["h100-sxm", "cs3"], top=2)
        db.record({"suite": "serve-plan", "model": "llama-3.1-8b"}, source="predicted", metrics=res,
                  study="serving-plan")
    with ResultsDB(db_path, readonly=True) as db:
        return Data.from_db(db)


def test_curves_one_line_per_hardware_and_percentile(served):
    fig = draw_serving(served)
    ttft = fig.axes[0]
    labels = [ln.get_label() for ln in ttft.lines if not ln.get_label().startswith("_")]
    assert any("CS-3" in lab for lab in labels) and any("H100" in lab for lab in labels)
    assert len(ttft.lines) >= 4  # p50 and p99 of each hardware (+ the SLO line)
    xs = ttft.lines[0].get_xdata()
    assert list(xs) == [1, 4]


def test_plan_table_lists_simulated_layouts_then_each_hardware(served):
    t = serving_plan_table(served)
    numbered = [r for r in t.rows if r[0].isdigit()]
    assert 1 <= len(numbered) <= 2 and all(r[7] != "not simulated" for r in numbered)
    assert {r[1] for r in t.rows if r[0] == "best (screen)"} >= {"CS-3"}
    assert "candidates" in t.note


def test_nothing_recorded_says_how_to_get_it():
    empty = Data.from_rows([])
    assert serving_plan_table(empty).note == NOT_RUN
    fig = draw_serving(empty)
    assert any(NOT_RUN in t.get_text() for t in fig.axes[0].texts)


def test_undeclared_metric_fails_loudly():
    with pytest.raises(UnknownMetric):
        serve_metric({"metrics": {"mean_ttft": 1}}, "mean_ttft")
