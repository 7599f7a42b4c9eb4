"""`llmbench models list|show`: the model catalog, HF config.json import, exact counting.

    llmbench models list
    llmbench models show gpt2-xl --json
    llmbench models show path/to/config.json
"""
from __future__ import annotations

from llmbench._cliutil import add_json, emit_json, pairs, table
from llmbench.units import fmt_bytes, fmt_count


def register(cli) -> None:
    g = cli.group("models", "Model catalog: presets, Hugging Face config.json import, counting.")
    add_json(g.command("list", models_list))
    p = g.command("show", models_show)
    p.add_argument("name", help="preset name or path to a Hugging Face config.json")
    add_json(p)


def model_summary(spec) -> dict:
    """Shape, exact parameter count, FLOPs per token, training memory and KV cache of a model."""
    from llmbench.models.counting import (
        flops_per_token, kv_cache_bytes_per_token, param_breakdown, param_count,
        training_memory_bytes,
    )
    from llmbench.models.summary import architecture_summary

    mem = training_memory_bytes(spec, "bf16")
    return {**architecture_summary(spec),
        "name": spec.name, "family": spec.family, "params": param_count(spec),
        "params_breakdown": param_breakdown(spec),
        "n_layers": spec.n_layers, "d_model": spec.d_model, "n_heads": spec.n_heads,
        "n_kv_heads": spec.n_kv_heads, "d_ff": spec.d_ff, "vocab_size": spec.vocab_size,
        "max_seq_len": spec.max_seq_len, "activation": spec.activation, "norm": spec.norm,
        "position": spec.position, "tied_embeddings": spec.tied_embeddings, "head": spec.head,
        "flops_per_token_train": flops_per_token(spec, training=True),
        "flops_per_token_infer": flops_per_token(spec, training=False),
        "flops_seq_len": spec.max_seq_len,
        "training_memory_bytes": mem["total"], "training_memory_breakdown_bytes": mem,
        "kv_cache_bytes_per_token_bf16": kv_cache_bytes_per_token(spec, "bf16"),
        "source": spec.source, "notes": spec.notes,
    }


def models_list(a) -> None:
    """List the model presets."""
    from llmbench.models import presets
    from llmbench.models.counting import param_count

    rows = [{"name": s.name, "family": s.family, "params": param_count(s), "n_layers": s.n_layers,
             "d_model": s.d_model, "n_heads": s.n_heads, "vocab_size": s.vocab_size,
             "max_seq_len": s.max_seq_len, "source": s.source} for s in presets().values()]
    if a.json:
        return emit_json(rows)
    table("llmbench models", ("name", "family", "params", "layers", "d_model", "heads", "vocab", "context"),
          [(r["name"], r["family"], fmt_count(r["params"]), r["n_layers"], r["d_model"], r["n_heads"],
            r["vocab_size"], r["max_seq_len"]) for r in rows],
          right=("params", "layers", "d_model", "heads", "vocab", "context"))


def models_show(a) -> None:
    """Parameters, FLOPs per token, training memory and KV-cache size of one model."""
    from llmbench.models import get_model

    info = model_summary(get_model(a.name))
    if a.json:
        return emit_json(info)
    rows = [(k, info[k]) for k in ("name", "family", "n_layers", "d_model", "n_heads", "n_kv_heads",
                                    "d_ff", "vocab_size", "max_seq_len", "activation", "norm",
                                    "position", "tied_embeddings", "head")]
    rows.append(("params", f"{info['params']:,}"))
    rows += [(f"  {part}", f"{n:,}") for part, n in info["params_breakdown"].items() if n]
    if info["n_experts"]:
        rows += [("active params (per token)", f"{info['active_params']:,} ({info['active_fraction']:.1%})"),
                 ("experts", f"{info['n_experts']} routed, top-{info['n_experts_active']}, "
                             f"{info['n_shared_experts']} shared, width {info['d_ff_expert']}, "
                             f"{info['n_moe_layers']} MoE layers, router {info['router_score']}"),
                 ("expert weights read per token (batch 1)", fmt_bytes(info["expert_weight_bytes_read_batch1"]))]
    rows.append(("attention", info["attention"] + (f", kv_lora_rank {info['kv_lora_rank']}" if info["kv_lora_rank"]
                                                   else "") + (f", sliding window {info['sliding_window']} "
                                                               f"({info['global_layers']} global layers)"
                                                               if info["sliding_window"] else "")))
    rows += [(f"train FLOPs/token (T={info['flops_seq_len']})", fmt_count(info["flops_per_token_train"])),
             ("infer FLOPs/token (decode at T)", fmt_count(info["flops_per_token_infer"])),
             ("training memory (bf16 + fp32 master + Adam)", fmt_bytes(info["training_memory_bytes"])),
             ("KV cache per token (bf16)", fmt_bytes(info["kv_cache_bytes_per_token_bf16"])),
             ("source", info["source"])]
    if info["notes"]:
        rows.append(("notes", " ".join(info["notes"].split())))
    pairs(rows)
