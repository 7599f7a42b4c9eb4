"""The results DB checked on open (one BadInput line naming the file for every unusable file),
read-only use, sqlite URI pitfalls, and nothing lost when a write fails (side files)."""
import json
import os
import sqlite3
import hashlib

import pytest

from llmbench.errors import BadInput
from llmbench.results import ResultsDB
from llmbench.results.safe import check_writable, load_saved, record_or_save
from llmbench.results.store import SCHEMA_VERSION, connect, open_readonly

POINT = {"suite": "train", "model": "gpt2-small", "hardware": "cpu", "batch": 2, "seq": 64,
         "precision": "fp32"}


def _filled(path, n=200):
    with ResultsDB(path) as db:
        for i in range(n):
            db.record({**POINT, "i": i}, metrics={"tokens_per_s": float(i), "pad": "x" * 2000},
                      study="s")
    return path


def _bad(path, match, **kw):
    with pytest.raises(BadInput, match=match) as e:
        with ResultsDB(path, **kw) as db:
            db.query()
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg
    return msg


# ---------------------------------------------------------------- unusable files

def test_not_sqlite(tmp_path):
    (tmp_path / "t.db").write_text("x\n" * 100)
    _bad(tmp_path / "t.db", "not an SQLite database")
    _bad(tmp_path / "t.db", "not an SQLite database", readonly=True)


@pytest.mark.parametrize("keep", [0.5, 0.02])
def test_truncated(tmp_path, keep):
    data = _filled(tmp_path / "full.db").read_bytes()
    (tmp_path / "t.db").write_bytes(data[:int(len(data) * keep)])
    _bad(tmp_path / "t.db", "corrupt or truncated")


def test_corrupt_pages(tmp_path):
    path = _filled(tmp_path / "c.db")
    data = bytearray(path.read_bytes())
    mid = len(data) // 2 // 4096 * 4096
    data[mid:mid + 4096] = b"\xff" * 4096  # a page in the middle of the results table
    path.write_bytes(bytes(data))
    _bad(path, "corrupt")


def test_directory_and_special_files(tmp_path):
    _bad(tmp_path, "is a directory")
    _bad(tmp_path, "is a directory", readonly=True)
    _bad("/dev/null", "not a regular file")


def test_missing_parent_is_not_created(tmp_path):
    msg = _bad(tmp_path / "no" / "such" / "r.db", "does not exist")
    assert "directory" in msg and not (tmp_path / "no").exists()
    (tmp_path / "f").write_text("")
    _bad(tmp_path / "f" / "r.db", "not a directory")


def test_missing_in_readonly_mode(tmp_path):
    _bad(tmp_path / "none.db", "no results database", readonly=True)
    assert not (tmp_path / "none.db").exists()


def test_name_too_long(tmp_path):
    _bad(tmp_path / ("a" * 300 + ".db"), "too long")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    path = _filled(tmp_path / "u.db", 1)
    path.chmod(0)
    _bad(path, "cannot be opened|permission|Permission")


def test_another_programs_schema(tmp_path):
    con = sqlite3.connect(tmp_path / "o.db")
    con.execute("CREATE TABLE accounts (id, owner)")
    con.commit()
    con.close()
    msg = _bad(tmp_path / "o.db", "not an llmbench results database")
    assert "accounts" in msg
    con = sqlite3.connect(tmp_path / "r.db")
    con.execute("CREATE TABLE results (id, value)")  # the name, not the layout
    con.commit()
    con.close()
    assert "lacks column" in _bad(tmp_path / "r.db", "not an llmbench results database")


def test_newer_schema_version_and_legacy_upgrade(tmp_path):
    path = _filled(tmp_path / "v.db", 3)
    with ResultsDB(path) as db:
        assert db.schema_version == SCHEMA_VERSION
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()
    _bad(path, "newer than this llmbench")
    # a file written before the version was stamped (0) is the same layout: read, then stamped
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 0")
    con.commit()
    con.close()
    with ResultsDB(path, readonly=True) as db:
        assert db.count() == 3 and db.schema_version == 0
    with ResultsDB(path) as db:
        assert db.count() == 3 and db.schema_version == SCHEMA_VERSION


