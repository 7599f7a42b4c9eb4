"""The seed-fidelity table: one row per claim of the seed documents (`studies/specs/claims.toml`),
each with the value llmbench computes for it now and a verdict computed from that value.

    from llmbench.studies.fidelity import fidelity
    fid = fidelity(db)          # {"rows": [...], "counts": {...}}; `llmbench reproduce` runs it

A claim says how llmbench answers it (`check`): a published row of `llmbench validate`
(`validate`, `trend`), a prediction (`predict`, a ratio of two, a `series` that must rise, fall
or stay flat, a system that must `beat` another, workloads that must `fit` or `run`, a layout
the model must `refuse`), a catalog / model / data-set number, or a measurement in the results
database (`measured`). `none` is a claim llmbench has no counterpart for: verdict `missing`.

Verdicts (the key is on the report page): numbers within `tolerance` (default 25 %, 0 inside a
published range) are `reproduced`, within a factor `factor` (default 2) `partial`, beyond it
`contradicted`; a trend, ordering or feature that holds is `reproduced`, one that does not is
`contradicted`; a check that cannot be computed (the model refuses, nothing measured) is
`missing`. A claim llmbench covers only in part says so (`scope = "partial"`, `scope_note`): a
`reproduced` verdict then reads `partial`. No verdict is typed in.
"""
from __future__ import annotations

from pathlib import Path

from llmbench._toml import tomllib
from llmbench.studies import fidelity_checks as checks
from llmbench.studies.verdict import Outcome, parse_published

CLAIMS = Path(__file__).parent / "specs" / "claims.toml"
VERDICTS = ("reproduced", "partial", "missing", "contradicted")


def load_claims(path: str | Path = CLAIMS) -> list[dict]:
    """The claims, in file order; ids unique (a duplicate is a mistake in the file)."""
    with open(path, "rb") as f:
        claims = tomllib.load(f)["claim"]
    ids = [c["id"] for c in claims]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"{path}: claim ids repeated: {', '.join(sorted(dup))}")
    return claims


def fidelity(db=None, claims: list[dict] | None = None, *, validation: dict | None = None) -> dict:
    """Every claim's row and the counts per verdict (and per seed); `db` supplies measurements."""
    claims = load_claims() if claims is None else claims
    ctx = checks.Context(db=db, validation=validation)
    rows = []
    for c in claims:
        try:
            out = checks.run_check(c, ctx)
        except Exception as e:  # noqa: BLE001 - a check that breaks is a missing answer, shown as such
            out = Outcome(value="—", verdict="missing", source="—",
                          detail=f"check failed: {type(e).__name__}: {e}".splitlines()[0][:200])
        verdict = out.verdict
        if c.get("scope") == "partial" and verdict == "reproduced":
            verdict = "partial"
        rows.append({"id": c["id"], "seed": c["seed"], "where": c["where"], "claim": c["claim"],
                     "published": str(c.get("published", "")), "llmbench": out.value,
                     "source": out.source, "verdict": verdict, "tolerance": tolerance_text(c),
                     "detail": "; ".join(x for x in (out.detail, c.get("scope_note", ""), c.get("note", ""))
                                         if x),
                     "check": c["check"]})
    return {"rows": rows, "counts": counts_of(rows), "headline": ctx.headline()}


def tolerance_text(c: dict) -> str:
    if c["check"] in ("validate",):
        return "validate's tolerance"
    if c["check"] in ("none",):
        return ""
    if c["check"] == "series":
        return f"{c.get('expect')} by ≥ {c.get('min_change', 0.0):.0%}" if c.get("expect") != "flat" \
            else f"flat within {c.get('min_change', 0.05):.0%}"
    if c.get("published") and parse_published(c["published"]) and c["check"] in (
            "predict", "catalog", "dataset", "measured", "validate"):
        return f"±{c.get('tolerance', 0.25):.0%} (partial within {c.get('factor', 2.0):g}×)"
    return "holds / does not"


def counts_of(rows: list[dict]) -> dict:
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    by_seed = {}
    for r in rows:
        by_seed.setdefault(r["seed"], {v: 0 for v in VERDICTS})[r["verdict"]] += 1
    return {**counts, "total": len(rows), "by_seed": by_seed}


def counts_line(counts: dict) -> str:
    return (f"{counts['total']} seed claims: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS))


def record(db, fid: dict) -> None:
    """One row per claim in the results database, study "fidelity" (what `llmbench report` draws)."""
    for r in fid["rows"]:
        db.record({"suite": "fidelity", "claim": r["id"]}, source="predicted", study="fidelity",
                  metrics={f"fidelity_{k}": r[k] for k in FIELDS}, environment={"command": "llmbench reproduce"})


#: the columns a fidelity row carries (report/rows.py declares them for the report)
FIELDS = ("id", "seed", "where", "claim", "published", "llmbench", "source", "verdict", "tolerance",
          "detail", "check")
