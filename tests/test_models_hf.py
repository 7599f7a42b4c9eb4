"""Hugging Face config.json import of modern architectures: each imports to its published parameter
total (model card or paper, cited per case), and bad files are one-line BadInput errors."""
import json
from pathlib import Path

import pytest

from llmbench.errors import BadInput
from llmbench.models import get_model
from llmbench.models.counting import (
    active_param_count, kv_cache_bytes_per_token, non_embedding_param_count, param_count,
)
from llmbench.models.hf import MAX_CONFIG_BYTES, SUPPORTED, from_hf_config
from llmbench.models.spec import INIT_FIELDS

HF = Path(__file__).parent / "data" / "hf_configs"


def _within(got: float, published: float, unit: float) -> bool:
    """got agrees with `published` to the card's last digit `unit` (e.g. 0.01e9 for '7.61B'); cards
    round or truncate (Qwen2.5-7B: 7,615,616,512 is '7.61B'), so one unit either way."""
    return abs(got - published) < unit


# (folder, model_type, total, rounding unit of the published figure; 1 = exact), source
TOTALS = [
    ("mistral-7b-v0.1", "mistral", 7_241_732_096, 1),        # HF model.safetensors metadata
    ("mixtral-8x7b-v0.1", "mixtral", 46_702_792_704, 1),     # HF model.safetensors; "46.7B" (Mistral blog)
    ("phi-3-mini-4k-instruct", "phi3", 3_821_079_552, 1),    # HF model.safetensors; "3.8B" (arXiv:2404.14219)
    ("falcon-7b", "falcon", 7e9, 1e9),                       # model card: "7B parameters"
    ("qwen2.5-7b", "qwen2", 7.61e9, 0.01e9),                 # Qwen2.5-7B card: 7.61B
    ("qwen3-8b", "qwen3", 8.2e9, 0.1e9),                     # Qwen3-8B card: 8.2B
    ("qwen3-30b-a3b", "qwen3_moe", 30.5e9, 0.1e9),           # Qwen3-30B-A3B card: 30.5B
    ("gemma-2-9b", "gemma2", 9.24e9, 0.01e9),                # HF gemma-2-9b: 9.24B
    ("gemma-3-1b-pt", "gemma3_text", 1.0e9, 0.001e9),        # arXiv:2503.19786 Table 1: 302M + 698M
    ("deepseek-v3", "deepseek_v3", 671e9, 1e9),              # arXiv:2412.19437: 671B (MTP excluded)
]


@pytest.mark.parametrize("folder, model_type, total, unit", TOTALS)
def test_hf_import_counts_published_total(folder, model_type, total, unit):
    path = HF / folder / "config.json"
    assert json.loads(path.read_text())["model_type"] == model_type
    got = param_count(from_hf_config(path))
    assert (got == total) if unit == 1 else _within(got, total, unit), got


@pytest.mark.parametrize("folder, non_embedding, unit", [
    ("qwen2.5-7b", 6.53e9, 0.01e9),          # Qwen2.5-7B card: 6.53B non-embedding
    ("qwen3-8b", 6.95e9, 0.01e9),            # Qwen3-8B card: 6.95B
    ("qwen3-30b-a3b", 29.9e9, 0.1e9),        # Qwen3-30B-A3B card: 29.9B
    ("gemma-2-9b", 8_324_201_984, 1),        # arXiv:2408.00118 Table 2, exact
    ("gemma-3-1b-pt", 698e6, 1e6),           # arXiv:2503.19786 Table 1: 698M
    ("gemma-3-12b-pt", 10_759e6, 1e6),       # arXiv:2503.19786 Table 1: 10,759M (text model)
])
def test_hf_import_counts_published_non_embedding(folder, non_embedding, unit):
    got = non_embedding_param_count(from_hf_config(HF / folder))
    assert (got == non_embedding) if unit == 1 else _within(got, non_embedding, unit), got


@pytest.mark.parametrize("folder, active, unit", [
    ("mixtral-8x7b-v0.1", 12.9e9, 0.1e9),  # mistral.ai/news/mixtral-of-experts: 12.9B active
    ("qwen3-30b-a3b", 3.3e9, 0.1e9),       # Qwen3-30B-A3B card: 3.3B activated
    ("deepseek-v3", 37e9, 1e9),            # arXiv:2412.19437: 37B activated (ours 37.55B)
])
def test_hf_import_counts_published_active(folder, active, unit):
    assert _within(active_param_count(from_hf_config(HF / folder)), active, unit)


@pytest.mark.parametrize("folder, preset", [
    ("qwen2.5-7b", "qwen2.5-7b"), ("qwen3-8b", "qwen3-8b"), ("qwen3-30b-a3b", "qwen3-30b-a3b"),
    ("mistral-7b-v0.1", "mistral-7b"), ("mixtral-8x7b-v0.1", "mixtral-8x7b"),
    ("gemma-2-9b", "gemma2-9b"), ("gemma-3-1b-pt", "gemma3-1b"), ("phi-3-mini-4k-instruct", "phi3-mini"),
    ("deepseek-v3", "deepseek-v3"), ("falcon-7b", "falcon-7b"),
])
def test_hf_import_matches_preset(folder, preset):
    imported, spec = from_hf_config(HF / folder), get_model(preset)
    for f in INIT_FIELDS:
        if f not in ("name", "source", "notes", "family"):
            assert getattr(imported, f) == getattr(spec, f), f


