"""Report and reproduce: figures, tables and report.html from a small database filled here, the CLI,
the time budget of measured pieces, and the adapters to the other areas' outputs.

    .venv/bin/python -m pytest -q tests/test_report.py
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmbench.point import Workload
from llmbench.results import ResultsDB, record_published

ROOT = Path(__file__).resolve().parent.parent
SMALL_HW = ("a100-80gb", "cs2")


def _cpu(**kw) -> Workload:
    """A workload as the study runner resolves it on this machine."""
    return Workload(hardware="cpu", precision="fp32", devices=1, **kw)


def fill_small_db(path: Path) -> Path:
    """A few rows of every kind: published.csv, predictions for two systems, measured rows."""
    from llmbench.published import PUBLISHED_CSV, published_rows
    from llmbench.results.published import published_point
    from llmbench.studies.predict import planned, record_prediction
    from llmbench.studies.spec import studies

    with ResultsDB(path) as db:
        record_published(db)
        for study in studies().values():
            for w, hw, ds in planned(study):
                if w.hardware in SMALL_HW:
                    record_prediction(db, w, hw, study.name, ds)
        env = {"command": "llmbench study run transformer-block --quick"}
        for b, tf in ((8, 0.21), (16, 0.25)):
            db.record(_cpu(suite="block", model="gpt2-xl", batch=b, seq_len=256,
                           resize={"d_model": 384, "n_heads": 6}),
                      metrics={"fwd_bwd_tflops": tf, "frac_of_ceiling": tf / 0.3}, environment=env,
                      study="transformer-block")
        for b, lat in ((1, 0.004), (8, 0.02), (32, 0.07)):
            db.record(_cpu(suite="infer", model="bert-base", batch=b, seq_len=128, resize={"n_layers": 2}),
                      metrics={"latency_s_p50": lat}, study="bert-infer-batch")
        small = {"n_layers": 2, "d_model": 256, "n_heads": 4}
        for n, tps, eff in ((1, 900.0, 1.0), (2, 1600.0, 0.89)):
            db.record(_cpu(model="gpt2-xl", batch=2 * n, micro_batch=2, grad_accum=1, seq_len=128, resize=small)
                      .with_(devices=n), metrics={"tokens_per_s": tps, "scaling_efficiency": eff},
                      study="dp-scaling")
        db.record(_cpu(model="gpt2-xl", batch=8, micro_batch=2, grad_accum=1, seq_len=128).with_(devices=4),
                  status="skipped", error="needs 4 processes", study="dp-scaling")
        db.record({"suite": "ceilings", "hardware": "cpu"}, metrics={
            "gemm_fp32_flops_per_s": 3.0e11, "copy_bandwidth_bytes_per_s": 1.2e10}, study="ceilings")
        row = next(r for r in published_rows(PUBLISHED_CSV) if r["id"] == "cs2-bert-large-8192")
        db.record(published_point(row)[0], source="predicted", study="validation", tag=row["id"],
                  environment={"id": row["id"]},
                  metrics={"published": 12000.0, "predicted": 10500.0, "rel_error": -0.125,
                           "metric": "samples_per_s", "reference": "arXiv:2409.00287"})
    return path


@pytest.fixture(scope="module")
def small_report(tmp_path_factory):
    """`llmbench reproduce --no-measure` over a database that already holds a few measurements:
    the whole path of `make reproduce` but the (minutes-long) measuring."""
    from llmbench.studies.reproduce import reproduce

    tmp = tmp_path_factory.mktemp("report")
    db_path = fill_small_db(tmp / "small.db")
    logs = []
    summary = reproduce(quick=True, out_dir=tmp / "out", db_path=db_path, measure=False, log=logs.append)
    return tmp / "out", summary, logs


def test_report_writes_every_figure_as_png_and_svg(small_report):
    from llmbench.report.figures import FIGURES

    out, summary, logs = small_report
    assert not [m for m in logs if m.startswith("figure ")], logs  # no figure failed
    for f in FIGURES:
        png, svg = out / "img" / f"{f.id}.png", out / "img" / f"{f.id}.svg"
        assert png.stat().st_size > 5000, f.id
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in svg.read_text()[:2000]
    assert summary["rows"]["published"] >= 30 and summary["rows"]["measured"] >= 8
    assert summary["rows"]["predicted"] >= 700  # every study's predict: section
    saved = json.loads((out / "reproduce.json").read_text())
    steps = [t["step"] for t in saved["timings"]]
    assert steps == ["predict", "predict measured points", "validate", "serving", "fidelity", "report"]
    assert "7 measured points predicted" in saved["timings"][1]["status"]  # 2 block, 3 infer, 2 dp


def test_html_is_static_offline_and_cites_sources(small_report):
    out, _, _ = small_report
    page = (out / "report.html").read_text()
    srcs = re.findall(r'<img src="([^"]+)"', page)
    assert len(srcs) >= 12
    for s in srcs:  # relative files that exist: readable offline
        assert not s.startswith(("http:", "https:", "/")) and (out / s).is_file(), s
    assert "http://" not in page and "https://" not in page and "<script" not in page
    # measured / predicted / published told apart: legend key with colour classes and markers
    for kind, mark in (("measured", "●"), ("predicted", "■"), ("published", "★")):
        assert f'class="k-{kind}"' in page and mark in page
    # every figure caption names the command behind its data
    assert "llmbench study run transformer-block --quick" in page
    assert "llmbench predict train --model gpt2-xl --hardware a100-40gb --batch 16 --seq 1024 --devices 1" \
        in page
    assert "points; varying hardware a100-40gb, a100-80gb, bow-ipu" in page
    # tables cite their sources
    assert page.count("Sources:") >= 7
    assert "arXiv:2310.04607 Table II" in page and "arXiv:2409.00287" in page


def test_tables_compare_published_and_predicted(tmp_path):
    from llmbench.report.rows import Data
    from llmbench.report.tables import scaling_table, validation_table

    with ResultsDB(fill_small_db(tmp_path / "t.db")) as db:
        data = Data.from_db(db)
    val = validation_table(data)
    assert val.rows == [["cs2-bert-large-8192", "cs2", "bert-large", "samples_per_s", "12,000",
                         "10,500", "-12.5%", "-", "arXiv:2409.00287"]]
    assert "median |error| 12.5%" in val.note
    sc = scaling_table(data)
    cs2 = [r for r in sc.rows if r[0] == "CS-2"]
    assert cs2 and cs2[0][2] == "0.957"  # published, Emani et al. Table II
    pred = float(cs2[0][3])  # predicted 2-system efficiency is a real number in (0, 1.1]
    assert 0.0 < pred <= 1.1
    a100 = [r for r in sc.rows if r[0] == "A100 SXM4 40GB"]  # the catalog's display name
    assert a100 and a100[0][3] == "not available"  # not in SMALL_HW: says so, no crash


def test_empty_database_gives_a_report_that_says_not_available(tmp_path):
    from llmbench.report.html import report

    with ResultsDB(tmp_path / "empty.db") as db:
        summary = report(db, tmp_path / "out", log=lambda m: None)
    page = Path(summary["report"]).read_text()
    assert "not measured / not available" in page
    assert summary["rows"] == {"measured": 0, "predicted": 0, "published": 0}


def test_a_failing_figure_does_not_lose_the_report(tmp_path, monkeypatch):
    from llmbench.report import figures, html
    from llmbench.report.rows import Data

    def boom(data):
        raise RuntimeError("broken plot")

    spec = figures.FigureSpec("broken", "A broken figure", ("gas",), "how", boom)
    monkeypatch.setattr(html, "FIGURES", (spec,))
    logs = []
    path = html.build_report(Data.from_rows([]), tmp_path, log=logs.append)
    assert "A broken figure: not measured / not available (RuntimeError: broken plot)" in path.read_text()
    assert any("broken plot" in m for m in logs)


def test_a_failing_table_does_not_lose_the_others(monkeypatch):
    from llmbench.report import tables
    from llmbench.report.rows import Data

    def boom(data):
        raise KeyError("no such column")

    monkeypatch.setattr(tables, "sparsity_table", boom)
    out = tables.all_tables(Data.from_rows([]))
    assert len(out) == len(tables.TABLES)
    broken = [t for t in out if t.id == "sparsity_table"]
    assert broken and "not available (KeyError" in broken[0].note


def test_run_step_stops_a_piece_at_its_budget(tmp_path):
    from llmbench.studies.reproduce import Step, run_step

    step = Step(name="sleeper", argv=(), budget_s=1.0,
                python_args=("-c", "import time; print('started', flush=True); time.sleep(60)"))
    t0 = time.monotonic()
    res = run_step(step, tmp_path / "x.db", quick=True, deadline=time.monotonic() + 100, log=lambda m: None)
    assert time.monotonic() - t0 < 15
    assert res["status"].startswith("stopped at its budget of 1 s")
    ok = run_step(Step(name="fine", argv=(), budget_s=30, python_args=("-c", "print(1)")), tmp_path / "x.db",
                  quick=True, deadline=time.monotonic() + 100, log=lambda m: None)
    assert ok["status"] == "ok"
    bad = run_step(Step(name="bad", argv=(), budget_s=30, python_args=("-c", "raise SystemExit('nope')")),
                   tmp_path / "x.db", quick=True, deadline=time.monotonic() + 100, log=lambda m: None)
    assert bad["status"] == "exit 1: nope"


def test_quick_plan_fits_the_ten_minute_budget():
    from llmbench.studies.reproduce import measure_plan
    from llmbench.studies.spec import studies

    steps = measure_plan(quick=True)
    names = [s.name for s in steps]
    for study in studies().values():  # every shipped study that measures something has a budget
        assert (study.name in names) == bool(study.points(quick=True)), study.name
    assert "ceilings" in names
    # measured pieces + ~1 minute for predictions, validation and the report < 10 minutes
    assert sum(s.budget_s for s in steps) + 60 < 9 * 60
    assert all("--quick" in s.argv for s in steps if s.argv[0] == "study")


def test_ceilings_json_is_flattened_with_units():
    from llmbench.report.rows import flat_ceilings

    m = flat_ceilings({"profile": "cpu", "gemm": {"fp32": {"min": 0.1, "median": 0.2, "max": 0.25},
                                                   "bf16": {"skipped": "slow"}},
                        "copy": {"min": 5.0, "median": 8.0, "max": 10.0, "bytes": 1}})
    assert m == {"gemm_fp32_flops_per_s": 0.25e12, "gemm_fp32_flops_per_s_median": 0.2e12,
                 "copy_bandwidth_bytes_per_s": 10.0e9}


def test_validation_is_recorded_in_process_under_the_published_workloads(tmp_path):
    from llmbench.perfmodel.validate import run
    from llmbench.studies.validation import record_validation

    with ResultsDB(tmp_path / "v.db") as db:
        record_published(db)
        assert "published rows" in record_validation(db, log=lambda m: None)
        rows = db.query(study="validation")
        res = run()
        assert len(rows) == len(res["rows"])
        row = next(r for r in rows if r["environment"]["id"] == "emani-sparsity-gpt2xl")
        m = row["metrics"]
        assert m["published_text"] == "1.8-2.0" and m["published"] == pytest.approx(1.9)
        want = next(v for v in res["rows"] if v["id"] == "emani-sparsity-gpt2xl")
        assert m["predicted"] == pytest.approx(want["predicted"]) and m["rel_error"] == want["error"]
        # joined with the published row it is compared with
        pub = db.query(source="published", workload_id=row["workload_id"])
        assert [p["environment"]["id"] for p in pub] == ["emani-sparsity-gpt2xl"]
        assert len(db.query(study="validation-trends")) == len(res["trends"])


def test_gas_ratios_from_the_workloads():
    from llmbench.report.plotkit import gas_ratios

    def row(batch, g, tps):
        w = Workload(model="gpt2-small", hardware="cpu", batch=batch, grad_accum=g, devices=1)
        return {"hardware": "cpu", "point": w.to_dict(), "workload_id": w.id(),
                "metrics": {"tokens_per_s": tps}}

    # the global batch grows with GAS at a fixed micro-batch of 2 (Workload.micro_steps)
    rows = [row(2, 1, 100.0), row(4, 2, 150.0), row(8, 4, 180.0)]
    assert gas_ratios(rows) == {("cpu", 1, 2): {1: 1.0, 2: 1.5, 4: 1.8}}


def test_a_renamed_metric_is_an_error_not_not_available(tmp_path, monkeypatch):
    from llmbench.report import figures, html
    from llmbench.report.rows import Data, UnknownMetric, metric

    row = {"metrics": {"ttft_s": 1.0, "time_to_first_token_s": 1.0}}
    assert metric(row, "time_to_first_token_s") == 1.0
    with pytest.raises(UnknownMetric):
        metric(row, "ttft_s")  # the old predicted name: gone from every engine

    def renamed(data):
        return metric({"metrics": {}}, "latency_s")

    spec = figures.FigureSpec("renamed", "A figure reading an old name", ("gas",), "how", renamed)
    monkeypatch.setattr(html, "FIGURES", (spec,))
    with pytest.raises(UnknownMetric):
        html.build_report(Data.from_rows([]), tmp_path, log=lambda m: None)


def test_every_metric_name_the_report_reads_is_declared():
    """Statically: every metric(...)/value(...) name in report/ is a METRICS name or declared in
    rows.py, so a rename in an engine fails here even when no data exercises the figure."""
    import ast

    from llmbench.report.rows import KNOWN_METRICS

    seen = set()
    for path in (ROOT / "llmbench" / "report").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("metric", "value"):
                for arg in node.args[1:]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        seen.add((path.name, arg.value))
    assert len(seen) > 30
    assert not [s for s in seen if s[1] not in KNOWN_METRICS]


def test_cli_report_errors_and_json(tmp_path):
    out = subprocess.run([sys.executable, "-m", "llmbench", "report", "--db", str(tmp_path / "none.db")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error: no results database at") and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    ResultsDB(tmp_path / "empty.db").close()
    out = subprocess.run([sys.executable, "-m", "llmbench", "report", "--db", str(tmp_path / "empty.db"),
                          "--out", str(tmp_path / "o"), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)  # tables and progress go to stderr, stdout is only the JSON
    assert set(summary) == {"report", "rows", "images", "db", "skipped_rows"}
    assert Path(summary["report"]).is_file() and len(summary["images"]) >= 12


def test_cli_module_imports_nothing_heavy():
    code = ("import sys, llmbench.report.cli; "
            "bad = [m for m in ('torch', 'matplotlib', 'numpy') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_stream_compare_json_is_recorded_and_drawn(tmp_path):
    from llmbench.report.figures import draw_streaming
    from llmbench.report.rows import Data
    from llmbench.studies.reproduce import record_streaming
    from llmbench.report.tables import measured_summary

    out = {"model": "gpt2-small", "n_layers": 4, "d_model": 256, "batch": 8, "seq": 128, "steps": 3,
           "device": "cpu", "resident_tokens_per_s": 1000.0, "streamed_tokens_per_s": 950.0, "ratio": 0.95,
           "resident_loss": [7.0, 6.9, 6.8], "streamed_loss": [7.0, 6.9, 6.8], "max_rel_loss_diff": 0.0}
    with ResultsDB(tmp_path / "s.db") as db:
        ok = {"status": "ok", "stdout": json.dumps(out), "command": "llmbench stream compare"}
        record_streaming(db, ok)
        record_streaming(db, {"status": "exit 2: bad", "stdout": "", "command": "x"})  # ignored
        data = Data.from_db(db)
    assert len(data.get("streaming", "measured")) == 1
    row = next(r for r in measured_summary(data).rows if r[0] == "streaming")
    assert row[1] == "1" and "ratio 0.95" in row[3]
    fig = draw_streaming(data)
    assert "0.95" in fig.axes[1].get_title()


def test_interrupting_reproduce_ends_the_running_piece(tmp_path):
    """Ctrl-C of `llmbench reproduce` must not leave the running study behind (own session)."""
    import os
    import signal

    marker = tmp_path / "child.pid"
    code = (f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)")
    script = ("import time; from llmbench.studies.reproduce import Step, run_step\n"
              f"run_step(Step(name='s', argv=(), budget_s=100, python_args=('-c', {code!r})), "
              f"{str(tmp_path / 'x.db')!r}, quick=True, deadline=time.monotonic() + 100)\n")
    parent = subprocess.Popen([sys.executable, "-c", script])
    for _ in range(200):
        if marker.exists() and marker.read_text():
            break
        time.sleep(0.05)
    child = int(marker.read_text())
    parent.send_signal(signal.SIGINT)
    parent.wait(timeout=30)
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its interrupted parent")


def test_cli_reproduce_json_without_measuring(tmp_path):
    out = subprocess.run([sys.executable, "-m", "llmbench", "reproduce", "--no-measure", "--json",
                          "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=900)  # ~150 s on a loaded 2-core CPU
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    assert {"report", "rows", "images", "timings", "total_s", "db"} <= set(summary)
    assert summary["rows"]["published"] >= 30 and summary["rows"]["predicted"] >= 700
    assert [t["step"] for t in summary["timings"]] == ["predict", "predict measured points", "validate",
                                                       "serving", "fidelity", "report"]
    assert summary["fidelity"]["counts"]["total"] == len(summary["fidelity"]["rows"]) >= 84
    assert (tmp_path / "o" / "report.html").is_file()
