"""llmbench/published.py, the one reader of the published tables: the shipped tables read whole,
a malformed table refused in one line naming the file and line, values parsed as ranges."""
from __future__ import annotations

import pytest

from llmbench.errors import BadInput
from llmbench.published import PUBLISHED_CSV, PUBLISHED_V2_CSV, parse_range, published_rows

HEADER = "id,source,system,model,task,metric,value,unit,notes"
GOOD = "a1,Paper (2024),a100-80gb,gpt2-xl,train,tokens_per_s,14000,tokens/s,"


def _table(tmp_path, *lines, name="published_test.csv"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_the_shipped_tables_read_whole():
    v1, v2 = published_rows(PUBLISHED_CSV), published_rows(PUBLISHED_V2_CSV)
    assert len(v1) == 38 and len(v2) == 294  # every line of each file but its header
    assert len({r["id"] for r in v2}) == len(v2) and all(r["source"] for r in v2)
    v2[0]["value"] = "0"  # a caller's copy: the next read is the file's
    assert published_rows(PUBLISHED_V2_CSV)[0]["value"] != "0"


def test_a_good_table_and_its_values(tmp_path):
    rows = published_rows(_table(tmp_path, HEADER, GOOD, GOOD.replace("a1,", "a2,").replace("14000", "1.8-2.0")))
    assert [parse_range(r["value"]) for r in rows] == [(14000.0, 14000.0), (1.8, 2.0)]
    assert parse_range("peaks at batch 2048") is None and parse_range(3) == (3.0, 3.0)
    assert parse_range("1-2-3") is None and parse_range(True) is None


@pytest.mark.parametrize("lines, words", [
    ((HEADER, GOOD + ",extra"), r"published_test.csv line 2: 10 cells, the header has 9 columns"),
    ((HEADER, GOOD.rsplit(",", 2)[0]), r"published_test.csv line 2: 7 cells, the header has 9 columns"),
    ((HEADER, GOOD, GOOD), r"published_test.csv line 3: id 'a1' repeats line 2"),
    ((HEADER, GOOD.replace("Paper (2024)", "")), r"published_test.csv line 2 \(a1\): empty source"),
    ((HEADER, GOOD.replace(",train,", ",serve,")), r"line 2 \(a1\): task 'serve', not one of train, infer"),
    ((HEADER.replace(",unit", ""), GOOD.replace(",tokens/s", "")), r"published_test.csv: the header lacks column\(s\) unit"),
])
def test_a_malformed_table_is_one_line_naming_file_and_line(tmp_path, lines, words):
    with pytest.raises(BadInput, match=words) as e:
        published_rows(_table(tmp_path, *lines))
    assert "\n" not in str(e.value)


def test_not_a_table_is_one_line(tmp_path):
    bad = tmp_path / "published_bytes.csv"
    bad.write_bytes(b"id,source\n\xff\xfe\n")
    for path, words in ((tmp_path, "is a directory"), (tmp_path / "nope.csv", "(?i)no such"),
                        (bad, "not UTF-8")):
        with pytest.raises(BadInput, match=words):
            published_rows(path)


def test_the_cli_refuses_a_malformed_table_with_exit_2(tmp_path, monkeypatch, cli):
    from llmbench.results import published as rp

    monkeypatch.setattr(rp, "PUBLISHED_CSV", _table(tmp_path, HEADER, GOOD, GOOD))
    code, out, err = cli("results", "load-published", "--db", str(tmp_path / "r.db"))
    assert code == 2 and out == "" and err.strip().count("\n") == 0
    assert "published_test.csv line 3: id 'a1' repeats line 2" in err
