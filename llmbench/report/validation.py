"""Predicted against published: the rows of `llmbench validate --json`, stored as study "validation".

The perfmodel's validation is the one source of truth for how each published row is predicted
(its configuration, TP/PP, recomputation); the report only stores and draws what it returns.
"""
from __future__ import annotations

import json
import subprocess
import sys

VALIDATE_CMD = ("validate", "--json")


def _num(x):
    """A number, a numeric string, or the middle of a range like '1.8-2.0'; else None."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        parts = x.strip().split("-") if not x.strip().startswith("-") else [x]
        try:
            vals = [float(p) for p in parts]
        except ValueError:
            return None
        return sum(vals) / len(vals) if len(vals) in (1, 2) else None
    return None


def _references() -> dict[str, str]:
    """published.csv id -> its source column."""
    try:
        from llmbench.results.published import published_rows

        return {r["id"]: r["source"] for r in published_rows()}
    except Exception:  # noqa: BLE001 - the report works without the citations
        return {}


def rows_of(payload) -> list[dict]:
    """The per-row list, whatever the top-level shape ({rows: [...]} or [...])."""
    if isinstance(payload, list):
        return [r for r in payload if isinstance(r, dict)]
    if isinstance(payload, dict):
        for key in ("rows", "results", "validation", "points"):
            if isinstance(payload.get(key), list):
                return [r for r in payload[key] if isinstance(r, dict)]
    return []


def normalise(row: dict) -> dict | None:
    """One validate row -> (point, metrics) fields the report draws; None for trend rows."""
    pub = _num(row.get("published", row.get("published_value", row.get("value"))))
    pred = _num(row.get("predicted", row.get("predicted_value", row.get("prediction"))))
    if pub is None:
        return None
    err = _num(row.get("rel_error", row.get("error", row.get("rel_err"))))
    if err is None and pred is not None and pub:
        err = pred / pub - 1.0
    raw = row.get("published", row.get("published_value", row.get("value")))
    return {"point": {"suite": "validation", "published_id": row.get("id", row.get("published_id")),
                      "model": row.get("model"), "hardware": row.get("system", row.get("hardware"))},
            "metrics": {"published": pub, "published_text": str(raw), "predicted": pred, "rel_error": err,
                        "tolerance": _num(row.get("tolerance")), "metric": row.get("metric"),
                        "assumption": row.get("assumption") or "", "problem": row.get("problem") or "",
                        "reference": row.get("source", row.get("reference"))}}


def record_validation(db, *, log=print) -> str:
    """Run `llmbench validate --json` and record each numeric row; returns a one-line status."""
    cmd = [sys.executable, "-m", "llmbench", *VALIDATE_CMD]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "llmbench validate timed out"
    if proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        log(f"validate not available: {msg}")
        return f"not available: {msg}"
    try:
        payload = json.loads(proc.stdout)
        rows = rows_of(payload)
    except json.JSONDecodeError:
        return "not available: validate printed no JSON"
    n = 0
    env = {"command": "llmbench " + " ".join(VALIDATE_CMD), "tool": "llmbench perfmodel"}
    refs = _references()
    for row in rows:
        norm = normalise(row)
        if norm is None:
            continue
        norm["metrics"]["reference"] = norm["metrics"]["reference"] or refs.get(norm["point"]["published_id"])
        status = "ok" if norm["metrics"]["predicted"] is not None else "error"
        db.record(norm["point"], source="predicted", status=status, metrics=norm["metrics"],
                  environment=env, study="validation",
                  error=None if status == "ok" else str(row.get("problem") or "no prediction"))
        n += 1
    trends = payload.get("trends", []) if isinstance(payload, dict) else []
    for t in trends:
        if isinstance(t, dict) and t.get("id"):
            db.record({"suite": "validation", "published_id": t["id"], "trend": True}, source="predicted",
                      metrics={"claim": t.get("claim"), "passed": bool(t.get("passed")),
                               "detail": t.get("detail"), "reference": refs.get(t["id"], "")},
                      environment=env, study="validation-trends")
    log(f"validated {n} published rows and {len(trends)} trends")
    return f"{n} published rows and {len(trends)} trends compared"
