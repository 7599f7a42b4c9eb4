"""Predict: the analytical performance model (numpy only, no torch). docs/predict.md.

    from llmbench.perfmodel import predict_train, predict_infer
    predict_train(get_model("megatron-1.7b"), get_hardware("a100-80gb"), batch=512, seq=2048,
                  devices=32, precision="fp16", recompute="full")
"""
from .infer import InferPrediction, predict_infer
from .params import resolve_params
from .train import (
    TrainPrediction, predict_train, streaming_crossover_tokens, sweep_train, train_arrays,
)

__all__ = ["InferPrediction", "TrainPrediction", "predict_infer", "predict_train", "resolve_params",
           "streaming_crossover_tokens", "sweep_train", "train_arrays"]
