"""The Python API (llmbench/api.py, docs/api.md): the doc's example runs, results are typed, the
API and the CLI give the same numbers, bad input is BadInput, `import llmbench` stays cheap.

    python -m pytest -q tests/test_api.py
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import llmbench as lb
from llmbench.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _blocks(text: str) -> tuple[str, str]:
    """(the python block, the output block after it) of docs/api.md."""
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    out = re.search(r"```python\n.*?```.*?```\n(.*?)```", text, re.S).group(1)
    return code, out


def _mask(text: str) -> list[str]:
    return [re.sub(r"\d[\d,.]*", "#", line).rstrip() for line in text.strip().splitlines()]


def test_doc_example_runs_and_prints_what_the_doc_shows(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    code, shown = _blocks(DOC.read_text())
    monkeypatch.chdir(tmp_path)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, str(DOC), "exec"), {"__name__": "docs_api"})
    assert _mask(buf.getvalue()) == _mask(shown)


def _cli_json(argv: list[str]) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(argv + ["--json"])
    return json.loads(buf.getvalue())


def test_predict_train_is_the_cli_prediction():
    p = lb.predict_train(model="gpt2-xl", hardware="h100-sxm", batch=64, seq=1024, devices=8, precision="bf16")
    assert dataclasses.is_dataclass(p) and p.__dataclass_params__.frozen
    cli = _cli_json(["predict", "train", "--model", "gpt2-xl", "--hardware", "h100-sxm", "--batch", "64",
                     "--seq", "1024", "--devices", "8", "--precision", "bf16"])
    assert _without_provenance(cli) == json.loads(json.dumps(p.to_dict(), default=str))
    assert p.workload.layout.tp is not None and p.fits  # the planner chose the layout
    w = lb.Workload(model="gpt2-xl", hardware="h100-sxm", batch=64, seq_len=1024, devices=8, precision="bf16")
    assert lb.predict(w) == p


#: what the CLI's JSON adds to a result: where its efficiencies come from (perfmodel/provenance.py)
PROVENANCE = ("calibration", "framework", "mfu_causal", "mfu_convention", "engine_calibration")


def _without_provenance(cli: dict) -> dict:
    assert "calibration" in cli
    return {k: v for k, v in cli.items() if k not in PROVENANCE}


def test_predict_infer_and_plan_are_the_cli_results():
    i = lb.predict_infer(model="llama-3.1-8b", hardware="h100-sxm", batch=8, seq=512, gen_len=64)
    cli = _cli_json(["predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "8",
                     "--prompt-len", "512", "--gen-len", "64"])
    assert _without_provenance(cli) == json.loads(json.dumps(i.to_dict(), default=str))
    r = lb.plan(model="gpt2-xl", hardware="a100-80gb", devices=8, batch=64, seq=1024, top=2)
    cli = _cli_json(["plan", "--model", "gpt2-xl", "--hardware", "a100-80gb", "--devices", "8", "--batch", "64",
                     "--seq", "1024", "--top", "2"])
    assert _without_provenance(cli) == json.loads(json.dumps(r.to_dict(), default=str))
    assert r.best is r.layouts[0] and len(r.layouts) == 2 and r.fitting <= r.searched


def test_objects_stand_in_for_names():
    spec, hw = lb.get_model("gpt2-xl"), lb.get_hardware("h100-sxm")
    by_name = lb.predict_train(model="gpt2-xl", hardware="h100-sxm", batch=64, seq=1024, devices=8)
    assert lb.predict_train(model=spec, hardware=hw, batch=64, seq=1024, devices=8) == by_name
    deeper = spec.with_(name="gpt2-xl-96", n_layers=96)  # no such preset: only the object knows it
    p = lb.predict_train(model=deeper, hardware=hw, batch=64, seq=1024, devices=8)
    assert p.workload.model == "gpt2-xl-96" and p.step_time_s > 1.5 * by_name.step_time_s
    r = lb.plan(model=deeper, hardware=hw, devices=8, batch=64, seq=1024, top=1)
    assert r.best.workload.model == "gpt2-xl-96"
    i = lb.predict_infer(model=spec, hardware=hw, batch=1, seq=128, gen_len=16)
    assert i.workload.model == "gpt2-xl" and i.time_to_first_token_s > 0


@pytest.mark.parametrize("call, kw, words", [
    ("predict_train", {"batch": 64}, "needs seq"),
    ("predict_train", {"batch": 64, "seq": 1024, "seq_len": 512}, "once"),
    ("predict_train", {"batch": 64, "seq": 1024, "gen_len": 8}, "unknown option gen_len"),
    ("predict_train", {"batch": 0, "seq": 1024}, "batch must be >= 1"),
    ("predict_train", {"batch": 8, "seq": 1024, "recompute": "most"}, "recompute must be one of"),
    ("predict_infer", {"batch": 1}, "needs seq, gen_len"),
    ("plan", {"batch": 64, "seq": 1024}, "plan needs devices"),
    ("plan", {"batch": 64, "seq": 1024, "devices": 8, "objective": "speed"}, "objective must be one of"),
])
def test_bad_input_is_one_line_naming_the_option(call, kw, words):
    with pytest.raises(lb.BadInput, match=re.escape(words)) as e:
        getattr(lb, call)(model="gpt2-xl", hardware="h100-sxm", **kw)
    assert "\n" not in str(e.value)


def test_bad_names_and_types():
    with pytest.raises(lb.BadInput, match="unknown model 'gpt2-xxl'"):
        lb.predict_train(model="gpt2-xxl", hardware="h100-sxm", batch=1, seq=128)
    with pytest.raises(lb.BadInput, match="unknown hardware"):
        lb.predict_train(model="gpt2-xl", hardware="h1000", batch=1, seq=128)
    with pytest.raises(lb.BadInput, match="model must be a name, a file path or a ModelSpec"):
        lb.predict_train(model=3, hardware="h100-sxm", batch=1, seq=128)
    with pytest.raises(lb.BadInput, match="unknown option steps"):
        lb.predict_train(model="gpt2-xl", hardware="h100-sxm", batch=1, seq=128, steps=3)


def _db_with_rows(path: Path) -> None:
    from llmbench.results.store import ResultsDB

    w = lb.Workload(model="gpt2-xl", hardware="h100-sxm", batch=64, seq_len=1024, devices=8, precision="bf16")
    with ResultsDB(path) as db:
        db.record(w, source="predicted", metrics={"tokens_per_s": 4.0e5, "breakdown_s": {"compute": 0.1}})
        db.record(w, source="measured", metrics={"tokens_per_s": 3.0e5})


def test_to_dataframe_has_the_csv_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    from llmbench.results.export import flatten

    path = tmp_path / "r.db"
    _db_with_rows(path)
    db = lb.results.open(path)
    df = db.to_dataframe()
    assert isinstance(df, pd.DataFrame) and len(df) == 2
    assert list(df.columns) == flatten(db.query())[0]
    assert sorted(df["tokens_per_s"]) == [3.0e5, 4.0e5] and set(df["tp"].isna()) == {True}
    assert len(db.to_dataframe(source="measured")) == 1


def test_to_dataframe_without_pandas_says_how(tmp_path, monkeypatch):
    path = tmp_path / "r.db"
    _db_with_rows(path)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    with pytest.raises(lb.BadInput, match="to_dataframe needs pandas: pip install pandas"):
        lb.results.open(path).to_dataframe()


def test_results_open_is_read_only_and_names_a_missing_file(tmp_path):
    with pytest.raises(lb.BadInput):
        lb.results.open(tmp_path / "absent.db")
    path = tmp_path / "r.db"
    _db_with_rows(path)
    with pytest.raises(lb.BadInput, match="read-only"):
        lb.results.open(path).record(lb.Workload(model="gpt2-xl"), metrics={})


def test_import_llmbench_is_cheap():
    """`import llmbench` loads no engine, no numpy, no torch; names load on first use."""
    code = ("import sys, llmbench as lb; before = set(sys.modules); lb.predict_train; "
            "print(sorted(m for m in before if m.startswith('llmbench')), 'numpy' in sys.modules, "
            "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["['llmbench']", "False", "False"]
    assert "predict_train" in dir(lb) and "results" in dir(lb)
    with pytest.raises(AttributeError):
        lb.no_such_name  # noqa: B018


def test_results_open_exports_as_the_cli_does(tmp_path):
    from llmbench.results.export import to_csv

    path = tmp_path / "r.db"
    _db_with_rows(path)
    db = lb.results.open(path)
    assert db.to_csv(source="measured") == to_csv(db.query(source="measured"))
    assert len(json.loads(db.to_json())) == 2


def test_predict_start_up_parses_one_hardware_and_one_model_file():
    """Issue 9: `llmbench predict train` of catalog names parses h100-sxm.toml and gpt2.toml only,
    not the catalogs, and imports no numpy, rich or sqlite3 (benchmarks/predict_speed.py times it)."""
    code = ("import sys, io, contextlib; from llmbench.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main('predict train --model gpt2-xl --hardware h100-sxm --batch 64 --seq 1024'.split())\n"
            "hw, pr = sys.modules['llmbench.hardware.lookup'], sys.modules['llmbench.models.presets']\n"
            "print(hw._shipped.cache_info().currsize, pr.presets.cache_info().currsize, "
            "[m for m in ('numpy', 'rich', 'sqlite3', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["0", "0", "[]"]
