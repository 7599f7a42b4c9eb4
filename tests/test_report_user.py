"""`llmbench report --db mine.db` on a database of one's own work: `predict --db` and `plan --db`
record their predictions, and the page shows exactly the database's rows (measured, streamed,
predicted) with no seed page, no empty panel and no "No data" caption.

    .venv/bin/python -m pytest -q tests/test_report_user.py
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from llmbench.point import Workload
from llmbench.results import ResultsDB


def three_row_db(path: Path, cli) -> Path:
    """A predicted train row (predict --db), a predicted inference row (predict infer --db) and a
    measured CPU run: the user's own database."""
    code, _, err = cli("predict", "train", "--model", "gpt2-xl", "--hardware", "a100-40gb", "--batch", "64",
                       "--seq", "1024", "--devices", "8", "--db", str(path))
    assert code == 0, err
    code, _, err = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "cs3", "--batch", "1",
                       "--db", str(path))
    assert code == 0, err
    with ResultsDB(path) as db:
        db.record(Workload(model="gpt2-small", suite="train", hardware="cpu", precision="fp32", batch=2, seq_len=64,
                           resize={"n_layers": 1, "d_model": 64, "n_heads": 2}),
                  metrics={"tokens_per_s": 900.0, "step_time_s": 0.14},
                  environment={"command": "llmbench measure train --model gpt2-small --layers 1"})
    return path


def test_predict_and_plan_record_with_db(tmp_path, cli):
    db = tmp_path / "p.db"
    code, _, err = cli("plan", "--model", "gpt2-xl", "--hardware", "a100-40gb", "--devices", "8", "--batch", "64",
                       "--seq", "1024", "--top", "2", "--db", str(db))
    assert code == 0, err
    with ResultsDB(db) as store:
        rows = store.query()
    assert len(rows) == 1 and rows[0]["source"] == "predicted" and rows[0]["metrics"]["tokens_per_s"] > 0
    assert rows[0]["environment"]["command"].startswith("llmbench plan")
    code, _, err = cli("predict", "train", "--model", "gpt2-xl", "--hardware", "a100-40gb", "--batch", "64",
                       "--seq", "1024", "--db", str(tmp_path / "no" / "such" / "x.db"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def build(tmp_path, cli) -> tuple[Path, dict]:
    db = three_row_db(tmp_path / "mine.db", cli)
    code, out, err = cli("report", "--db", str(db), "--out", str(tmp_path / "o"), "--json")
    assert code == 0, err
    return tmp_path / "o" / "report.html", json.loads(out)


def test_report_of_a_user_db_shows_exactly_its_rows(tmp_path, cli):
    page, summary = build(tmp_path, cli)
    html = page.read_text()
    assert summary["images"] == ["mine.png"] and summary["rows"] == {"measured": 1, "predicted": 2, "published": 0}
    i = html.index('id="t-mine"')
    mine = html[i:html.index("</section>", i)]
    assert mine.count("<tr>") == 1 + 3  # header + the three rows, nothing predicted for the report
    from llmbench.report.tables import fmt

    with ResultsDB(tmp_path / "mine.db", readonly=True) as db:
        values = [fmt(r["metrics"]["tokens_per_s"]) for r in db.query()]  # each row's own value, as drawn
    for text in ("gpt2-xl", "llama-3.1-8b", "gpt2-small", "measured", "predicted", "900", *values):
        assert text in mine, text
    assert 'id="t-fidelity"' not in html and "not measured / not available" not in html and "No data" not in html
    assert len(re.findall(r'<img src="img/', html)) == 1


def test_an_empty_user_db_draws_no_figure(tmp_path, cli):
    from llmbench.report.rows import Data
    from llmbench.report.user import build_user_report

    data = Data.from_rows([{"source": "predicted", "status": "ok", "suite": "train", "hardware": "cpu",
                            "point": {"model": "gpt2-small"}, "metrics": {"fits": True}}])
    summary = build_user_report(data, tmp_path / "o", log=lambda m: None)
    assert summary["images"] == [] and "No row of this database has" in Path(summary["report"]).read_text()
