"""`llmbench report --db D` on a user's own database: every measured run beside its prediction
(predicted in memory, the database untouched), the energy/cost view and its --price override.

    .venv/bin/python -m pytest -q tests/test_report_runs.py
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from llmbench.point import Workload
from llmbench.results import ResultsDB


def _fill_small_db(path: Path) -> Path:
    spec = importlib.util.spec_from_file_location("_report_tests", Path(__file__).with_name("test_report.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fill_small_db(path)


def test_report_db_shows_every_measured_run_beside_its_prediction(tmp_path, cli):
    db = _fill_small_db(tmp_path / "mine.db")
    with ResultsDB(db) as store:  # a run of the user's own, outside every study
        store.record(Workload(model="gpt2-small", suite="train", hardware="cpu", precision="fp32", batch=2,
                              seq_len=64, resize={"n_layers": 1, "d_model": 64, "n_heads": 2}),
                     metrics={"tokens_per_s": 900.0, "step_time_s": 0.14})
        before = store.count()
    code, out, err = cli("report", "--db", str(db), "--out", str(tmp_path / "o"), "--json",
                         "--price", "cs3=60")
    assert code == 0, err
    summary = json.loads(out)
    page = (tmp_path / "o" / "report.html").read_text()
    assert "runs.png" in " ".join(summary["images"]) and "economics.png" in " ".join(summary["images"])
    i = page.index('id="t-runs"')
    runs = page[i:page.index("</section>", i)]
    assert "gpt2-small shrunk to" in runs and runs.count("<tr>") >= 5  # header + every measured workload
    assert "not predicted" not in runs  # cpu is in the catalog: each run has its prediction
    assert page.count("<tr>", page.index('id="t-economics"')) > 1  # the energy/cost table
    with ResultsDB(db) as store:
        assert store.count() == before  # predicted in memory only


def test_price_option_is_checked(tmp_path, cli):
    db = _fill_small_db(tmp_path / "p.db")
    for bad in ("cs3", "cs3=-1", "nosuch=3"):
        code, out, err = cli("report", "--db", str(db), "--out", str(tmp_path / "o"), "--price", bad)
        assert code != 0 and "--price" in err and "Traceback" not in err


def test_economics_follow_the_catalog_and_the_override():
    from llmbench.report.economics import economics

    row = {"hardware": "cs2", "metrics": {"tokens_per_s": 3600.0, "devices": 2}, "point": {}}
    e = economics(row)
    assert e["j_per_token"] == 20000.0 * 2 / 3600.0  # catalog power_w (seed 001: ~20 kW)
    assert abs(e["usd_per_mtoken"] - 57.08 * 2 / 3600.0 / 3600.0 * 1e6) < 1e-9
    assert economics(row, {"cs2": 10.0})["usd_per_mtoken"] == 10.0 * 2 / 3600.0 / 3600.0 * 1e6
    assert economics({**row, "hardware": "cs3"})["usd_per_mtoken"] is None  # no price: none invented
