"""Trend rows of published.csv (and trends stated in numeric rows' notes), checked pass/fail,
each on the layout the planner chooses (the micro-batch that fits the wafer's SRAM, gradient
accumulation for the rest), as the fidelity table's claims 000-3, 000-5 and 000-11 are."""
from __future__ import annotations

from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.point import Workload

from .infer import predict_infer
from .predict import predict

BERT_BATCHES = (256, 512, 1024, 2048, 4096, 8192)
INFER_BATCHES = (1, 8, 32, 128)
FLAT_TOL = 1.5  # "nearly flat": latency at batch 128 within 1.5x of batch 1


def _cs2(model, batch, seq, params):
    """The training prediction of `model` on one CS-2 (cbf16) at a global batch, planner's layout."""
    w = Workload(model=model, hardware="cs2", precision="cbf16", seq_len=seq, batch=int(batch))
    return predict(w, (params or {}).get("cs2"))


def _cs2_samples(model, batches, params):
    return [_cs2(model, b, 128, params).samples_per_s for b in batches]


def trend_checks(params: dict | None = None) -> list[dict]:
    out = []
    base = _cs2_samples("bert-base", BERT_BATCHES, params)
    peak = BERT_BATCHES[max(range(len(base)), key=base.__getitem__)]
    out.append({"id": "cs2-bert-trend-base", "claim": "BERT-base samples/s peaks at batch 2048 then falls",
                "passed": peak == 2048 and base[4] < base[3],
                "detail": "samples/s at " + ", ".join(f"{b}: {v:,.0f}" for b, v in zip(BERT_BATCHES, base))})
    large = _cs2_samples("bert-large", BERT_BATCHES, params)
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
        bounds.append((model, _cs2(model, batch, seq, params).bound))
    out.append({"id": "cs2-roofline", "claim": "BERT and GPT-3 training on the WSE are compute-bound",
                "passed": all(b == "compute" for _, b in bounds),
                "detail": ", ".join(f"{m}: {b}" for m, b in bounds)})
    return out
