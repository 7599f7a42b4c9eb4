"""What `llmbench models show` should add for MoE, MLA and windowed models (plain data, no torch).

    from llmbench.models import get_model
    from llmbench.models.summary import architecture_summary
    architecture_summary(get_model("mixtral-8x7b"))

Every key is present for every model (stable --json keys); zero, None or False when it does not apply.
"""
from __future__ import annotations

from .counting import active_param_count, kv_cache_bytes, param_count
from .moe import expert_weight_bytes_read
from .spec import ModelSpec


def architecture_summary(spec: ModelSpec, dtype: str = "bf16") -> dict:
    """Active parameters, the MoE layout, attention variant and the KV cache at full context."""
    return {
        "active_params": active_param_count(spec),
        "active_fraction": active_param_count(spec) / param_count(spec),
        "n_experts": spec.n_experts, "n_experts_active": spec.n_experts_active,
        "n_shared_experts": spec.n_shared_experts, "d_ff_expert": spec.d_ff_expert if spec.is_moe else 0,
        "n_moe_layers": spec.n_moe_layers, "router_score": spec.router_score if spec.is_moe else None,
        "capacity_factor": spec.capacity_factor,
        "expert_weight_bytes_read_batch1": expert_weight_bytes_read(spec, 1, dtype),
        "attention": "mla" if spec.is_mla else ("gqa" if spec.n_kv_heads < spec.n_heads else "mha"),
        "d_head": spec.d_head, "d_head_v": spec.d_head_v,
        "kv_lora_rank": spec.kv_lora_rank, "q_lora_rank": spec.q_lora_rank,
        "sliding_window": spec.sliding_window,
        "global_layers": sum(spec.window(i) == 0 for i in range(spec.n_layers)),
        "qk_norm": spec.qk_norm, "attn_logit_softcap": spec.attn_logit_softcap,
        "final_logit_softcap": spec.final_logit_softcap,
        f"kv_cache_bytes_at_max_seq_len_{dtype}": kv_cache_bytes(spec, spec.max_seq_len, 1, dtype),
    }
