"""Predict: the analytical performance model (numpy only, no torch). docs/predict.md.

    from llmbench.point import Workload
    from llmbench.perfmodel.predict import predict
    predict(Workload(model="megatron-1.7b", hardware="a100-80gb", batch=512, seq_len=2048,
                     devices=32, precision="fp16", layout={"recompute": "full"}))

Names load lazily so `llmbench.perfmodel.cli` (imported at CLI start-up) pulls in no numpy.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "InferPrediction": "infer", "predict_infer": "infer", "resolve_params": "params",
    "TrainPrediction": "train", "predict_train": "train", "streaming_crossover_tokens": "train", "streaming_ratio": "train",
    "sweep_train": "train", "get_dataset": "project", "project": "project",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
