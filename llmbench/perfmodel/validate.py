"""Validation against llmbench/reference/published.csv: every numeric row predicted, trends checked.

    llmbench validate [--json]

Where a row leaves a setting open (batch, parallelism), ASSUME says what is used and why; the
assumption is printed next to the row. Tolerances: TOL_NUMERIC for numeric rows, TOL_MEGATRON
(mean abs error) for Megatron Table 1.
"""
from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from llmbench.hardware import get_hardware
from llmbench.models import get_model

from .infer import predict_infer
from .project import DATASETS, epoch_time_s
from .train import check_train_args, train_arrays

PUBLISHED = Path(__file__).resolve().parents[1] / "reference" / "published.csv"
TOL_NUMERIC = 0.25
TOL_MEGATRON = 0.05

#: settings the rows leave open; documented in docs/predict.md
ASSUME: dict[str, dict] = {
    "cs2-gpt3-20b-pile-epoch": {"note": "one epoch of the Pile = 300e9 tokens (project.DATASETS)"},
    "cs2-bert-large-sst2-epoch": {"note": "SST-2 epoch = 67,349 samples / predicted samples per s"},
    "emani-scaling-gaudi2": {"batch_per_replica": 16, "note": "per-device batch 16 assumed; weak scaling 1 -> N"},
    "emani-scaling-bow": {"batch_per_replica": 16, "pp": 4, "note": "4 IPUs (pipeline) per replica; batch 16 per replica assumed"},
    "emani-scaling-cs2": {"batch_per_replica": 56, "note": "global batch 112 on 2 systems (row)"},
    "emani-scaling-sn30": {"batch_per_replica": 16, "note": "per-device batch 16 assumed"},
    "emani-scaling-mi250": {"batch_per_replica": 16, "note": "per-device batch 16 (GAS row: micro-batch 16)"},
    "emani-scaling-a100": {"batch_per_replica": 1, "zero": 1, "grad_accum": 4,
                           "note": "micro-batch 1, GAS 4, ZeRO-1 (Fig. 6 set-up)"},
    "emani-gas-a100": {"zero": 1, "note": "micro-batch 1 on 64 GPUs, ZeRO-1"},
    "emani-gas-mi250": {"note": "micro-batch 16 on 4 devices"},
    "emani-sparsity-gpt2xl": {"batch": 112, "note": "batch 112 assumed (the CS-2 GPT-2 XL batch of Table II)"},
    "emani-sparsity-6.7b": {"batch": 112, "note": "batch 112 assumed"},
    "emani-sparsity-30b": {"batch": 112, "note": "batch 112 assumed"},
    "emani-sparsity-6.7b-multi": {"batch_per_replica": 112, "note": "batch 112 per system assumed; weak scaling"},
    "emani-genslm-sn30": {"a100": {"tp": 8, "recompute": "full"}, "note": "A100: TP8 + full recompute to hold 13B; SN30: 8 RDUs DP"},
    "emani-genslm-cs2": {"batch": 32, "a100": {"tp": 8, "recompute": "full"}, "note": "batch 32 on both; A100 TP8 + full recompute"},
    "megatron-h100-mfu": {"model": "gpt3-175b", "batch": 1536, "devices": 1536, "tp": 8, "pp": 8,
                          "recompute": "full", "note": "represented by GPT-3 175B, TP8 PP8, 1536 GPUs, seq 4096"},
    "cerebras-infer-8b": {"prompt_len": 128, "gen_len": 512, "note": "prompt 128, 512 generated tokens assumed"},
    "cerebras-infer-70b-wafers": {"prompt_len": 128, "gen_len": 512, "note": "bf16 weights + KV of one 640-token request"},
    "gaudi2-llama2-70b-train": {"tp": 8, "grad_accum": 128, "recompute": "full", "zero": 1,
                                "note": "TP8 x DP8, micro-batch 1 (GAS 128), full recompute, ZeRO-1 assumed"},
}


@lru_cache(maxsize=1)
def published_rows() -> tuple[dict, ...]:
    with open(PUBLISHED, newline="") as f:
        return tuple(csv.DictReader(f))


def parse_value(v: str) -> tuple[float, float] | None:
    """'14000' -> (14000, 14000); '1.8-2.0' -> (1.8, 2.0); non-numeric -> None."""
    try:
        x = float(v)
        return x, x
    except ValueError:
        pass
    parts = v.split("-")
    if len(parts) == 2:
        try:
            return float(parts[0]), float(parts[1])
        except ValueError:
            return None
    return None


def _num(x, default=None):
    try:
        return int(float(x))
    except (TypeError, ValueError):
        return default


