"""Predicted against published_v2.csv: `llmbench.perfmodel.validate.run()` (in process), stored as
study "validation" (one row per numeric published row) and "validation-trends".

    from llmbench.studies.validation import record_validation
    record_validation(ResultsDB("runs.db"))     # what `llmbench reproduce` does

perfmodel's validation is the one source of truth for how each published row is predicted (its
configuration, TP/PP, recomputation: its ASSUME table); this module only records what it returns.
Each row is recorded under the published row's own Workload (results.published.published_point)
with the row id as its tag, so it shares a workload_id with the published result it is compared
with. Metrics: `published` (the value as a number: the middle of a range), `published_text`,
`predicted`, `rel_error` (validate's own: 0 inside a published range), `tolerance`, and the pooled
fit's `in_sample_predicted` / `in_sample_error` and leave-one-source-out `loso_predicted` /
`loso_error`; `metric`,
`assumption`, `problem` and the `reference` say what was compared and how.
"""
from __future__ import annotations

from llmbench.published import PUBLISHED_V2_CSV, parse_range, published_rows
from llmbench.results.published import published_point
from llmbench.results.store import ResultsDB

COMMAND = "llmbench validate --json"


def record_validation(db: ResultsDB, *, log=print) -> str:
    """Run the validation and record each numeric row and each trend; a one-line status."""
    from llmbench.perfmodel.validate import run

    res = run()
    rows = {r["id"]: r for r in published_rows(PUBLISHED_V2_CSV)}
    env = {"command": COMMAND, "tool": "llmbench perfmodel"}
    for v in res["rows"]:
        pub = rows[v["id"]]
        point, _ = published_point(pub)
        lo, hi = parse_range(v["published"])
        ok = v["predicted"] is not None
        metrics = {"published": (lo + hi) / 2, "published_text": str(v["published"]),
                   "predicted": v["predicted"], "rel_error": v["error"], "tolerance": v["tolerance"],
                   "metric": v["metric"], "assumption": v["assumption"] or "",
                   "problem": v["problem"] or "", "reference": pub["source"],
                   **{k: v.get(k) for k in ("in_sample_predicted", "in_sample_error", "loso_predicted", "loso_error")}}
        db.record(point, source="predicted", status="ok" if ok else "error", metrics=metrics,
                  environment={**env, "id": v["id"]}, study="validation", tag=v["id"],
                  error=None if ok else (v["problem"] or "no prediction"))
    for t in res["trends"]:
        point, _ = published_point(rows[t["id"]]) if t["id"] in rows else ({"published_id": t["id"]}, None)
        db.record(point, source="predicted", study="validation-trends", tag=f"trend:{t['id']}",
                  metrics={"claim": t["claim"], "passed": bool(t["passed"]), "detail": t["detail"],
                           "reference": rows.get(t["id"], {}).get("source", "")},
                  environment={**env, "id": t["id"]})
    log(f"validated {len(res['rows'])} published rows and {len(res['trends'])} trends")
    return f"{len(res['rows'])} published rows and {len(res['trends'])} trends compared"
