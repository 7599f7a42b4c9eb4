"""Predict a study's full-size points on catalog hardware (analytical model, no torch) and record
them as source="predicted", next to the measured and published values.

    llmbench study predict gas --hardware a100-40gb,cs2 --db runs.db

Train points go through `llmbench.perfmodel.predict_train` with the global batch = micro-batch x
grad_accum x devices; BERT inference points through `predict_infer` (gen_len 0). The block suite
has no analytical counterpart (one layer without embeddings or head) and is left out. A point the
model says does not fit is recorded with status `oom`; a point it rejects, `skipped` with why.
"""
from __future__ import annotations

from llmbench.results.store import ResultsDB
from llmbench.studies.spec import get_study, model_spec

FALLBACK_PRECISIONS = ("bf16", "cbf16", "fp16", "fp32")


def hardware_precision(hw, precision: str) -> str:
    """The point's precision if the hardware has a peak for it, else its first native one."""
    if hw.peak(precision):
        return precision
    for p in FALLBACK_PRECISIONS:
        if hw.peak(p):
            return p
    return precision


def predict_point(point: dict, hw) -> tuple[str, dict, str | None]:
    """(status, metrics, error) of one point on one HardwareSpec."""
    from llmbench.perfmodel import predict_infer, predict_train

    spec = model_spec(point)
    b, d, g = int(point["batch"]), int(point.get("devices", 1) or 1), int(point.get("grad_accum", 1) or 1)
    try:
        if point["suite"] == "train":
            pred = predict_train(spec, hw, batch=b * g * d, seq=point["seq"], devices=d,
                                 precision=point["precision"], grad_accum=g,
                                 sparsity=float(point.get("sparsity", 0.0) or 0.0))
        else:
            pred = predict_infer(spec, hw, batch=b, prompt_len=point["seq"],
                                 gen_len=int(point.get("gen_len", 0) or 0), precision=point["precision"])
    except ValueError as e:
        return "skipped", {}, str(e)
    metrics = pred.to_dict()
    return ("ok" if metrics.get("fits", True) else "oom"), metrics, \
        (None if metrics.get("fits", True) else "does not fit in device memory (predicted)")


def predict_study(name: str, hardware: list[str] | None = None, db: str | None = None) -> dict:
    """Record predictions for every full-size point of the study on each hardware."""
    from llmbench.hardware import catalog, get_hardware

    study = get_study(name)
    hws = [get_hardware(h) for h in hardware] if hardware else \
        [hw for hw in catalog().values() if hw.kind != "cpu"]
    rows, left_out = [], 0
    with ResultsDB(db) as store:
        for point in study.points(quick=False):
            if point["suite"] == "block":
                left_out += 1
                continue
            for hw in hws:
                p = {**point, "hardware": hw.name, "precision": hardware_precision(hw, point["precision"])}
                status, metrics, error = predict_point(p, hw)
                key = store.record(p, source="predicted", status=status, metrics=metrics, error=error,
                                   environment={"model": "llmbench.perfmodel", "study": study.name},
                                   study=study.name)
                rows.append(store.get(key))
        db_path = str(store.path)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "oom", "skipped")}
    return {"study": study.name, "hardware": [hw.name for hw in hws], "db": db_path,
            "predicted": len(rows), "block_points_left_out": left_out, "counts": counts,
            "results": rows}
