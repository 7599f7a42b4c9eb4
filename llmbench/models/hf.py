"""Import a Hugging Face config.json offline (no transformers, no network, no weights).

    llmbench models show path/to/config.json

Supported model_type: bert, deepseek_v3, falcon, gemma2, gemma3 (its text_config), gemma3_text,
gpt2, gpt_neox, gptj, llama, mistral, mixtral, phi3, qwen2, qwen3, qwen3_moe. A missing, oversized (> 1 MB), malformed or unsupported file
raises llmbench.errors.BadInput with one line naming the file and the key. Keys a config leaves out
take the `transformers` configuration class's default (written next to each read).
"""
from __future__ import annotations

import json
from pathlib import Path

from llmbench._files import regular_file
from llmbench.errors import BadInput

from .spec import ModelSpec

MAX_CONFIG_BYTES = 1_000_000


class _Cfg:
    """Typed access to one config dict; every error names the file and the key."""

    def __init__(self, cfg: dict, path: Path, prefix: str = ""):
        self.cfg, self.path, self.prefix = cfg, path, prefix

    def bad(self, key: str, why: str) -> BadInput:
        return BadInput(f"{self.path}: {self.prefix}{key} {why}")

    def get(self, *keys, default=None):
        for k in keys:
            if self.cfg.get(k) is not None:
                return k, self.cfg[k]
        return keys[0], default

    def int(self, *keys, default=None, least: int = 1) -> int:
        """An integer >= least: sizes and counts are >= 1 (a 0 head count or expert width is no
        model); the keys where 0 means "none" or "derived" pass least=0."""
        key, value = self.get(*keys, default=default)
        if value is None:
            raise BadInput(f"{self.path}: config.json lacks {self.prefix}{' / '.join(keys)}")
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.bad(key, f"must be an integer, got {value!r}")
        if value < least:
            raise self.bad(key, f"must be >= {least}, got {value}")
        return value

    def float(self, key: str, default: float = 0.0) -> float:
        _, value = self.get(key, default=default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise self.bad(key, f"must be a non-negative number, got {value!r}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        _, value = self.get(key, default=default)
        if not isinstance(value, bool):
            raise self.bad(key, f"must be true or false, got {value!r}")
        return value

    def str(self, *keys, default: str) -> str:
        key, value = self.get(*keys, default=default)
        if not isinstance(value, str):
            raise self.bad(key, f"must be a string, got {value!r}")
        return value

    def sub(self, key: str) -> "_Cfg":
        value = self.cfg.get(key)
        if not isinstance(value, dict):
            raise self.bad(key, f"must be a JSON object, got {type(value).__name__}")
        return _Cfg(value, self.path, f"{self.prefix}{key}.")


def _act(c: _Cfg, *keys, gated: bool = False, default: str = "gelu") -> str:
    key, act = c.get(*keys, default=default)
    act = str(act).lower()
    if "gelu" in act:
        return "geglu" if gated else "gelu"
    if act in ("silu", "swish"):
        return "swiglu"
    raise c.bad(key, f"names an unsupported activation {act!r} (gelu*, silu)")


def _head_dim(c: _Cfg, d: int, h: int, default: int | None = None) -> int:
    """head_dim when it differs from d_model / n_heads; 0 (derived) otherwise: a config without
    head_dim whose d_model the heads do not divide is left to ModelSpec to refuse (not floored)."""
    if default is None and c.get("head_dim")[1] is None:
        return 0
    hd = c.int("head_dim", default=default)
    return 0 if hd * h == d else hd


def _llama_like(c: _Cfg) -> dict:
    """Llama, Mistral, Mixtral, Qwen2/3(-MoE), Phi-3: RMSNorm, rotary, gated MLP, untied head."""
    d, h = c.int("hidden_size"), c.int("num_attention_heads")
    out = dict(family="llama", n_layers=c.int("num_hidden_layers"), d_model=d, n_heads=h,
               n_kv_heads=c.int("num_key_value_heads", default=h), head_dim=_head_dim(c, d, h),
               d_ff=c.int("intermediate_size"), vocab_size=c.int("vocab_size"),
               max_seq_len=c.int("max_position_embeddings"),
               activation=_act(c, "hidden_act", gated=True, default="silu"), norm="rmsnorm",
               position="rotary", rotary_pct=c.float("partial_rotary_factor", 1.0) or 1.0,
               tied_embeddings=c.bool("tie_word_embeddings", False), biases=c.bool("mlp_bias", False),
               attn_biases=c.bool("attention_bias", False))
    if c.get("sliding_window")[1] is not None and c.bool("use_sliding_window", True):
        out["sliding_window"] = c.int("sliding_window")
    return out


def _qwen(c: _Cfg, mt: str) -> dict:
    out = _llama_like(c)
    if c.bool("use_sliding_window", False):
        raise c.bad("use_sliding_window", "is true: Qwen's per-layer window (max_window_layers) is not modelled")
    out.pop("sliding_window", None)
    out["family"] = "qwen"
    if mt == "qwen2":  # Qwen2Attention: bias on q/k/v, none on o_proj
        out.update(attn_biases=True, attn_out_bias=False)
    else:  # Qwen3Config: head_dim 128, RMSNorm on every q and k head
        d, h = out["d_model"], out["n_heads"]
        out.update(head_dim=_head_dim(c, d, h, default=128), qk_norm=True)
    if mt == "qwen3_moe":
        out.update(n_experts=c.int("num_experts"), n_experts_active=c.int("num_experts_per_tok"),
                   d_ff_expert=c.int("moe_intermediate_size"), moe_every=c.int("decoder_sparse_step", default=1),
                   router_norm_topk=c.bool("norm_topk_prob", False))
        dense = c.get("mlp_only_layers", default=[])[1]
        if not isinstance(dense, list) or dense != list(range(len(dense))):
            raise c.bad("mlp_only_layers", f"must list the first layers (0, 1, ...), got {dense!r}")
        out["first_dense_layers"] = len(dense)
    return out


def _mistral(c: _Cfg, mt: str) -> dict:
    out = _llama_like(c)
    if mt == "mixtral":  # every layer: num_local_experts SwiGLU experts of intermediate_size
        out.update(family="mistral", n_experts=c.int("num_local_experts"),
                   n_experts_active=c.int("num_experts_per_tok"))
    elif mt == "mistral":
        out["family"] = "mistral"
    elif mt == "phi3":
        out["family"] = "phi3"
    return out


def _gemma_layers(c: _Cfg, mt: str) -> int:
    """global_attn_every from layer_types, sliding_window_pattern (Gemma 3) or 2 (Gemma 2)."""
    types = c.get("layer_types")[1]
    if types is None:
        return 2 if mt == "gemma2" else c.int("sliding_window_pattern", "_sliding_window_pattern", default=6)
    if not isinstance(types, list) or "full_attention" not in types:
        raise c.bad("layer_types", "must list sliding_attention / full_attention layers")
    if len(types) != c.int("num_hidden_layers"):
        raise c.bad("layer_types", f"lists {len(types)} layers for num_hidden_layers {c.int('num_hidden_layers')}")
    every = types.index("full_attention") + 1
    if any((t == "full_attention") != ((i + 1) % every == 0) for i, t in enumerate(types)):
        raise c.bad("layer_types", f"is not a regular pattern of one global layer in {every}")
    return every


# transformers Gemma3TextConfig defaults: the text_config of a gemma3 config.json lists only some keys
GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                        "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                        "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096}


def _gemma(c: _Cfg, mt: str) -> dict:
    """Gemma 2 / 3: GeGLU, four RMSNorms a layer, 256-wide heads, local/global layers, tied head."""
    if mt == "gemma3":
        c = c.sub("text_config")
    if mt != "gemma2":
        c = _Cfg({**GEMMA3_TEXT_DEFAULTS, **c.cfg}, c.path, c.prefix)
    d, h = c.int("hidden_size"), c.int("num_attention_heads")
    return dict(family="gemma", n_layers=c.int("num_hidden_layers"), d_model=d, n_heads=h,
                n_kv_heads=c.int("num_key_value_heads", default=h), head_dim=_head_dim(c, d, h, default=256),
                d_ff=c.int("intermediate_size"), vocab_size=c.int("vocab_size"),
                max_seq_len=c.int("max_position_embeddings"),
                activation=_act(c, "hidden_activation", "hidden_act", gated=True), norm="rmsnorm",
                position="rotary", tied_embeddings=c.bool("tie_word_embeddings", True), biases=False,
                attn_biases=c.bool("attention_bias", False), post_norms=True, qk_norm=mt != "gemma2",
                sliding_window=c.int("sliding_window"), global_attn_every=_gemma_layers(c, mt),
                attn_logit_softcap=c.float("attn_logit_softcapping"),
                final_logit_softcap=c.float("final_logit_softcapping"))


def _deepseek(c: _Cfg, mt: str) -> dict:
    """DeepSeek-V3: MLA attention, dense first_k_dense_replace layers, then DeepSeekMoE layers."""
    if c.int("moe_layer_freq", default=1) != 1:
        raise c.bad("moe_layer_freq", "other than 1 is not modelled")
    return dict(family="deepseek", n_layers=c.int("num_hidden_layers"), d_model=c.int("hidden_size"),
                n_heads=c.int("num_attention_heads"), d_ff=c.int("intermediate_size"),
                vocab_size=c.int("vocab_size"), max_seq_len=c.int("max_position_embeddings"),
                activation=_act(c, "hidden_act", gated=True, default="silu"), norm="rmsnorm",
                position="rotary", tied_embeddings=c.bool("tie_word_embeddings", False), biases=False,
                attn_biases=c.bool("attention_bias", False),
                q_lora_rank=c.int("q_lora_rank", default=0, least=0), kv_lora_rank=c.int("kv_lora_rank"),
                qk_nope_head_dim=c.int("qk_nope_head_dim"), qk_rope_head_dim=c.int("qk_rope_head_dim"),
                v_head_dim=c.int("v_head_dim"), n_experts=c.int("n_routed_experts"),
                n_experts_active=c.int("num_experts_per_tok"), n_shared_experts=c.int("n_shared_experts", default=0, least=0),
                d_ff_expert=c.int("moe_intermediate_size"),
                first_dense_layers=c.int("first_k_dense_replace", default=0, least=0),
                router_score=c.str("scoring_func", default="sigmoid"),
                router_norm_topk=c.bool("norm_topk_prob", True),
                router_bias=c.str("topk_method", default="noaux_tc") == "noaux_tc")


def _falcon(c: _Cfg, mt: str) -> dict:
    """Falcon: parallel attention + MLP (one LayerNorm for 7B; two with new_decoder_architecture)."""
    if c.bool("alibi", False):
        raise c.bad("alibi", "is true: ALiBi positions are not modelled (rotary only)")
    d, h = c.int("hidden_size"), c.int("num_attention_heads", "n_head")
    new = c.bool("new_decoder_architecture", False)
    parallel = new or c.bool("parallel_attn", True)
    kv = c.int("num_kv_heads", default=h) if new else (1 if c.bool("multi_query", True) else h)
    single = parallel and (c.int("num_ln_in_parallel_attn", default=2) == 1 if new else True)
    return dict(family="falcon", n_layers=c.int("num_hidden_layers", "n_layer"), d_model=d, n_heads=h,
                n_kv_heads=kv, d_ff=c.int("ffn_hidden_size", default=4 * d), vocab_size=c.int("vocab_size"),
                max_seq_len=c.int("max_position_embeddings", default=2048), activation="gelu",
                norm="layernorm", position="rotary", tied_embeddings=c.bool("tie_word_embeddings", True),
                biases=c.bool("bias", False), parallel_residual=parallel, single_norm=single)


def _gpt2(c: _Cfg, mt: str) -> dict:
    return dict(family="gpt", n_layers=c.int("n_layer"), d_model=c.int("n_embd"), n_heads=c.int("n_head"),
                d_ff=c.int("n_inner", default=0, least=0), vocab_size=c.int("vocab_size"),
                max_seq_len=c.int("n_positions", "n_ctx"), activation=_act(c, "activation_function"),
                tied_embeddings=c.bool("tie_word_embeddings", True))


def _bert(c: _Cfg, mt: str) -> dict:
    labels = c.get("id2label", default={})[1]
    return dict(family="bert", n_layers=c.int("num_hidden_layers"), d_model=c.int("hidden_size"),
                n_heads=c.int("num_attention_heads"), d_ff=c.int("intermediate_size"),
                vocab_size=c.int("vocab_size"), max_seq_len=c.int("max_position_embeddings"),
                activation=_act(c, "hidden_act"), causal=False, n_token_types=c.int("type_vocab_size", default=2),
                embedding_norm=True, final_norm=False, head="cls",
                n_classes=len(labels) if isinstance(labels, dict) and labels else 2)


def _gptj(c: _Cfg, mt: str) -> dict:
    n_embd, n_head = c.int("n_embd"), c.int("n_head")
    rot = c.int("rotary_dim", default=n_embd // n_head)
    return dict(family="gptj", n_layers=c.int("n_layer"), d_model=n_embd, n_heads=n_head,
                d_ff=c.int("n_inner", default=0, least=0), vocab_size=c.int("vocab_size"), max_seq_len=c.int("n_positions"),
                activation=_act(c, "activation_function"), position="rotary", rotary_pct=rot / (n_embd // n_head),
                tied_embeddings=c.bool("tie_word_embeddings", False), attn_biases=False, lm_head_bias=True,
                parallel_residual=True)


def _neox(c: _Cfg, mt: str) -> dict:
    return dict(family="neox", n_layers=c.int("num_hidden_layers"), d_model=c.int("hidden_size"),
                n_heads=c.int("num_attention_heads"), d_ff=c.int("intermediate_size"),
                vocab_size=c.int("vocab_size"), max_seq_len=c.int("max_position_embeddings"),
                activation=_act(c, "hidden_act"), position="rotary", rotary_pct=c.float("rotary_pct", 0.25),
                tied_embeddings=c.bool("tie_word_embeddings", False),
                parallel_residual=c.bool("use_parallel_residual", True))


BUILDERS = {"gpt2": _gpt2, "bert": _bert, "gptj": _gptj, "gpt_neox": _neox,
            "llama": _mistral, "mistral": _mistral, "mixtral": _mistral, "phi3": _mistral,
            "qwen2": _qwen, "qwen3": _qwen, "qwen3_moe": _qwen, "gemma2": _gemma, "gemma3": _gemma,
            "gemma3_text": _gemma, "deepseek_v3": _deepseek, "falcon": _falcon}
SUPPORTED = tuple(sorted(BUILDERS))


def read_config(path_like: str | Path) -> tuple[dict, Path]:
    """The JSON object of a config.json (or of a folder's config.json), size-checked first."""
    path = Path(path_like)
    if path.is_dir():
        path = path / "config.json"
    path, st = regular_file(path, "config.json")  # missing, or a device (/dev/zero): one line, unread
    size = st.st_size
    if size > MAX_CONFIG_BYTES:
        raise BadInput(f"{path}: {size:,} bytes is too large for a config.json (limit {MAX_CONFIG_BYTES:,})")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        where = f" ({e.msg} at line {e.lineno})" if isinstance(e, json.JSONDecodeError) else ""
        raise BadInput(f"{path}: not valid JSON{where}") from None
    if not isinstance(cfg, dict):
        raise BadInput(f"{path}: config.json must hold a JSON object")
    return cfg, path


def from_hf_config(path_like: str | Path) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json (or a folder holding one)."""
    cfg, path = read_config(path_like)
    mt = cfg.get("model_type")
    if not isinstance(mt, str) or mt not in BUILDERS:
        raise BadInput(f"{path}: unsupported model_type {mt!r} (supported: {', '.join(SUPPORTED)})")
    name = str(cfg.get("_name_or_path") or path.parent.name or "hf-model").rstrip("/").split("/")[-1]
    kwargs = BUILDERS[mt](_Cfg(cfg, path), mt)
    try:
        return ModelSpec(name=name or "hf-model", source=f"Hugging Face config.json ({path})", **kwargs)
    except ValueError as e:
        raise BadInput(f"{path}: {e}") from None
