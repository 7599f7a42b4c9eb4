"""Models: ModelSpec, presets, Hugging Face config import, exact counting. No torch."""
from .counting import (
    Op, activation_bytes_per_layer, active_param_count, flops_per_token, kv_cache_bytes,
    kv_cache_bytes_per_token, layer_ops, model_ops, non_embedding_param_count, param_breakdown,
    param_count, training_flops, training_memory_bytes,
)
from .moe import dispatch, expert_weight_bytes_read, expected_experts_hit
from .presets import UnknownModel, get_model, presets
from .spec import ModelSpec

__all__ = [
    "ModelSpec", "Op", "UnknownModel", "activation_bytes_per_layer", "active_param_count",
    "dispatch", "expected_experts_hit", "expert_weight_bytes_read", "flops_per_token", "get_model",
    "kv_cache_bytes", "kv_cache_bytes_per_token", "layer_ops", "model_ops",
    "non_embedding_param_count", "param_breakdown", "param_count", "presets", "training_flops",
    "training_memory_bytes",
]
