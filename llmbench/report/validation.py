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
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return float(x)
    return None


def _rows(payload) -> list[dict]:
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
    return {"point": {"suite": "validation", "published_id": row.get("id", row.get("published_id")),
                      "model": row.get("model"), "hardware": row.get("system", row.get("hardware"))},
            "metrics": {"published": pub, "predicted": pred, "rel_error": err,
                        "metric": row.get("metric"), "reference": row.get("source", row.get("reference"))}}


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
        rows = _rows(json.loads(proc.stdout))
    except json.JSONDecodeError:
        return "not available: validate printed no JSON"
    n = 0
    env = {"command": "llmbench " + " ".join(VALIDATE_CMD), "tool": "llmbench perfmodel"}
    for row in rows:
        norm = normalise(row)
        if norm is None:
            continue
        status = "ok" if norm["metrics"]["predicted"] is not None else "error"
        db.record(norm["point"], source="predicted", status=status, metrics=norm["metrics"],
                  environment=env, study="validation",
                  error=None if status == "ok" else str(row.get("error_message", row.get("note", "no prediction"))))
        n += 1
    log(f"validated {n} published rows")
    return f"{n} published rows compared"