def _tp_pp(notes: str) -> tuple[int, int]:
    tp = pp = 1
    for tok in notes.replace(";", " ").split():
        if tok.startswith("TP") and tok[2:].isdigit():
            tp = int(tok[2:])
        if tok.startswith("PP") and tok[2:].isdigit():
            pp = int(tok[2:])
    return tp, pp


def _train(model, hw, params, *, batch, seq, devices=1, precision="bf16", grad_accum=1, tp=1, pp=1,
           recompute="none", sparsity=0.0, zero=0, spec=None) -> dict:
    """One scalar training prediction (no fit check: validation compares throughput)."""
    spec = spec or get_model(model)
    h = get_hardware(hw)
    mode = check_train_args(spec, h, batch=batch, seq=seq, devices=devices, precision=precision,
                            grad_accum=grad_accum, tp=tp, pp=pp, recompute=recompute,
                            sparsity=sparsity, mode="auto", zero=zero)
    r = train_arrays(spec, h, batch=batch, seq=seq, devices=devices, precision=precision,
                     grad_accum=grad_accum, tp=tp, pp=pp, recompute=recompute, sparsity=sparsity,
                     mode=mode, zero=zero, params=params.get(hw) if params else None)
    f = {k: float(v) for k, v in r.items()}
    step = f["step_time_s"]
    f.update(samples_per_s=batch / step, tokens_per_s=batch * seq / step,
             executed_tflops=f["hw_flops"] / step / devices / 1e12,
             mfu=f["model_flops"] / step / devices / f["peak"])
    return f


def predict_row(row: dict, params: dict | None = None) -> float | None:
    """The model's value for one numeric row of published.csv (None: not a numeric row).
    params: {hardware name: parameter dict} overrides (calibration)."""
    rid, metric, system, model = row["id"], row["metric"], row["system"], row["model"]
    a = ASSUME.get(rid, {})
    prec = row["precision"] or "bf16"
    seq = _num(row["seq_len"], 1024)
    devices = _num(row["devices"], 1)
    batch = _num(row["batch"])
    if metric in ("samples_per_s", "tokens_per_s", "epoch_time_s", "epoch_time_h"):
        kw = {k: a[k] for k in ("tp", "pp", "grad_accum", "recompute", "zero") if k in a}
        r = _train(model, system, params, batch=batch, seq=seq, devices=devices, precision=prec, **kw)
        if metric == "epoch_time_s":
            return epoch_time_s(DATASETS["sst2"], tokens_per_s=r["tokens_per_s"], samples_per_s=r["samples_per_s"])
        if metric == "epoch_time_h":
            return epoch_time_s(DATASETS["pile"], tokens_per_s=r["tokens_per_s"],
                                samples_per_s=r["samples_per_s"]) / 3600
        return r[metric]
    if metric == "achieved_tflops":
        tp, pp = _tp_pp(row["notes"])
        return _train(model, system, params, batch=batch, seq=seq, devices=devices, precision=prec,
                      tp=tp, pp=pp, recompute="full")["executed_tflops"]
    if metric == "mfu":
        spec = get_model(a["model"]).with_(max_seq_len=seq)
        return _train(a["model"], system, params, spec=spec, batch=a["batch"], seq=seq,
                      devices=a["devices"], precision=prec, tp=a["tp"], pp=a["pp"],
                      recompute=a["recompute"])["mfu"]
    if metric == "scaling_efficiency":
        return _scaling(row, a, params, model, system, seq, devices, prec)
    if metric == "gas4_over_gas1":
        micro = batch
        kw = {"zero": a.get("zero", 0)}
        t = [_train(model, system, params, batch=micro * devices * g, seq=seq, devices=devices,
                    precision=prec, grad_accum=g, **kw)["samples_per_s"] for g in (1, 4)]
        return t[1] / t[0]
    if metric == "s0.9_over_dense":
        t = [_train(model, system, params, batch=a["batch"], seq=seq, precision=prec,
                    sparsity=s)["samples_per_s"] for s in (0.9, 0.0)]
        return t[0] / t[1]
    if metric == "speedup_over_1_system":
        bpr = a["batch_per_replica"]
        t = [_train(model, system, params, batch=bpr * n, seq=seq, devices=n, precision=prec)
             ["samples_per_s"] for n in (devices, 1)]
        return t[0] / t[1]
    if metric in ("per_device_speedup", "speedup"):
        return _genslm(row, a, params, model, seq, devices, prec)
    if metric == "decode_tokens_per_s_per_seq":
        return predict_infer(get_model(model), get_hardware(system), batch=1, prompt_len=a["prompt_len"],
                             gen_len=a["gen_len"], precision=prec,
                             params=params.get(system) if params else None).decode_tokens_per_s_per_seq
    if metric == "devices_needed":
        return float(predict_infer(get_model(model), get_hardware(system), batch=1,
                                   prompt_len=a["prompt_len"], gen_len=a["gen_len"], precision=prec,
                                   params=params.get(system) if params else None).devices)
    return None


