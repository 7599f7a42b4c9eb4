"""Validation against llmbench/reference/published_v2.csv: every numeric row predicted with the
shipped profiles, with the pooled fit on all rows (in-sample) and with the pooled fit on all rows
but its own source's (leave-one-source-out, pooled.py); trends checked.

    llmbench validate [--json]        # ~6 s CPU alone; --json: rows, leave_one_source_out, in_sample

A row is a Workload with the layout columns its source states (row_workload); knobs it leaves open
are the planner's (planned), chosen once under the prior parameters. Where a row leaves a setting
the planner cannot choose (batch of a per-device study, prompt length), ASSUME says what is used and
why; the assumption is printed next to the row. Tolerances of the shipped-profile check:
TOL_NUMERIC for numeric rows, TOL_MEGATRON (mean abs error) for Megatron Table 1.
"""
from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from llmbench.errors import BadInput
from llmbench.hardware import get_hardware

from llmbench.point import Workload

from .infer import predict_infer
from .project import DATASETS, epoch_time_s
from .train import as_run, predict_train

PUBLISHED = Path(__file__).resolve().parents[1] / "reference" / "published_v2.csv"
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
    "cerebras-infer-70b": {"prompt_len": 128, "gen_len": 512, "note": "prompt 128, 512 generated tokens assumed"},
    **{k: {"prompt_len": 512, "gen_len": 292,
           "note": "MLPerf llama2-70b (OpenOrca): 292 generated tokens (the notes' tokens/s / samples/s); "
                   "prompt length not in the result files, 512 assumed (half the 1,024 cap)"}
       for k in ("mlperf41-amd-8xmi300x-offline", "mlperf41-amd-1xmi300x-offline", "mlperf41-amd-8xmi300x-server",
                 "mlperf41-amd-8xmi300x-server-ttft", "mlperf41-amd-8xmi300x-server-tpot",
                 "mlperf41-nv-8xh200-offline", "mlperf41-nv-8xh200-server", "mlperf41-nv-8xh100-offline",
                 "mlperf41-nv-8xh200-server-ttft")},
    **{k: {"prompt_len": 512, "gen_len": 292, "precision": "fp8",
           "note": "as the AMD rows; fp8 assumed (NVIDIA's closed llama2-70b submissions quantise to FP8 "
                   "with TensorRT-LLM; the result files do not state it)"}
       for k in ("mlperf41-nv-8xh200-offline", "mlperf41-nv-8xh200-server", "mlperf41-nv-8xh100-offline",
                 "mlperf41-nv-8xh200-server-ttft")},
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


#: ASSUME keys that are Workload fields (prompt_len is the inference seq_len)
_ROW_FIELDS = ("model", "precision", "batch", "devices", "seq_len", "gen_len", "tp", "pp", "zero", "recompute",
               "grad_accum", "micro_batch")
_INT_COLS = ("batch", "devices", "seq_len", "gen_len", "tp", "pp", "zero", "grad_accum", "micro_batch")
#: metrics predicted as ratios of runs a paper describes per device (Emani et al.): plain layouts
RATIO_METRICS = ("scaling_efficiency", "gas4_over_gas1", "s0.9_over_dense", "speedup_over_1_system",
                 "per_device_speedup", "speedup")


def row_workload(row: dict) -> Workload:
    """The one conversion of a published row (after ASSUME's settings) into a Workload: the global
    batch, sequence, precision and every layout column the source states; knobs it leaves empty
    stay None for the planner (training) or the serving search (inference). Ratio rows of
    per-device studies (RATIO_METRICS) run the plain layout (train.plain_layout)."""
    a = ASSUME.get(row["id"], {})
    r = {**row, "system": row["system"].split()[0], **{k: a[k] for k in _ROW_FIELDS if k in a}}
    if "prompt_len" in a:
        r["seq_len"] = a["prompt_len"]
    r.update({k: str(r[k]) for k in _INT_COLS if r.get(k) not in (None, "")})
    w = Workload.from_row(r)
    if w.micro_batch is not None and w.grad_accum is not None:  # both stated: the batch says the rest
        w = w.with_(grad_accum=None)
    if row["metric"] not in RATIO_METRICS:
        return w.with_(devices=w.devices or 1)
    lay = w.layout
    w = w.with_(tp=lay.tp or 1, pp=lay.pp or 1, zero=lay.zero or 0, recompute=lay.recompute or "none",
                devices=w.devices or 1)
    if w.layout.pp > 1 and w.grad_accum is None and w.micro_batch is None:
        return w.with_(micro_batch=1)
    return w if w.micro_batch is not None else w.with_(grad_accum=w.grad_accum or 1)