@pytest.mark.parametrize("name", ["a?b.db", "a#b.db", "a%3Fb.db", "we ird&mode=ro.db"])
def test_uri_characters_are_part_of_the_name(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    with ResultsDB(name) as db:
        db.record(POINT)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # not `a`, not `a?b.db` for `a%3Fb.db`
    with ResultsDB(name, readonly=True) as db:
        assert db.count() == 1


def test_connect_for_foreign_files(tmp_path, monkeypatch):
    """What `calibrate --from 'a?b.db'` needs: a plain read-only connection to a?b.db, not `a`."""
    monkeypatch.chdir(tmp_path)
    con = sqlite3.connect("a?b.db")
    con.execute("CREATE TABLE results (metric, value)")
    con.execute("INSERT INTO results VALUES ('tokens_per_s', 5)")
    con.commit()
    con.close()
    (tmp_path / "a").write_text("decoy")
    con = connect("a?b.db")
    assert con.execute("SELECT * FROM results").fetchall() == [("tokens_per_s", 5)]
    con.close()
    with pytest.raises(BadInput, match="no results database at missing.db"):
        connect("missing.db")


def test_a_row_that_no_longer_reads_is_skipped_and_named(tmp_path):
    """One bad row (invalid JSON, a point stored as a JSON list, a Workload that no longer
    validates) is skipped by query() and named in skipped_line(); the other rows are read; get()
    of that row still raises BadInput naming the file."""
    from llmbench.point import Workload

    path = _filled(tmp_path / "r.db", 50)
    with ResultsDB(path) as db:
        db.record(Workload(model="gpt2-small", hardware="cpu", batch=4, seq_len=64), metrics={"x": 1.0})
    con = sqlite3.connect(path)
    con.execute("UPDATE results SET metrics = 'not json' WHERE rowid = 1")
    con.execute("UPDATE results SET point = '[1, 2]' WHERE rowid = 2")
    con.execute("UPDATE results SET point = json_set(point, '$.batch', -1) WHERE workload_id IS NOT NULL")
    key1 = con.execute("SELECT key FROM results WHERE rowid = 1").fetchone()[0]
    con.commit()
    con.close()
    db = ResultsDB(path, readonly=True)
    rows = db.query()
    assert len(rows) == 48 and len(db.skipped) == 3
    line = db.skipped_line()
    assert str(path) in line and "skipped 3 row(s)" in line and "\n" not in line
    reasons = " ".join(db.skipped.values())
    assert "invalid JSON in column metrics" in reasons and "JSON list in column point" in reasons
    assert "batch must be >= 1" in reasons
    with pytest.raises(BadInput, match="invalid JSON in column metrics") as e:
        db.get(key1)
    assert str(path) in str(e.value)
    db.close()


def test_readers_survive_a_bad_row(tmp_path, cli):
    """`results list`, `results export` (csv, json) answer with the good rows and one warning line."""
    path = _filled(tmp_path / "r.db", 3)
    con = sqlite3.connect(path)
    con.execute("UPDATE results SET point = '[1, 2]' WHERE rowid = 1")
    con.execute("UPDATE results SET metrics = '{\"tokens_per_s\": NaN}' WHERE rowid = 2")
    con.commit()
    con.close()
    for argv in (["results", "list", "--db", str(path), "--json"],
                 ["results", "export", "--db", str(path), "--format", "json"],
                 ["results", "export", "--db", str(path), "--format", "csv"]):
        code, out, err = cli(*argv)
        assert code in (0, None), (argv, err)
        assert "skipped 1 row(s)" in err and len(err.strip().splitlines()) == 1, err
        if "json" in argv:
            assert "NaN" not in out and json.loads(out)  # strict JSON: NaN written as null


# ---------------------------------------------------------------- read-only use

def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_readonly_reads_and_never_writes(tmp_path):
    path = tmp_path / "j.db"
    _filled(path, 5)
    con = sqlite3.connect(path)  # a rollback-journal file: a writer would switch it to WAL
    con.execute("PRAGMA journal_mode = DELETE")
    con.close()
    before = _digest(path)
    with ResultsDB(path, readonly=True) as db:
        assert db.count() == 5 and len(db.query(study="s")) == 5 and db.studies() == {"s": 5}
        key = db.query()[0]["key"]
        assert db.get(key)["point"]["i"] == 0 and db.has(key)
        assert db.journal_mode == "delete"
        for write in (lambda: db.record(POINT), lambda: db.link("t", key), lambda: db.delete(key)):
            with pytest.raises(BadInput, match="read-only"):
                write()
    assert _digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["j.db"]


def test_open_readonly_missing_ok(tmp_path):
    with open_readonly(tmp_path / "absent.db", missing_ok=True) as db:
        assert db.query() == [] and db.count() == 0
    assert not (tmp_path / "absent.db").exists()
    with pytest.raises(BadInput, match="no results database"):
        open_readonly(tmp_path / "absent.db")
    with open_readonly(_filled(tmp_path / "r.db", 1)) as db:
        assert db.readonly and db.count() == 1


def test_readonly_empty_file_lists_nothing(tmp_path):
    (tmp_path / "e.db").write_bytes(b"")
    with ResultsDB(tmp_path / "e.db", readonly=True) as db:
        assert db.query() == [] and db.count() == 0 and db.studies() == {}
    assert (tmp_path / "e.db").read_bytes() == b""  # no CREATE TABLE in the file


def test_readonly_wal_file_whose_wal_cannot_be_created(tmp_path):
    """A WAL database in a read-only directory, closed cleanly (no -wal/-shm left): SQLite cannot
    create them. Simulated here (root writes anywhere) by directories in their place."""
    path = _filled(tmp_path / "w.db", 4)
    assert not (tmp_path / "w.db-wal").exists()
    (tmp_path / "w.db-wal").mkdir()
    (tmp_path / "w.db-shm").mkdir()
    with ResultsDB(path, readonly=True) as db:
        assert db.count() == 4 and len(db.query(study="s")) == 4
    with pytest.raises(BadInput, match="cannot be opened"):
        ResultsDB(path).record(POINT)


# ---------------------------------------------------------------- nothing lost

def test_check_writable(tmp_path):
    path = check_writable(tmp_path / "new.db")
    assert path == tmp_path / "new.db" and not path.exists()  # a new DB: nothing made yet
    _filled(path, 2)
    assert check_writable(path) == path
    with ResultsDB(path) as db:
        assert db.count() == 2 and db.studies() == {"s": 2}  # the write check was rolled back
    (tmp_path / "text.db").write_text("not a database\n" * 10)
    with pytest.raises(BadInput, match="text.db is not an SQLite database"):
        check_writable(tmp_path / "text.db")
    with pytest.raises(BadInput, match="does not exist"):
        check_writable(tmp_path / "nope" / "r.db")


def test_record_or_save_records_when_it_can(tmp_path):
    key = record_or_save(tmp_path / "ok.db", POINT, metrics={"tokens_per_s": 1.5})
    with ResultsDB(tmp_path / "ok.db") as db:
        assert db.get(key)["metrics"] == {"tokens_per_s": 1.5}


def test_failed_write_saves_a_side_file_next_to_the_db(tmp_path):
    bad = tmp_path / "t.db"
    bad.write_text("x\n")  # `echo x > t.db` (issue 12)
    with pytest.raises(BadInput) as e:
        record_or_save(bad, POINT, metrics={"tokens_per_s": 2.5, "mfu": float("nan")},
                       environment={"torch": "2.13"}, study="demo")
    msg = str(e.value)
    (side,) = tmp_path.glob("t.db.unsaved-*.json")
    assert "not an SQLite database" in msg and str(side) in msg and "\n" not in msg
    saved = json.loads(side.read_text())  # strict JSON: NaN written as text
    assert saved["row"]["metrics"] == {"tokens_per_s": 2.5, "mfu": "nan"}
    assert saved["row"]["point"] == POINT and saved["db"] == str(bad)
    # once a usable DB is given, the result goes in as it was measured
    key = load_saved(tmp_path / "good.db", side)
    with ResultsDB(tmp_path / "good.db") as db:
        row = db.get(key)
    assert row["metrics"]["tokens_per_s"] == 2.5 and row["study"] == "demo"
    assert row["environment"] == {"torch": "2.13"} and row["created_at"] == saved["row"]["created_at"]


def test_side_file_goes_to_the_current_directory_when_the_db_folder_is_unusable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match="saved to") as e:
        record_or_save(tmp_path / "gone" / "r.db", POINT, metrics={"x": 1})
    (side,) = tmp_path.glob("r.db.unsaved-*.json")
    assert str(side.name) in str(e.value) and "does not exist" in str(e.value)


