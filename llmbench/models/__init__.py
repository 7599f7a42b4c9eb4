"""Models: ModelSpec, presets, Hugging Face config import, exact counting. No torch."""
from .counting import (
    Op, activation_bytes_per_layer, flops_per_token, kv_cache_bytes_per_token, layer_ops,
    model_ops, param_count, param_breakdown, training_flops, training_memory_bytes,
)
from .presets import UnknownModel, get_model, presets
from .spec import ModelSpec

__all__ = [
    "ModelSpec", "Op", "UnknownModel", "activation_bytes_per_layer", "flops_per_token",
    "get_model", "kv_cache_bytes_per_token", "layer_ops", "model_ops", "param_breakdown",
    "param_count", "presets", "training_flops", "training_memory_bytes",
]