def row_spec(w: Workload):
    """The model of `w`; a learned-position model gets a position table as long as the run
    (the MPT benchmarks size it to the sequence: needed_models.csv)."""
    from dataclasses import replace

    spec = w.spec()
    need = w.seq_len + (w.gen_len or 0)
    if spec.position == "learned" and need > spec.max_seq_len:
        spec = replace(spec, max_seq_len=need)
    return spec


#: training layouts the planner chose for a row (id -> Workload), under the prior parameters, so a
#: fit moves efficiencies, never the layout under it (a layout is a user's choice, not a fit)
_LAYOUTS: dict[str, Workload] = {}


def planned(row_id: str, w: Workload) -> Workload:
    """`w` with every open layout knob chosen by the planner (perfmodel/plan.py) with the prior
    parameters; cached per row."""
    from .train import _defaults, open_knobs

    key = f"{row_id}:{w!r}"
    if key not in _LAYOUTS:
        h = get_hardware(w.hardware)
        w = _defaults(w, h)
        if open_knobs(w):
            from .params import resolve_params
            from .plan import plan

            w = plan(row_spec(w), h, w, resolve_params(h, use_profile=False)).best()
        _LAYOUTS[key] = w
    return _LAYOUTS[key]


def _train(w: Workload, params: dict | None, row_id: str = ""):
    """One training prediction (no fit check: validation compares throughput)."""
    h = get_hardware(w.hardware)
    p = params.get(h.name) if params else None
    if row_id:
        w = planned(row_id, w)
    return predict_train(row_spec(w), h, as_run(w, h) if not row_id else w, p)


#: offline max-throughput rows (no batch: the server's batcher fills memory): batches tried
OFFLINE_BATCHES = tuple(1 << k for k in range(13))


def _infer(w: Workload, params: dict | None, offline: bool = False):
    """Serving prediction on the row's devices (tp as stated, the rest searched). offline: the
    batch that gives the most tokens/s among those whose weights + KV cache fit."""
    h = get_hardware(w.hardware)
    w = w.with_(suite="infer", zero=None, recompute=None)
    p = params.get(h.name) if params else None
    spec = row_spec(w)
    if offline:
        w = w.with_(batch=offline_batch(spec, h, w))
    return predict_infer(spec, h, w, p)


#: offline batches chosen (workload repr -> batch), under the prior parameters, like _LAYOUTS
_BATCHES: dict[str, int] = {}


def offline_batch(spec, h, w: Workload) -> int:
    """The batch of OFFLINE_BATCHES with the most tokens/s whose weights + KV cache fit."""
    from .params import resolve_params

    key = repr(w)
    if key not in _BATCHES:
        p, best = resolve_params(h, use_profile=False), None
        for b in OFFLINE_BATCHES:
            try:
                r = predict_infer(spec, h, w.with_(batch=b), p)
            except ValueError:
                continue
            if r.fits and (best is None or r.tokens_per_s > best[1]):
                best = (b, r.tokens_per_s)
        if best is None:
            raise BadInput(f"{spec.name} fits no batch on {w.devices} x {h.name}")
        _BATCHES[key] = best[0]
    return _BATCHES[key]


def _per_replica(w: Workload, batch: int, devices: int) -> Workload:
    """`w` on `devices` devices at global batch `batch` (a weak-scaling point)."""
    return w.with_(batch=batch, devices=devices)


#: serving metrics published rows carry that predict_infer does not give yet (issue 21): skipped, not refused
SERVING_UNPREDICTED = {
    "time_per_output_token_s": "TPOT/ITL as published; not predicted yet (1 / decode_tokens_per_s_per_seq is "
                               "the model's figure at the row's batch, which a server's queue does not fix)",
    "samples_per_s": "serving requests per second; not predicted yet",
}


def skip_reason(row: dict) -> str:
    """Why a numeric row is not predicted ('' when it is)."""
    if row["task"] == "infer" and row["metric"] in SERVING_UNPREDICTED:
        return f"skipped: {row['metric']}: {SERVING_UNPREDICTED[row['metric']]}"
    return ""