def test_load_saved_rejects_other_files(tmp_path):
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(BadInput, match="not a saved llmbench result"):
        load_saved(tmp_path / "r.db", tmp_path / "x.json")
    (tmp_path / "y.json").write_bytes(b"\xff\xfe")
    with pytest.raises(BadInput, match="cannot read"):
        load_saved(tmp_path / "r.db", tmp_path / "y.json")


def test_a_saved_workload_result_loads_back_under_its_key(tmp_path):
    from llmbench.point import Workload

    w = Workload(model="gpt2-small", hardware="cpu", batch=2, seq_len=64, precision="fp32")
    bad = tmp_path / "dir.db"
    bad.mkdir()
    with pytest.raises(BadInput, match="saved to"):
        record_or_save(bad, w, source="published", metrics={"x": 1.0}, tag="row-7")
    (side,) = tmp_path.glob("dir.db.unsaved-*.json")
    key = load_saved(tmp_path / "good.db", side)
    with ResultsDB(tmp_path / "good.db") as db:
        row = db.get(key)
    assert row["workload_id"] == w.id() and Workload.from_dict(row["point"]) == w
    assert key != w.key("published")  # the tag's key, kept
    text = side.read_text().replace('"batch": 2', '"batch": 3')  # edited: no longer its workload
    side.write_text(text)
    with pytest.raises(BadInput, match="does not match its workload_id"):
        load_saved(tmp_path / "good.db", side)


def test_the_report_survives_a_row_that_no_longer_validates(tmp_path, cli):
    """A row whose Workload no longer validates (batch -1) is left out of `llmbench report` and
    named on one stderr line; the report of the other rows is written (was: the whole report stopped
    with 'batch must be >= 1, got -1', naming neither database nor row)."""
    from llmbench.point import Workload

    path = tmp_path / "r.db"
    with ResultsDB(path) as db:
        for b in (2, 4):
            db.record(Workload(model="gpt2-small", hardware="cpu", batch=b, seq_len=64), metrics={"tokens_per_s": 10.0 * b})
    con = sqlite3.connect(path)
    con.execute("UPDATE results SET point = json_set(point, '$.batch', -1) WHERE rowid = 1")
    con.commit()
    con.close()
    code, out, err = cli("report", "--db", str(path), "--out", str(tmp_path / "out"), "--no-predict", "--json")
    assert code in (0, None), err
    assert "skipped 1 row(s)" in err and str(path) in err
    assert json.loads(out)["skipped_rows"] == 1 and (tmp_path / "out" / "report.html").exists()
