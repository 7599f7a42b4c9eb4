"""The seed-fidelity table of the report: the rows `llmbench reproduce` computed
(llmbench/studies/fidelity.py) and stored as study "fidelity", one per seed claim, with counts.

    from llmbench.report.fidelity import fidelity_table
    fidelity_table(Data.from_db(db))    # -> Table (empty rows: reproduce has not run)
"""
from __future__ import annotations

from .rows import Data, value
from .tables import Table

VERDICTS = ("reproduced", "in-sample", "partial", "missing", "contradicted", "input")
COLUMNS = ("id", "seed", "where", "claim", "published", "llmbench", "source", "verdict", "tolerance", "mechanism",
           "detail")
SEEDS = {"000": "Zhang et al., arXiv:2409.00287 (summary)", "001": "Hot Chips '21 review of CS-2/MemoryX/SwarmX",
         "002": "Emani et al., arXiv:2310.04607 (translation)", "004": "note on Cerebras inference"}
KEY = ("Verdicts are computed by llmbench reproduce from the value in the llmbench column "
       "(studies/fidelity.py, studies/fidelity_judge.py; claims and their checks: studies/specs/claims.toml). "
       "reproduced: a number the project computed out of sample (validate's leave-one-source-out prediction, "
       "a prediction whose inputs do not include the seed's number, or a measurement) within the claim's "
       "tolerance, which the claim's null model (a flat series, no effect, perfect scaling) fails; "
       "in-sample: matches only with the row in the fit; input: a value the project takes from the seed "
       "(catalog, preset, data set, a configuration rule), listed and never counted as reproduced; partial: "
       "within the factor, covered in part, holding by the model's construction, or passed by the null "
       "model too; missing: the model cannot compute it; contradicted: beyond the factor, or the trend or "
       "ordering does not hold. The mechanism column names what makes a row less than reproduced.")


def fidelity_rows(data: Data) -> list[dict]:
    """The stored claim rows, in claim order (ids sort as the claims file lists them)."""
    rows = [r for r in data.get("fidelity", "predicted")]
    out = [{c: value(r, "fidelity_" + c) for c in COLUMNS} for r in rows]
    return sorted(out, key=lambda d: (d["seed"] or "", _num(d["id"])))


def _num(claim_id: str | None) -> tuple:
    parts = (claim_id or "").split("-")
    return tuple(int(p) if p.isdigit() else 0 for p in parts[1:])


def counts(rows: list[dict]) -> dict[str, int]:
    return {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}


def counts_text(rows: list[dict]) -> str:
    c = counts(rows)
    return f"{len(rows)} seed claims: " + ", ".join(f"{c[v]} {v}" for v in VERDICTS)


def fidelity_table(data: Data) -> Table:
    rows = fidelity_rows(data)
    title = "Seed fidelity: " + (counts_text(rows) if rows else "every claim of the seed documents, checked")
    t = Table("fidelity", title, list(COLUMNS))
    for r in rows:
        t.rows.append(["" if r[c] is None else r[c] for c in COLUMNS])
    per_seed = []
    for seed in sorted({r["seed"] for r in rows}):
        c = counts([r for r in rows if r["seed"] == seed])
        per_seed.append(f"{seed}: " + ", ".join(f"{c[v]} {v}" for v in VERDICTS))
    t.note = (counts_text(rows) + " (" + "; ".join(per_seed) + "). " + KEY) if rows else \
        "not computed: run llmbench reproduce (the table is computed there)"
    t.sources = [f"seed {k}: {v}" for k, v in SEEDS.items()] + [
        "published values: the seed text (../shared/seeds), or llmbench/reference/published.csv for validate rows"]
    return t