def predict_row(row: dict, params: dict | None = None) -> float | None:
    """The model's value for one numeric row of published_v2.csv (None: not a numeric row, or a
    serving metric not predicted yet: skip_reason). params: {hardware name: parameter dict}."""
    metric = row["metric"]
    if metric not in METRIC_KINDS or skip_reason(row):
        return None
    a = ASSUME.get(row["id"], {})
    w = row_workload(row)
    if row["task"] == "infer":
        return _infer_metric(w, row, params)
    if metric in ("samples_per_s", "tokens_per_s", "epoch_time_s", "epoch_time_h", "achieved_tflops", "mfu",
                  "peak_mem_bytes"):
        r = _train(w, params, row["id"])
        if metric == "epoch_time_s":
            return epoch_time_s(DATASETS["sst2"], tokens_per_s=r.tokens_per_s, samples_per_s=r.samples_per_s)
        if metric == "epoch_time_h":
            return epoch_time_s(DATASETS["pile"], tokens_per_s=r.tokens_per_s,
                                samples_per_s=r.samples_per_s) / 3600
        # Megatron Table 1 counts the recomputation FLOPs (executed); the other sources model FLOPs
        if metric == "achieved_tflops" and row["id"].startswith("megatron-t1"):
            return r.executed_tflops
        return getattr(r, metric)
    if metric == "scaling_efficiency":
        return _scaling(w, a, params)
    if metric == "gas4_over_gas1":
        n, micro = w.devices, w.batch
        t = [_train(w.with_(batch=micro * n * g, grad_accum=g, micro_batch=None), params).samples_per_s
             for g in (1, 4)]
        return t[1] / t[0]
    if metric == "s0.9_over_dense":
        t = [_train(w.with_(sparsity=s), params).samples_per_s for s in (0.9, 0.0)]
        return t[0] / t[1]
    if metric == "speedup_over_1_system":
        bpr = a["batch_per_replica"]
        t = [_train(_per_replica(w, bpr * n, n), params).samples_per_s for n in (w.devices, 1)]
        return t[0] / t[1]
    return _genslm(w, row, a, params)  # per_device_speedup, speedup


def _infer_metric(w: Workload, row: dict, params) -> float:
    metric = row["metric"]
    if metric == "devices_needed":
        return float(_infer(w.with_(devices=None), params).devices)
    open_batch = not row["batch"] and "batch" not in ASSUME.get(row["id"], {})
    if metric == "time_to_first_token_s" and open_batch:  # a server's request: its own prefill
        return _infer(w.with_(batch=1), params).time_to_first_token_s  # (queueing not modelled)
    return getattr(_infer(w, params, offline=open_batch), metric)


#: the metrics predict_row knows how to predict
METRIC_KINDS = ("samples_per_s", "tokens_per_s", "epoch_time_s", "epoch_time_h", "achieved_tflops", "mfu",
                "peak_mem_bytes", "scaling_efficiency", "gas4_over_gas1", "s0.9_over_dense",
                "speedup_over_1_system", "per_device_speedup", "speedup", "decode_tokens_per_s_per_seq",
                "time_to_first_token_s", "latency_s_p50", "devices_needed")


def _scaling(w: Workload, a: dict, params):
    """Weak scaling: throughput on N devices / (N/r x throughput of one replica of r devices)."""
    pp, bpr, g = w.layout.pp, a["batch_per_replica"], w.grad_accum or 1
    reps = w.devices // pp
    one = _train(_per_replica(w, bpr * g, pp), params)
    many = _train(_per_replica(w, bpr * g * reps, w.devices), params)
    return many.samples_per_s / (reps * one.samples_per_s)


def _genslm(w: Workload, row, a, params):
    """GenSLM (Table IV): SN30 vs A100 per device on 8 devices; one CS-2 vs eight A100."""
    w = w.with_(batch=int(row["batch"]) if row["batch"] else a.get("batch", 32))
    akw = a.get("a100", {})
    a100 = _train(w.with_(hardware="a100-40gb", devices=8, precision="fp16", **akw), params)
    if row["metric"] == "per_device_speedup":
        return _train(w, params).samples_per_s / a100.samples_per_s
    return _train(w.with_(devices=1), params).samples_per_s / a100.samples_per_s


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
                    "problem": skip_reason(row) or err_msg, "skipped": bool(skip_reason(row))})
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


