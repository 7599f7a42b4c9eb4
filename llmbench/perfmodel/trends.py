"""Trend rows of published.csv (and trends stated in numeric rows' notes), checked pass/fail."""
from __future__ import annotations

import numpy as np

from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.point import Workload

from .infer import predict_infer
from .train import sweep_train

BERT_BATCHES = np.array([256, 512, 1024, 2048, 4096, 8192])
INFER_BATCHES = (1, 8, 32, 128)
FLAT_TOL = 1.5  # "nearly flat": latency at batch 128 within 1.5x of batch 1


def _cs2(model, batches, seq, params):
    """sweep_train of `model` on one CS-2 (weight streaming, cbf16) over global batches."""
    w = Workload(model=model, hardware="cs2", precision="cbf16", seq_len=seq, layout={"mode": "weight_streaming"})
    return sweep_train(get_model(model), get_hardware("cs2"), w, (params or {}).get("cs2"),
                       batch=batches, micro_batch=batches)


def _cs2_samples(model, batches, params):
    r = _cs2(model, batches, 128, params)
    return batches / r["step_time_s"], r


def trend_checks(params: dict | None = None) -> list[dict]:
    out = []
    base, _ = _cs2_samples("bert-base", BERT_BATCHES, params)
    peak = int(BERT_BATCHES[int(np.argmax(base))])
    out.append({"id": "cs2-bert-trend-base", "claim": "BERT-base samples/s peaks at batch 2048 then falls",
                "passed": peak == 2048 and base[4] < base[3],
                "detail": "samples/s at " + ", ".join(f"{b}: {v:,.0f}" for b, v in zip(BERT_BATCHES, base))})
    large, r = _cs2_samples("bert-large", BERT_BATCHES, params)
    out.append({"id": "cs2-bert-large-rising", "claim": "BERT-large samples/s still rising at batch 8192",
                "passed": bool(large[-1] > large[-2]),
                "detail": "samples/s at " + ", ".join(f"{b}: {v:,.0f}" for b, v in zip(BERT_BATCHES, large))})
    hw = get_hardware("cs2")
    w = Workload(model="bert-base", hardware="cs2", suite="infer", precision="cbf16", seq_len=128)
    lat = [predict_infer(get_model("bert-base"), hw, w.with_(batch=b), (params or {}).get("cs2")).latency_s_p50
           for b in INFER_BATCHES]
    out.append({"id": "cs2-bert-trend-infer", "claim": f"inference latency nearly flat in batch "
                f"(batch {INFER_BATCHES[-1]} within {FLAT_TOL}x of batch 1)",
                "passed": lat[-1] / lat[0] <= FLAT_TOL,
                "detail": "latency ms at " + ", ".join(f"{b}: {v * 1e3:.2f}" for b, v in zip(INFER_BATCHES, lat))})
    bounds = []
    for model, batch, seq in (("bert-large", 8192, 128), ("gpt3-20b", 256, 2048)):
        r = _cs2(model, np.array([batch]), seq, params)
        comp, mem, st = (float(r[k][0]) for k in ("compute", "memory", "stream_exposed"))
        bounds.append((model, "compute" if comp >= max(mem, st) else "memory" if mem >= st else "stream"))
    out.append({"id": "cs2-roofline", "claim": "BERT and GPT-3 training on the WSE are compute-bound",
                "passed": all(b == "compute" for _, b in bounds),
                "detail": ", ".join(f"{m}: {b}" for m, b in bounds)})
    return out
