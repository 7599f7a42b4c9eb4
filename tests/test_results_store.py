"""The results store: round trip, upsert, WAL, concurrent writer processes, SIGKILL mid-write,
the published reference values, and the DB path rules."""
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llmbench.point import Workload
from llmbench.results import ResultsDB, point_key, record_published
from llmbench.published import PUBLISHED_CSV, published_rows
from llmbench.results.store import SCHEMA_VERSION

REPO = Path(__file__).resolve().parents[1]
POINT = {"suite": "block", "model": "gpt2-xl", "hardware": "cpu", "batch": 8, "seq": 1024,
         "precision": "fp32", "grad_accum": 1, "devices": 1, "sparsity": 0.0, "mode": "resident"}


def test_point_key_is_canonical_and_depends_on_everything():
    reordered = dict(reversed(list(POINT.items())))
    assert point_key(POINT) == point_key(reordered)
    assert len(point_key(POINT)) == 64
    assert point_key(POINT, "measured") != point_key(POINT, "predicted")
    for field, other in (("batch", 16), ("seq", 512), ("precision", "bf16"), ("sparsity", 0.9)):
        assert point_key({**POINT, field: other}) != point_key(POINT), field


def test_round_trip(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        key = db.record(POINT, metrics={"fwd_time_s": 0.5, "bound": "compute"},
                        environment={"torch_version": "2.13.0"}, study="transformer-block")
        assert db.has(key) and not db.has("0" * 64)
        row = db.get(key)
    assert row["point"] == POINT
    assert row["metrics"] == {"fwd_time_s": 0.5, "bound": "compute"}
    assert row["environment"] == {"torch_version": "2.13.0"}
    assert (row["suite"], row["model"], row["hardware"], row["source"], row["status"]) == \
        ("block", "gpt2-xl", "cpu", "measured", "ok")
    assert row["study"] == "transformer-block" and row["error"] is None and row["created_at"]
    # reopened from disk
    with ResultsDB(tmp_path / "r.db") as db:
        assert db.get(key) == row
        assert db.get("f" * 64) is None


def test_upsert_replaces(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        k1 = db.record(POINT, status="error", error="boom")
        k2 = db.record(POINT, metrics={"fwd_time_s": 0.25})
        assert k1 == k2 and db.count() == 1
        row = db.get(k1)
        assert row["status"] == "ok" and row["error"] is None and row["metrics"]["fwd_time_s"] == 0.25


def test_query_filters_and_shared_points(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        db.record(POINT, study="a")
        db.record({**POINT, "batch": 16}, study="a", status="oom", error="out of memory")
        db.record({**POINT, "model": "gpt2-small"}, source="predicted", study="b")
        db.record(POINT, study="b")  # the same point in a second study: one row, in both studies
        assert db.count() == 3
        assert len(db.query(study="a")) == 2 and len(db.query(study="b")) == 2
        assert [r["point"]["batch"] for r in db.query(status="oom")] == [16]
        assert len(db.query(source="predicted")) == 1
        assert len(db.query(model="gpt2-xl", source="measured")) == 2
        assert db.query(hardware="h100-sxm") == []
        assert db.studies() == {"a": 2, "b": 2}


def test_bad_source_or_status(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        with pytest.raises(ValueError, match="source"):
            db.record(POINT, source="guessed")
        with pytest.raises(ValueError, match="status"):
            db.record(POINT, status="maybe")
        assert db.count() == 0


def test_wal_mode(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        assert db.journal_mode == "wal"
        db.record(POINT)
    con = sqlite3.connect(tmp_path / "r.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent in the file
    con.close()


def test_path_from_env_then_default(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBENCH_DB", str(tmp_path / "env.db"))
    with ResultsDB() as db:
        assert db.path == tmp_path / "env.db"
    monkeypatch.delenv("LLMBENCH_DB")
    monkeypatch.chdir(tmp_path)
    with ResultsDB() as db:
        assert db.path.name == "llmbench-results.db"
    assert (tmp_path / "llmbench-results.db").exists()


_WRITER = textwrap.dedent("""
    import sys, time
    from llmbench.results import ResultsDB
    path, tag, n, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    with ResultsDB(path) as db:
        time.sleep(max(0.0, start - time.time()))  # both writers begin at the same moment
        for i in range(n):
            db.record({"suite": "fake", "model": tag, "hardware": "cpu", "i": i},
                      metrics={"i": i, "pad": "x" * 2000}, study=tag)
            db.record({"suite": "fake", "model": "shared", "hardware": "cpu", "i": i % 5},
                      metrics={"writer": tag})
""")


def test_concurrent_writer_processes(tmp_path):
    db_path = tmp_path / "c.db"
    n = 300
    start = time.time() + 2.5  # time for both interpreters to start, even on a loaded CI box
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(db_path), tag, str(n), str(start)],
                              stderr=subprocess.PIPE, text=True) for tag in ("w1", "w2")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with ResultsDB(db_path) as db:
        assert len(db.query(model="w1")) == n and len(db.query(model="w2")) == n
        assert len(db.query(model="shared")) == 5  # upserts from both writers, no duplicates
        assert db.integrity_check() == "ok"
        # the two writers really interleaved: their rows' time spans overlap
        spans = {tag: [r["created_at"] for r in db.query(model=tag)] for tag in ("w1", "w2")}
        assert max(min(v) for v in spans.values()) < min(max(v) for v in spans.values())


_KILLED = textwrap.dedent("""
    import sys
    from llmbench.results import ResultsDB
    with ResultsDB(sys.argv[1]) as db:
        i = 0
        while True:
            db.record({"suite": "fake", "model": "m", "hardware": "cpu", "i": i},
                      metrics={"i": i, "pad": "y" * 20000})
            if i == 20:
                print("ready", flush=True)
            i += 1
""")


def test_sigkill_mid_write_leaves_whole_rows(tmp_path):
    db_path = tmp_path / "k.db"
    p = subprocess.Popen([sys.executable, "-c", _KILLED, str(db_path)], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    with ResultsDB(db_path) as db:
        assert db.integrity_check() == "ok"
        rows = db.query()
        assert len(rows) > 20
        idx = sorted(r["point"]["i"] for r in rows)
        assert idx == list(range(len(idx)))  # a prefix: no hole, no half row
        assert all(r["metrics"] == {"i": r["point"]["i"], "pad": "y" * 20000} for r in rows)


def test_record_published_is_idempotent(tmp_path):
    with ResultsDB(tmp_path / "p.db") as db:
        keys = record_published(db)
        assert keys == record_published(db)
        n_rows = len(published_rows(PUBLISHED_CSV))
        assert db.count() == n_rows == len(keys) and n_rows > 30
        rows = {r["environment"]["id"]: r for r in db.query(source="published")}
    row = rows["cs2-bert-base-2048"]  # arXiv:2409.00287: BERT-base peak on CS-2
    assert row["metrics"] == {"samples_per_s": 14000}
    w = Workload.from_dict(row["point"])  # recorded under its Workload (Workload.from_row)
    assert (w.model, w.hardware, w.batch, w.seq_len, w.precision) == ("bert-base", "cs2", 2048, 128, "cbf16")
    assert row["workload_id"] == w.id() and (row["model"], row["hardware"]) == ("bert-base", "cs2")
    assert row["environment"]["reference"].startswith("arXiv:2409.00287")
    assert rows["emani-sparsity-gpt2xl"]["metrics"] == {"s0.9_over_dense": "1.8-2.0"}  # a range stays text
    # two published figures of one workload (BERT-large at 8192: samples/s, and the SST-2 epoch
    # time) are two rows with one workload_id, told apart by their ids
    a, b = rows["cs2-bert-large-8192"], rows["cs2-bert-large-sst2-epoch"]
    assert a["workload_id"] == b["workload_id"] and a["key"] != b["key"]
    # a row whose configuration is no workload is kept, saying why
    odd = rows["megatron-h100-mfu"]
    assert odd["workload_id"] is None and "up to 6144" in odd["environment"]["not_a_workload"]


def test_published_v2_reads_through_the_same_code(tmp_path):
    from llmbench.published import PUBLISHED_V2_CSV

    with ResultsDB(tmp_path / "p2.db") as db:
        keys = record_published(db, PUBLISHED_V2_CSV)
        assert len(keys) == len(set(keys)) == len(published_rows(PUBLISHED_V2_CSV)) > 150
        rows = db.query(source="published")
    assert sum(r["workload_id"] is not None for r in rows) >= len(rows) - 5
    assert {r["environment"]["file"] for r in rows} == {"llmbench/reference/published_v2.csv"}


W = Workload(suite="block", model="gpt2-xl", hardware="cpu", batch=8, seq_len=1024, precision="fp32")


def test_a_workload_is_keyed_by_its_id_and_joins_its_sources(tmp_path):
    with ResultsDB(tmp_path / "w.db") as db:
        km = db.record(W, metrics={"fwd_time_s": 0.5}, study="transformer-block")
        kp = db.record(W, source="predicted", metrics={"step_time_s": 0.4})
        kt = db.record(W, source="published", metrics={"step_time_s": 0.3}, tag="a-paper-row")
        assert (km, kp) == (W.key("measured"), W.key("predicted")) and len({km, kp, kt}) == 3
        row = db.get(km)
        assert row["point"] == W.to_dict() and row["workload_id"] == W.id()
        assert Workload.from_dict(row["point"]) == W
        assert (row["suite"], row["model"], row["hardware"]) == ("block", "gpt2-xl", "cpu")
        assert [r["source"] for r in db.query(workload_id=W.id())] == ["measured", "predicted", "published"]
        assert db.query(workload_id=W.with_(batch=16).id()) == []
        # a plain dict point (ceilings, a streaming run) has no workload id
        kd = db.record({"suite": "ceilings", "hardware": "cpu"}, metrics={"x": 1.0})
        assert db.get(kd)["workload_id"] is None and kd == point_key({"suite": "ceilings", "hardware": "cpu"})


def test_old_files_are_migrated_to_the_workload_column(tmp_path):
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)  # a version-1 file: no workload_id column
    con.executescript("""
        CREATE TABLE results (key TEXT PRIMARY KEY, study TEXT, suite TEXT, source TEXT NOT NULL,
            model TEXT, hardware TEXT, status TEXT NOT NULL, error TEXT, point TEXT NOT NULL,
            metrics TEXT NOT NULL, environment TEXT NOT NULL, created_at TEXT NOT NULL);
        CREATE TABLE study_points (study TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (study, key));
        INSERT INTO results VALUES ('k1', 'gas', 'train', 'measured', 'gpt2-xl', 'cpu', 'ok', NULL,
            '{"batch":2,"seq":128}', '{"tokens_per_s":1.0}', '{}', '2026-01-01T00:00:00');
        PRAGMA user_version = 1;
    """)
    con.close()
    with ResultsDB(path, readonly=True) as db:  # read as it is: the old rows, no workload ids
        assert db.schema_version == 1 and [r["workload_id"] for r in db.query()] == [None]
        assert db.query(workload_id=W.id()) == []
    with ResultsDB(path) as db:  # a writable open adds the column and stamps the version
        assert db.schema_version == SCHEMA_VERSION == 2
        assert db.get("k1")["point"] == {"batch": 2, "seq": 128} and db.get("k1")["workload_id"] is None
        db.record(W)
        assert [r["workload_id"] for r in db.query(workload_id=W.id())] == [W.id()]
    with ResultsDB(path) as db:  # opened again: nothing to migrate
        assert db.count() == 2