def test_hf_import_records_architecture_details():
    gemma2 = from_hf_config(HF / "gemma-2-9b")
    assert (gemma2.d_head, gemma2.q_dim, gemma2.d_model) == (256, 4096, 3584)  # head_dim != d / h
    assert (gemma2.sliding_window, gemma2.window(0), gemma2.window(1)) == (4096, 4096, 0)
    assert (gemma2.attn_logit_softcap, gemma2.final_logit_softcap) == (50.0, 30.0)
    assert gemma2.tied_embeddings and gemma2.post_norms and not gemma2.qk_norm
    gemma3 = from_hf_config(HF / "gemma-3-12b-pt")  # text_config of a multimodal config
    assert [gemma3.window(i) for i in range(6)] == [1024] * 5 + [0] and gemma3.qk_norm
    qwen2 = from_hf_config(HF / "qwen2.5-7b")
    assert qwen2.attn_biases and not qwen2.attn_out_bias and not qwen2.biases
    assert from_hf_config(HF / "mistral-7b-v0.1").window(31) == 4096
    ds = from_hf_config(HF / "deepseek-v3")
    assert ds.n_moe_layers == 58 and not ds.is_moe_layer(2) and ds.is_moe_layer(3)
    # DeepSeek-V2 Sec. 2.1.2: MLA caches (d_c + d_h^R) l elements per token: (512 + 64) x 61
    assert kv_cache_bytes_per_token(ds, "bf16") == 576 * 61 * 2
    assert from_hf_config(HF / "falcon-7b").n_kv_heads == 1  # multi-query


def _write(tmp_path, cfg) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def _mixtral() -> dict:
    return json.loads((HF / "mixtral-8x7b-v0.1" / "config.json").read_text())


@pytest.mark.parametrize("change, needle", [
    ({"hidden_size": "4096"}, "hidden_size must be an integer"),
    ({"hidden_size": 4096.0}, "hidden_size must be an integer"),
    ({"num_hidden_layers": -2}, "num_hidden_layers must be >= 1"),
    ({"num_attention_heads": 0}, "num_attention_heads must be >= 1"),   # was ZeroDivisionError
    ({"num_key_value_heads": 0}, "num_key_value_heads must be >= 1"),   # was taken as full MHA
    ({"intermediate_size": 0}, "intermediate_size must be >= 1"),
    ({"model_type": {"a": 1}}, "unsupported model_type"),                # was "unhashable type"
    ({"model_type": ["mixtral"]}, "unsupported model_type"),
    ({"num_local_experts": None}, "lacks num_local_experts"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings must be true or false"),
    ({"num_experts_per_tok": 9}, "n_experts_active"),
    ({"hidden_act": "relu"}, "unsupported activation"),
    ({"model_type": "mamba"}, "supported: bert, deepseek_v3"),
])
def test_hf_import_bad_fields_are_one_line(tmp_path, change, needle):
    path = _write(tmp_path, {**_mixtral(), **change})
    with pytest.raises(BadInput) as err:
        from_hf_config(path)
    msg = str(err.value)
    assert needle in msg and str(path) in msg and "\n" not in msg, msg


def test_hf_import_refuses_large_and_odd_files(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(BadInput, match="too large"):
        from_hf_config(path)
    _write(tmp_path, {"model_type": "gemma3", "text_config": [1]})
    with pytest.raises(BadInput, match="text_config must be a JSON object"):
        from_hf_config(path)
    _write(tmp_path, {**json.loads((HF / "qwen3-30b-a3b" / "config.json").read_text()), "mlp_only_layers": [5]})
    with pytest.raises(BadInput, match="mlp_only_layers"):
        from_hf_config(path)
    _write(tmp_path, {**json.loads((HF / "qwen3-30b-a3b" / "config.json").read_text()), "moe_intermediate_size": 0})
    with pytest.raises(BadInput, match="moe_intermediate_size must be >= 1"):   # was a silent 233B model
        from_hf_config(path)
    gemma = json.loads((HF / "gemma-3-12b-pt" / "config.json").read_text())
    _write(tmp_path, {**gemma, "text_config": {**gemma["text_config"], "layer_types": ["full_attention"]}})
    with pytest.raises(BadInput, match="lists 1 layers for num_hidden_layers"):
        from_hf_config(path)
    _write(tmp_path, {**json.loads((HF / "falcon-7b" / "config.json").read_text()), "alibi": True})
    with pytest.raises(BadInput, match="alibi"):
        from_hf_config(path)
    assert {"qwen2", "qwen3", "qwen3_moe", "mistral", "mixtral", "gemma2", "gemma3", "phi3",
            "deepseek_v3", "falcon"} <= set(SUPPORTED)
