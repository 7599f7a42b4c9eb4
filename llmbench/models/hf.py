"""Import a Hugging Face config.json offline (no transformers, no network, no weights).

    llmbench models show path/to/config.json

Supported model_type: gpt2, bert, llama (also mistral-style llama configs), gptj, gpt_neox.
"""
from __future__ import annotations

import json
from pathlib import Path

from .spec import ModelSpec


def _get(cfg: dict, *keys, default=None, required=True, path=""):
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    if required and default is None:
        raise ValueError(f"{path}: config.json lacks {' / '.join(keys)}")
    return default


def _act(cfg: dict, key: str, path: str) -> str:
    act = str(cfg.get(key, "gelu")).lower()
    if "gelu" in act:
        return "gelu"
    if act in ("silu", "swish"):
        return "swiglu"
    raise ValueError(f"{path}: unsupported activation {act!r}")


def from_hf_config(path_like: str | Path) -> ModelSpec:
    path = Path(path_like)
    if path.is_dir():
        path = path / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"no such config.json: {path}")
    try:
        cfg = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: config.json must hold a JSON object")
    mt = cfg.get("model_type")
    name = cfg.get("_name_or_path") or path.parent.name or "hf-model"
    name = str(name).rstrip("/").split("/")[-1] or "hf-model"
    g = lambda *k, **kw: _get(cfg, *k, path=str(path), **kw)  # noqa: E731
    src = f"Hugging Face config.json ({path})"
    try:
        if mt == "gpt2":
            return ModelSpec(
                name=name, family="gpt", n_layers=g("n_layer"), d_model=g("n_embd"), n_heads=g("n_head"),
                d_ff=cfg.get("n_inner") or 0, vocab_size=g("vocab_size"),
                max_seq_len=g("n_positions", "n_ctx"), activation=_act(cfg, "activation_function", str(path)),
                tied_embeddings=cfg.get("tie_word_embeddings", True), source=src)
        if mt == "bert":
            return ModelSpec(
                name=name, family="bert", n_layers=g("num_hidden_layers"), d_model=g("hidden_size"),
                n_heads=g("num_attention_heads"), d_ff=g("intermediate_size"), vocab_size=g("vocab_size"),
                max_seq_len=g("max_position_embeddings"), activation=_act(cfg, "hidden_act", str(path)),
                causal=False, n_token_types=cfg.get("type_vocab_size", 2), embedding_norm=True,
                final_norm=False, head="cls", n_classes=len(cfg.get("id2label", {})) or 2, source=src)
        if mt in ("llama", "mistral"):
            return ModelSpec(
                name=name, family="llama", n_layers=g("num_hidden_layers"), d_model=g("hidden_size"),
                n_heads=g("num_attention_heads"), n_kv_heads=cfg.get("num_key_value_heads") or 0,
                d_ff=g("intermediate_size"), vocab_size=g("vocab_size"),
                max_seq_len=g("max_position_embeddings"), activation="swiglu", norm="rmsnorm",
                position="rotary", tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                biases=bool(cfg.get("mlp_bias", False)), attn_biases=bool(cfg.get("attention_bias", False)),
                source=src)
        if mt == "gptj":
            n_embd, n_head = g("n_embd"), g("n_head")
            rot = cfg.get("rotary_dim") or n_embd // n_head
            return ModelSpec(
                name=name, family="gptj", n_layers=g("n_layer"), d_model=n_embd, n_heads=n_head,
                d_ff=cfg.get("n_inner") or 0, vocab_size=g("vocab_size"), max_seq_len=g("n_positions"),
                activation=_act(cfg, "activation_function", str(path)), position="rotary",
                rotary_pct=rot / (n_embd // n_head), tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                attn_biases=False, lm_head_bias=True, parallel_residual=True, source=src)
        if mt == "gpt_neox":
            return ModelSpec(
                name=name, family="neox", n_layers=g("num_hidden_layers"), d_model=g("hidden_size"),
                n_heads=g("num_attention_heads"), d_ff=g("intermediate_size"), vocab_size=g("vocab_size"),
                max_seq_len=g("max_position_embeddings"), activation=_act(cfg, "hidden_act", str(path)),
                position="rotary", rotary_pct=float(cfg.get("rotary_pct", 0.25)),
                tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                parallel_residual=bool(cfg.get("use_parallel_residual", True)), source=src)
    except TypeError as e:
        raise ValueError(f"{path}: malformed config.json ({e})") from None
    raise ValueError(f"{path}: unsupported model_type {mt!r} (gpt2, bert, llama, gptj, gpt_neox)")
