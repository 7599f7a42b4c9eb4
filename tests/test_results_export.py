"""Exports (CSV with metrics as columns, JSON, Parquet) and the `llmbench results` commands."""
import csv
import io
import json
import sys

import pytest

from llmbench.results import ResultsDB
from llmbench.results.export import export, flatten

P1 = {"suite": "train", "model": "gpt2-small", "hardware": "cpu", "batch": 2, "seq": 128,
      "precision": "fp32", "resize": {"n_layers": 2}}
P2 = {**P1, "batch": 4, "grad_accum": 2}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "e.db"
    with ResultsDB(path) as store:
        store.record(P1, metrics={"tokens_per_s": 1000.5, "step_time_s": 0.256, "bound": "compute"},
                     environment={"torch_version": "2.13.0"}, study="s1")
        store.record(P2, metrics={"tokens_per_s": 1500, "batch": 99}, study="s1")
        store.record(P2, source="predicted", metrics={"tokens_per_s": 2000.0}, study="s2")
        store.record({**P1, "batch": 64}, status="oom", error="out of memory", study="s1")
    return path


def _rows(path, **filters):
    with ResultsDB(path) as store:
        return store.query(**filters)


def test_flatten_metrics_and_point_fields_to_columns(db):
    columns, flat = flatten(_rows(db))
    assert columns[:9] == ["key", "study", "source", "suite", "model", "hardware", "status", "error",
                           "created_at"]
    assert {"batch", "seq", "precision", "grad_accum", "resize", "tokens_per_s", "step_time_s",
            "bound", "metrics.batch", "environment"} <= set(columns)
    first = flat[0]
    assert first["tokens_per_s"] == 1000.5 and first["batch"] == 2 and first["grad_accum"] is None
    assert json.loads(first["resize"]) == {"n_layers": 2}
    assert flat[1]["metrics.batch"] == 99 and flat[1]["batch"] == 4  # a clashing metric name kept apart


def test_csv_json_parquet_round_trip(db, tmp_path):
    rows = _rows(db)
    text = export(rows, "csv")
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == 4
    assert [r["status"] for r in table] == ["ok", "ok", "ok", "oom"]
    assert float(table[0]["tokens_per_s"]) == 1000.5 and table[3]["error"] == "out of memory"
    assert json.loads(export(rows, "json")) == json.loads(json.dumps(rows))
    pq = pytest.importorskip("pyarrow.parquet")
    export(rows, "parquet", tmp_path / "r.parquet")
    t = pq.read_table(tmp_path / "r.parquet")
    assert t.num_rows == 4
    assert str(t.schema.field("tokens_per_s").type) == "double"
    assert str(t.schema.field("batch").type) == "int64"
    assert t.column("tokens_per_s").to_pylist()[:3] == [1000.5, 1500.0, 2000.0]
    with pytest.raises(ValueError, match="unknown export format"):
        export(rows, "xml")


def test_parquet_without_pyarrow_is_one_line_error(db, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now fails
    with pytest.raises(ValueError, match="needs pyarrow"):
        export(_rows(db), "parquet", tmp_path / "x.parquet")


def test_cli_results_list_json_and_filters(db, cli):
    code, out, _ = cli("results", "list", "--db", str(db), "--json")
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == 4
    assert set(rows[0]) == {"key", "study", "suite", "source", "model", "hardware", "status", "error",
                            "point", "metrics", "environment", "created_at", "workload_id"}
    code, out, _ = cli("results", "list", "--db", str(db), "--source", "predicted", "--json")
    assert [r["metrics"]["tokens_per_s"] for r in json.loads(out)] == [2000.0]
    code, out, _ = cli("results", "list", "--db", str(db), "--study", "s1", "--status", "oom",
                       "--json")
    assert [r["point"]["batch"] for r in json.loads(out)] == [64]
    code, out, _ = cli("results", "list", "--db", str(db))  # the rich table
    assert code == 0 and "4 results" in out


def test_cli_results_export(db, cli, tmp_path):
    code, out, _ = cli("results", "export", "--db", str(db), "--format", "csv", "--study", "s2")
    assert code == 0
    table = list(csv.DictReader(io.StringIO(out)))
    assert len(table) == 1 and table[0]["source"] == "predicted"
    code, out, _ = cli("results", "export", "--db", str(db), "-f", "json",
                       "-o", str(tmp_path / "r.json"), "--json")
    assert code == 0 and json.loads(out) == {"format": "json", "rows": 4, "output": str(tmp_path / "r.json")}
    assert len(json.loads((tmp_path / "r.json").read_text())) == 4


@pytest.mark.parametrize("argv, msg", [
    (["results", "export", "--format", "xml"], "invalid choice"),
    (["results", "export", "--format", "parquet"], "needs an output file"),
    (["results", "list", "--db", "/nonexistent/dir/none.db"], "no results database"),
])
def test_cli_results_bad_input_exits_2(db, cli, argv, msg):
    if "--db" not in argv:
        argv = argv + ["--db", str(db)]
    code, _, err = cli(*argv)
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1


def test_cli_load_published_is_idempotent(tmp_path, cli):
    db = str(tmp_path / "p.db")
    code, out, _ = cli("results", "load-published", "--db", db, "--json")
    first = json.loads(out)
    assert code == 0 and first["recorded"] > 30
    code, out, _ = cli("results", "load-published", "--db", db, "--json")
    assert json.loads(out)["keys"] == first["keys"]
    with ResultsDB(db) as store:
        assert store.count() == first["recorded"]


def test_workload_rows_export_their_layout_as_columns_and_filter_by_id(tmp_path, cli):
    from llmbench.point import Workload

    w = Workload(model="gpt2-small", hardware="cpu", batch=4, seq_len=128, precision="fp32").with_(tp=2)
    path = tmp_path / "w.db"
    with ResultsDB(path) as store:
        store.record(w, metrics={"tokens_per_s": 10.0})
        store.record(w, source="predicted", metrics={"tokens_per_s": 12.0})
        store.record(P1, metrics={"tokens_per_s": 1.0})
    columns, flat = flatten(_rows(path))
    assert {"workload_id", "tp", "pp", "zero", "seq_len"} <= set(columns) and "layout" not in columns
    assert [r["tp"] for r in flat if r["workload_id"]] == [2, 2]
    code, out, _ = cli("results", "list", "--db", str(path), "--workload-id", w.id(), "--json")
    assert code == 0 and [r["source"] for r in json.loads(out)] == ["measured", "predicted"]
    code, out, _ = cli("results", "list", "--db", str(path))  # the table: layout knobs flat
    assert code == 0 and "tp=2" in out and "layout" not in out
