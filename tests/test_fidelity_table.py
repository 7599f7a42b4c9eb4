"""The shipped seed-fidelity table, computed once for this module (~25-45 s on a loaded 2-core CPU):
every non-input claim's check can fail (the mutation test), no check that cannot fail is counted
reproduced, every row below reproduced names its mechanism, and the counts quoted in README.md,
docs/reproduce.md and docs/results/fidelity.md are the ones a fresh run computes.

    .venv/bin/python -m pytest -q tests/test_fidelity_table.py
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmbench.studies.fidelity import VERDICTS, classify, counts_line, fidelity, load_claims
from llmbench.studies.fidelity_judge import judge, mutants, null_raw
from llmbench.studies.verdict import Outcome

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fid():
    return fidelity()  # what `llmbench reproduce --quick --no-measure` computes (no measurements)


@pytest.fixture(scope="module")
def claims():
    return {c["id"]: c for c in load_claims()}


def _class(c, kind, raw, source):
    verdict, shown, _ = judge(kind, c, raw)
    return classify(c, Outcome(value=shown, verdict=verdict, source=source, raw=raw, kind=kind))[0]


def test_every_non_input_claim_changes_verdict_under_a_mutation(fid, claims):
    """x 0.5, x 2, a flat or reversed series, equal values, a refusal, the null model: at least one
    perturbation of the project's value changes each computed claim's verdict."""
    stuck = []
    for r in fid["rows"]:
        if r["verdict"] == "input" or r["raw"] is None:
            continue
        c = claims[r["id"]]
        got = {_class(c, r["kind"], m, r["source"]) for m in mutants(r["kind"], c, r["raw"])}
        if not got - {r["verdict"]}:
            stuck.append(f"{r['id']} ({r['verdict']}: {sorted(got)})")
    assert not stuck, "checks that cannot be made to fail: " + ", ".join(stuck)


def test_a_reproduced_row_fails_its_null_model_and_is_out_of_sample(fid, claims):
    for r in fid["rows"]:
        if r["verdict"] != "reproduced":
            continue
        c = claims[r["id"]]
        assert "in-sample" not in r["source"] and c["check"] not in ("runs", "refuses", "catalog", "none") \
            or "equals" in c, r["id"]
        n = null_raw(r["kind"], c, r["raw"])
        if n is not None:
            assert judge(r["kind"], c, n)[0] != "reproduced", f"{r['id']}: the null model passes"
        assert not c.get("forced") and c.get("scope") != "partial", r["id"]


def test_a_mutation_of_the_project_value_is_caught_on_known_rows(claims):
    """The judges themselves: a flat series no longer passes 'rising', a ratio near 1 is not
    reproduced when the null (perfect scaling) would be, a reversed ranking is contradicted."""
    rising = claims["002-8"]
    assert judge("series", rising, [(8, 152.0), (16, 192.0), (64, 239.0)])[0] == "reproduced"
    assert judge("series", rising, [(8, 152.0), (16, 152.0), (64, 152.0)])[0] == "contradicted"
    cs2 = claims["002-16"]
    raw = {"loso": 0.997, "in_sample": 0.997, "shipped": 0.998, "tolerance": 0.25}
    assert _class(cs2, "validate", raw, "predicted, leave one source out") == "partial"  # null 1.0 passes too
    rank = claims["002-44"]
    good = [[("g", 1.04)], [("b", 1.0)], [("c", 0.96)], [("s", 0.8), ("m", 0.8)], [("a", 0.76)]]
    assert judge("ranking", rank, good)[0] == "reproduced"
    assert judge("ranking", rank, good[::-1])[0] == "contradicted"


def test_at_least_95_claims_each_with_a_class_and_the_mechanism_when_below_reproduced(fid, claims):
    rows = fid["rows"]
    assert len(rows) == len(claims) >= 95 and [r["id"] for r in rows] == list(claims)
    assert all(r["verdict"] in VERDICTS for r in rows)
    assert sum(fid["counts"][v] for v in VERDICTS) == fid["counts"]["total"] == len(rows)
    unnamed = [r["id"] for r in rows if r["verdict"] in ("contradicted", "missing", "partial", "in-sample", "input")
               and not r["mechanism"]]
    assert not unnamed, f"rows below reproduced without a mechanism: {unnamed}"


def _quoted(text: str) -> list[str]:
    return re.findall(r"\d+ seed claims: [^.\n]*?\d+ input", text.replace("\n", " "))


def test_the_counts_quoted_in_the_docs_are_a_fresh_runs(fid):
    line = counts_line(fid["counts"])
    for name in ("README.md", "docs/reproduce.md", "docs/results/fidelity.md"):
        text = (ROOT / name).read_text()
        quoted = _quoted(text)
        assert quoted, f"{name} quotes no fidelity counts"
        assert all(re.sub(r"\s+", " ", q) == line for q in quoted), f"{name}: {quoted} != fresh {line!r}"
        stale = re.findall(r"\d+ seed claims: \d+ reproduced, \d+ partial", text)
        assert not stale, f"{name} still quotes old counts: {stale}"


def test_the_validation_median_quoted_in_the_readme_is_a_fresh_runs(fid):
    med = fid["headline"]["median_abs_error"]
    assert fid["headline"]["kind"] == "leave one source out"
    readme = (ROOT / "README.md").read_text().replace("\n", " ")
    m = re.search(r"leave-one-source-out error on .*?\(median (\d+\.\d)%; training (\d+\.\d)%, "
                  r"serving (\d+\.\d)%", readme)
    kinds = fid["headline"]["by_kind"]
    fresh = [f"{x * 100:.1f}" for x in (med, kinds["training"], kinds["serving"])]
    assert m and list(m.groups()) == fresh, (m and m.groups(), fresh)
    assert f"median |error| {med:.1%}" in (ROOT / "docs/results/fidelity.md").read_text()


def test_the_table_is_recorded_and_drawn_one_row_per_claim(fid, tmp_path):
    from llmbench.report.fidelity import fidelity_table
    from llmbench.report.rows import Data
    from llmbench.results import ResultsDB
    from llmbench.studies.fidelity import record

    with ResultsDB(tmp_path / "t.db") as db:
        record(db, fid)
        table = fidelity_table(Data.from_db(db))
    n = len(fid["rows"])
    assert len(table.rows) == n and table.note.startswith(counts_line(fid["counts"]))
    assert "mechanism" in table.columns and {r[table.columns.index("verdict")] for r in table.rows} <= set(VERDICTS)


def test_a_claims_twin_can_take_a_value_from_its_point():
    """'=field' in a claim's table is that field's value: 002-54's GAS-1 twin runs one sequence a
    device at each device count of its series."""
    from llmbench.studies.verdict import workload_of

    w = workload_of({"model": "gpt2-xl", "hardware": "a100-40gb", "devices": 16, "batch": 64, "grad_accum": 4},
                    {"grad_accum": 1, "batch": "=devices"})
    assert (w.batch, w.devices, w.grad_accum) == (16, 16, 1)