def _scaling(row, a, params, model, system, seq, devices, prec):
    """Weak scaling: throughput on N devices / (N/r x throughput of one replica of r devices)."""
    pp = a.get("pp", 1)
    bpr = a["batch_per_replica"]
    g = a.get("grad_accum", 1)
    kw = {"pp": pp, "zero": a.get("zero", 0), "grad_accum": g}
    reps = devices // pp
    one = _train(model, system, params, batch=bpr * g, seq=seq, devices=pp, precision=prec, **kw)
    many = _train(model, system, params, batch=bpr * g * reps, seq=seq, devices=devices, precision=prec, **kw)
    return many["samples_per_s"] / (reps * one["samples_per_s"])


def _genslm(row, a, params, model, seq, devices, prec):
    """GenSLM (Table IV): SN30 vs A100 per device on 8 devices; one CS-2 vs eight A100."""
    batch = _num(row["batch"]) or a.get("batch", 32)
    akw = a.get("a100", {})
    a100 = _train(model, "a100-40gb", params, batch=batch, seq=seq, devices=8, precision="fp16", **akw)
    if row["metric"] == "per_device_speedup":
        sn = _train(model, "sn30", params, batch=batch, seq=seq, devices=devices, precision=prec)
        return sn["samples_per_s"] / a100["samples_per_s"]
    cs = _train(model, "cs2", params, batch=batch, seq=seq, devices=1, precision=prec)
    return cs["samples_per_s"] / a100["samples_per_s"]


def error(pred: float, lo: float, hi: float) -> float:
    """Relative error against a value, or against the nearest end of a published range (0 inside)."""
    if lo <= pred <= hi:
        return 0.0 if lo != hi else pred / lo - 1.0
    ref = lo if pred < lo else hi
    return pred / ref - 1.0


def numeric_rows(params: dict | None = None) -> list[dict]:
    out = []
    for row in published_rows():
        rng = parse_value(row["value"])
        if rng is None:
            continue
        try:
            pred = predict_row(row, params)
            err_msg = ""
        except ValueError as e:
            pred, err_msg = None, str(e)
        lo, hi = rng
        err = error(pred, lo, hi) if pred is not None and math.isfinite(pred) else None
        tol = TOL_MEGATRON if row["id"].startswith("megatron-t1") else TOL_NUMERIC
        out.append({"id": row["id"], "system": row["system"], "model": row["model"],
                    "metric": row["metric"], "published": row["value"], "predicted": pred,
                    "error": err, "tolerance": tol,
                    "within_tolerance": err is not None and abs(err) <= TOL_NUMERIC,
                    "assumption": ASSUME.get(row["id"], {}).get("note", "") or _default_note(row),
                    "problem": err_msg})
    return out


def _default_note(row) -> str:
    if row["id"].startswith("megatron-t1"):
        return "TP/PP from the notes, full recompute, micro-batch 1 under pipelining, fp16"
    return ""


def summary(rows: list[dict]) -> dict:
    by = {}
    for r in rows:
        if r["error"] is not None:
            by.setdefault(r["system"], []).append(abs(r["error"]))
    out = {k: {"rows": len(v), "mean_abs_error": float(np.mean(v)), "median_abs_error": float(np.median(v)),
               "max_abs_error": float(np.max(v))} for k, v in sorted(by.items())}
    meg = [abs(r["error"]) for r in rows if r["id"].startswith("megatron-t1") and r["error"] is not None]
    if meg:
        out["megatron-table1"] = {"rows": len(meg), "mean_abs_error": float(np.mean(meg)),
                                  "median_abs_error": float(np.median(meg)), "max_abs_error": float(np.max(meg))}
    return out


def run(params: dict | None = None) -> dict:
    from .trends import trend_checks

    rows = numeric_rows(params)
    trends = trend_checks(params)
    n_ok = sum(r["within_tolerance"] for r in rows)
    meg = summary(rows).get("megatron-table1", {})
    return {"rows": rows, "summary": summary(rows), "trends": trends,
            "numeric_within_tolerance": n_ok, "numeric_rows": len(rows),
            "trends_passed": sum(t["passed"] for t in trends), "trends_total": len(trends),
            "megatron_mean_abs_error": meg.get("mean_abs_error"),
            "megatron_within_tolerance": meg.get("mean_abs_error", 1.0) <= TOL_MEGATRON,
            "tolerances": {"numeric": TOL_NUMERIC, "megatron_mean": TOL_MEGATRON}}