def fit_points() -> list[dict]:
    """Numeric rows of one hardware each (cross-system ratios are predicted, never fitted)."""
    return [{**row, "range": rng} for row in published_rows()
            if (rng := parse_value(row["value"])) is not None and " " not in row["system"]]


_FITS: dict = {}


def pooled_fit():
    """(points, linearisation, fit on all, {source: fit without it}) of fit_points(), computed once
    per process for a given set of rows (validate and calibrate --published share it)."""
    from . import pooled

    pts = fit_points()
    key = tuple(pt["id"] for pt in pts)
    if key not in _FITS:
        lin = pooled.linearise(pts, predict_row)
        _FITS.clear()
        _FITS[key] = (pts, lin, *pooled.folds(lin, pts, predict_row))
    return _FITS[key]


def out_of_sample(rows: list[dict]) -> dict:
    """Fit the pooled profiles (pooled.py) on every row (in-sample) and once per source without
    it (leave-one-source-out); adds in_sample_* and loso_* to each row; returns the summaries."""
    from . import pooled

    pts, lin, fitted, by_source = pooled_fit()
    src_of = {row["id"]: row["source"] for row in published_rows()}
    for r in rows:
        rng = parse_value(r["published"])
        fold = by_source.get(src_of[r["id"]], fitted)
        r["source"] = src_of[r["id"]]
        for key, fit in (("in_sample", fitted), ("loso", fold)):
            pred = _try(r, pooled.full(lin, fit))
            r[f"{key}_predicted"] = pred
            r[f"{key}_error"] = error(pred, *rng) if pred is not None and math.isfinite(pred) else None
    return {"in_sample": spread(rows, "in_sample_error"), "leave_one_source_out": spread(rows, "loso_error"),
            "fitted": fitted, "by_hardware": by_hardware(rows)}


def _try(r: dict, params: dict) -> float | None:
    row = _ROWS_BY_ID()[r["id"]]
    try:
        return predict_row(row, params)
    except ValueError:
        return None


@lru_cache(maxsize=1)
def _ROWS_BY_ID() -> dict:  # noqa: N802
    return {r["id"]: r for r in published_rows()}


def spread(rows: list[dict], key: str) -> dict:
    """median and mean |error|, share of rows beyond 50%, rows counted (None: no prediction)."""
    e = np.abs([r[key] for r in rows if r.get(key) is not None])
    n = len(e)
    return {"rows": n, "unpredicted": sum(r.get(key) is None for r in rows),
            "median_abs_error": float(np.median(e)) if n else None,
            "mean_abs_error": float(np.mean(e)) if n else None,
            "share_beyond_50pct": float(np.mean(e > 0.5)) if n else None}


def by_hardware(rows: list[dict]) -> dict:
    out = {}
    for sysname in sorted({r["system"] for r in rows}):
        rs = [r for r in rows if r["system"] == sysname]
        out[sysname] = {"rows": len(rs), "sources": len({r["source"] for r in rs}),
                        "raw": spread(rs, "error"), "in_sample": spread(rs, "in_sample_error"),
                        "leave_one_source_out": spread(rs, "loso_error")}
    return out


def run(params: dict | None = None, loso: bool = True) -> dict:
    """rows (prior-profile `predicted`/`error`, then in-sample and leave-one-source-out fits),
    per-hardware and overall summaries, trends."""
    from .trends import trend_checks

    rows = numeric_rows(params)
    oos = out_of_sample(rows) if loso else {}
    trends = trend_checks(params)
    n_ok = sum(r["within_tolerance"] for r in rows)
    meg = summary(rows).get("megatron-table1", {})
    return {"rows": rows, "summary": summary(rows), "trends": trends, **oos,
            "sources": len({r["source"] for r in published_rows()}),
            "numeric_within_tolerance": n_ok, "numeric_rows": len(rows),
            "refused": [r["id"] for r in rows if r["predicted"] is None and not r["skipped"]],
            "skipped": [r["id"] for r in rows if r["skipped"]],
            "trends_passed": sum(t["passed"] for t in trends), "trends_total": len(trends),
            "megatron_mean_abs_error": meg.get("mean_abs_error"),
            "megatron_within_tolerance": meg.get("mean_abs_error", 1.0) <= TOL_MEGATRON,
            "tolerances": {"numeric": TOL_NUMERIC, "megatron_mean": TOL_MEGATRON}}
