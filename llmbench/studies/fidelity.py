"""The seed-fidelity table: one row per claim of the seed documents (`studies/specs/claims.toml`),
each with the value llmbench computes for it now and a verdict computed from that value.

    from llmbench.studies.fidelity import fidelity
    fid = fidelity(db)          # {"rows": [...], "counts": {...}}; `llmbench reproduce` runs it

A claim says how llmbench answers it (`check`): a published row of `llmbench validate`
(`validate`, `trend`), a prediction (`predict`, a ratio of two, a `series` that must rise, fall
or stay flat, a system that must `beat` another, workloads that must `fit` or `run`, a layout
the model must `refuse`), a catalog / model / data-set number, or a measurement in the results
database (`measured`). `none` is a claim llmbench has no counterpart for: verdict `missing`.

Verdict classes (the key is on the report page; studies/fidelity_judge.py turns a value into one):
- `reproduced`: a number the project computed (the leave-one-source-out prediction `validate`
  reports for a published row, a prediction whose inputs do not include the seed's number, or a
  measurement) matches the seed within the claim's tolerance, and the claim's null model (a flat
  series, no effect, perfect scaling: `null`) does not;
- `in-sample`: matches only with the row inside the fit (the pooled in-sample fit, or a shipped
  profile fitted on that row);
- `input`: a value the project takes from the seed (catalog, preset, data set, a configuration
  rule): listed, never counted as reproduced;
- `partial`: within `factor` (default 2), or holds only in part (`scope = "partial"`), or holds by
  the model's construction (`forced`), or with a null model that passes too;
- `missing`: the model cannot compute it (it refuses, nothing measured, no counterpart);
- `contradicted`: beyond the factor, or the trend / ordering does not hold.
A partial, missing or contradicted row names its `mechanism` (what the model lacks or does). No
verdict is typed in.
"""
from __future__ import annotations

from pathlib import Path

from llmbench._toml import tomllib
from llmbench.studies import fidelity_checks as checks
from llmbench.studies.verdict import Outcome, parse_published

CLAIMS = Path(__file__).parent / "specs" / "claims.toml"
VERDICTS = ("reproduced", "in-sample", "partial", "missing", "contradicted", "input")
INPUT_CHECKS = ("catalog", "model", "dataset")


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
        verdict, why = classify(c, out)
        rows.append({"id": c["id"], "seed": c["seed"], "where": c["where"], "claim": c["claim"],
                     "published": str(c.get("published", "")), "llmbench": out.value,
                     "source": out.source, "verdict": verdict, "tolerance": tolerance_text(c),
                     "mechanism": mechanism_text(c, verdict, why),
                     "detail": "; ".join(x for x in (out.detail, c.get("scope_note", ""), c.get("note", "")) if x),
                     "check": c["check"], "kind": out.kind, "raw": out.raw})
    return {"rows": rows, "counts": counts_of(rows), "headline": ctx.headline()}


def classify(c: dict, out: Outcome) -> tuple[str, str]:
    """(verdict class, why it is not the judge's verdict) of one claim's outcome."""
    from llmbench.studies.fidelity_judge import judge, null_raw

    if c["check"] in INPUT_CHECKS or c.get("input"):
        return "input", c.get("input") if isinstance(c.get("input"), str) else "a value taken from the seed"
    v = out.verdict
    if v != "reproduced":
        return v, ""
    if "in-sample" in out.source:
        return "in-sample", "the fit includes this published row"
    if out.kind:
        n = null_raw(out.kind, c, out.raw)
        if n is not None and judge(out.kind, c, n)[0] == "reproduced":
            return "partial", "a null model (" + null_name(out.kind, c) + ") passes the same check"
    if c.get("forced"):
        return "partial", "holds by the model's construction: " + c["forced"]
    if c.get("scope") == "partial":
        return "partial", "covered in part"
    return v, ""


def null_name(kind: str, c: dict) -> str:
    return {"series": "a flat series", "compare": "two equal values", "cases": "equal values"}.get(
        kind, f"{c.get('null_name', 'no effect')}: {c.get('null')}")


def mechanism_text(c: dict, verdict: str, why: str) -> str:
    """What makes the row less than reproduced: the class's reason and the claim's named mechanism."""
    if verdict == "reproduced":
        return ""
    parts = [why] if why else []
    if c.get("mechanism"):
        parts.append(c["mechanism"])
    return "; ".join(parts)


def tolerance_text(c: dict) -> str:
    if c["check"] in ("validate",):
        return f"held out ±{c.get('tolerance', 0.25):.0%} (partial within {c.get('factor', 2.0):g}×)" + \
            (f"; null model {c['null']:g}" if "null" in c else "")
    if c["check"] in ("none",):
        return ""
    if c["check"] == "series":
        k = c.get("min_change", 0.05)
        return {"flat": f"flat within {k:.0%}", "peak": f"peak at {c.get('peak_at')}, then −{k:.0%}",
                "not_falling": f"last within {k:.0%} of the highest"}.get(c["expect"], f"{c['expect']} by ≥ {k:.0%}")
    if c.get("published") and parse_published(c["published"]) and c["check"] in (
            "predict", "catalog", "dataset", "measured", "validate"):
        return f"±{c.get('tolerance', 0.25):.0%} (partial within {c.get('factor', 2.0):g}×)" + \
            (f"; null model {c['null']:g}" if "null" in c else "")
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
          "mechanism", "detail", "check")
