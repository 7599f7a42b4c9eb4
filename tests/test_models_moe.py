"""Mixture-of-experts, latent attention and sliding-window counting (models/moe.py, models/mla.py,
counting.py): parameters total and active, FLOPs at top-k against the closed form, capacity,
expert weights read against batch, MLA's KV cache and decode, windows. FLOPs against a torch
model are in tests/test_measure_modeling.py."""
import math
import random

import pytest

from llmbench.models import ModelSpec, get_model, presets
from llmbench.models.counting import (
    activation_bytes_per_layer, active_param_count, closed_form_flops_per_token, decode_flops,
    head_ops, kv_cache_bytes, kv_cache_bytes_per_token, layer_ops, model_ops, param_breakdown,
    param_count, training_flops,
)
from llmbench.models.moe import dispatch, expected_experts_hit, expert_params, expert_weight_bytes_read
from llmbench.models.ops import causal_pairs
from llmbench.models.spec import resize

MOE = ["mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "deepseek-v3", "gpt-moe-tiny"]


def test_breakdown_sums_and_splits_experts_out():
    for name, spec in presets().items():
        parts = param_breakdown(spec)
        assert sum(parts.values()) == param_count(spec), name
        if not spec.is_moe:
            assert parts["router"] == parts["experts"] == parts["shared_experts"] == 0
    ds = get_model("deepseek-v3")
    parts = param_breakdown(ds)
    assert parts["experts"] == 58 * 256 * 3 * 7168 * 2048
    assert parts["shared_experts"] == 58 * 3 * 7168 * 2048
    assert parts["router"] == 58 * (7168 * 256 + 256)  # gate + e_score_correction_bias


@pytest.mark.parametrize("name", MOE)
def test_active_params_are_total_minus_idle_experts(name):
    spec = get_model(name)
    idle = spec.n_moe_layers * (spec.n_experts - spec.n_experts_active) * expert_params(spec)
    assert active_param_count(spec) == param_count(spec) - idle
    assert active_param_count(get_model("llama-2-7b")) == param_count(get_model("llama-2-7b"))


@pytest.mark.parametrize("name", MOE)
def test_training_matmul_flops_equal_closed_form_with_active_weights(name):
    # PaLM App. B 6N + attention, N the weights a token multiplies by: for MoE the top-k experts
    spec = get_model(name)
    T = 2048
    matmul = sum(o.matmul_flops for o in model_ops(spec, 1, T) if o.where != "embed")
    assert 3 * matmul / T == pytest.approx(closed_form_flops_per_token(spec, T), rel=1e-12)
    total = training_flops(spec, 1, T)["model"] / T
    assert 1.0 <= total / closed_form_flops_per_token(spec, T) < 1.05


def test_expert_gemms_run_tokens_times_top_k_rows():
    spec = get_model("mixtral-8x7b")
    n, d, f = 2 * 512, 4096, 14336
    ops = {o.name: o for o in layer_ops(spec, 2, 512, "bf16")}
    assert ops["router"].matmul_flops == 2 * n * 8 * d
    assert ops["expert_up"].matmul_flops == 2 * (n * 2) * (2 * f) * d
    assert ops["expert_down"].matmul_flops == 2 * (n * 2) * d * f
    assert ops["expert_up"].weight_params == 8 * d * 2 * f  # owns all 8 experts' weights
    assert "mlp_up" not in ops


def test_capacity_factor_pads_and_drops():
    spec = get_model("mixtral-8x7b")
    tokens = 1000
    assert dispatch(spec, tokens).rows_computed == 2000  # dropless
    padded = dispatch(spec.with_(capacity_factor=1.25), tokens)
    assert padded.capacity_per_expert == math.ceil(1.25 * 1000 * 2 / 8) == 313
    assert (padded.rows_computed, padded.padded_rows, padded.dropped_assignments) == (2504, 504, 0)
    short = dispatch(spec.with_(capacity_factor=0.5), tokens)
    assert (short.rows_computed, short.dropped_assignments) == (1000, 1000)
    # the padded slots are computed: training FLOPs grow by their expert GEMMs exactly
    base = training_flops(spec, 1, tokens)["model"]
    more = training_flops(spec.with_(capacity_factor=1.25), 1, tokens)["model"]
    per_row = 3 * (2 * 2 * 14336 * 4096 + 2 * 4096 * 14336 + 5 * 14336)
    assert more - base == pytest.approx(spec.n_layers * 504 * per_row, rel=1e-12)


def test_expected_experts_hit_against_simulation():
    spec = get_model("mixtral-8x7b")
    rng = random.Random(0)
    for tokens in (1, 3, 10):
        trials = [len(set().union(*(rng.sample(range(8), 2) for _ in range(tokens)))) for _ in range(4000)]
        assert sum(trials) / len(trials) == pytest.approx(expected_experts_hit(spec, tokens), rel=0.02)
    assert expected_experts_hit(spec, 1) == pytest.approx(2)


def test_expert_weight_bytes_read_grows_from_top_k_to_all_experts():
    spec = get_model("mixtral-8x7b")
    one = expert_weight_bytes_read(spec, 1, "bf16")
    assert one == pytest.approx(32 * 2 * 3 * 4096 * 14336 * 2)  # 2 experts per layer at batch 1
    reads = [expert_weight_bytes_read(spec, t) for t in (1, 2, 4, 16, 64, 256)]
    assert reads == sorted(reads)
    assert reads[-1] == pytest.approx(32 * 8 * 3 * 4096 * 14336 * 2, rel=1e-9)  # all experts
    ds = get_model("deepseek-v3")  # the shared expert is read at any batch
    assert expert_weight_bytes_read(ds, 1) == pytest.approx(58 * 9 * 3 * 7168 * 2048 * 2)
    assert expert_weight_bytes_read(get_model("llama-2-7b"), 1) == 0


def test_mla_parameters_cache_and_decode():
    ds = get_model("deepseek-v3")
    d, h = 7168, 128
    attn = (d * 1536 + 1536 + 1536 * h * 192 + d * 576 + 512 + 512 * h * 256 + h * 128 * d)
    mlp = 3 * d * 18432
    assert param_breakdown(ds)["layers"] == 61 * (attn + 2 * d) + 3 * mlp
    assert kv_cache_bytes_per_token(ds, "fp8") == 61 * 576  # latent 512 + rope key 64
    # absorbed decode: per extra context token and layer, h (2 (r_kv + r) + 2 r_kv + 6) FLOPs
    c = 1000
    assert decode_flops(ds, 2 * c) - decode_flops(ds, c) == pytest.approx(61 * c * h * (2 * 576 + 2 * 512 + 6))


def test_causal_pairs_with_a_window_count_the_mask():
    for T in (1, 5, 9):
        for W in (0, 1, 3, 9, 12):
            mask = [(q, k) for q in range(T) for k in range(T) if k <= q and (not W or q - k < W)]
            assert causal_pairs(T, W) == len(mask), (T, W)


def test_sliding_windows_in_flops_decode_and_cache():
    mistral = get_model("mistral-7b")
    assert decode_flops(mistral, 20000) == decode_flops(mistral, 4096)  # every layer windowed
    full = mistral.with_(sliding_window=0)
    assert decode_flops(full, 20000) > decode_flops(full, 4096)
    assert training_flops(mistral, 1, 8192)["model"] == training_flops(full, 1, 8192)["model"]
    windowed = training_flops(mistral, 1, 8192, causal_discount=True)["model"]
    assert windowed < training_flops(full, 1, 8192, causal_discount=True)["model"]
    per_layer = kv_cache_bytes_per_token(mistral) / 32
    assert kv_cache_bytes(mistral, 32768) == 32 * 4096 * per_layer  # rolling buffer
    gemma2 = get_model("gemma2-9b")  # 21 local layers of 4096, 21 global
    assert kv_cache_bytes(gemma2, 8192, batch=2) == 2 * (21 * 4096 + 21 * 8192) * kv_cache_bytes_per_token(gemma2) / 42


def test_softcaps_add_elementwise_work_only():
    g = get_model("gemma2-9b")
    plain = g.with_(attn_logit_softcap=0.0, final_logit_softcap=0.0)
    assert sum(o.matmul_flops for o in model_ops(g, 1, 64)) == sum(o.matmul_flops for o in model_ops(plain, 1, 64))
    assert training_flops(g, 1, 64)["model"] > training_flops(plain, 1, 64)["model"]
    assert any(o.name == "logit_softcap" for o in head_ops(g, 1, 8))


def test_layers_in_order_and_activation_mean():
    ds = get_model("deepseek-v3")
    ops = model_ops(ds, 1, 16)
    assert sum(o.name == "router" for o in ops) == 58 and sum(o.name == "mlp_up" for o in ops) == 3
    first_router = next(i for i, o in enumerate(ops) if o.name == "router")
    assert max(i for i, o in enumerate(ops) if o.name == "mlp_up") < first_router
    per = [activation_bytes_per_layer(ds, 2, 64, layer=i) for i in range(ds.n_layers)]
    assert activation_bytes_per_layer(ds, 2, 64) * ds.n_layers == pytest.approx(sum(per))
    assert per[3] != per[0]


@pytest.mark.parametrize("change, field", [
    (dict(n_experts=8, n_experts_active=9), "n_experts_active"),
    (dict(n_experts_active=2), "n_experts_active"),
    (dict(n_experts=8, n_experts_active=2, first_dense_layers=2), "first_dense_layers"),
    (dict(n_experts=8, n_experts_active=2, capacity_factor=0.0), "capacity_factor"),
    (dict(n_experts=8, n_experts_active=2, router_score="relu"), "router_score"),
    (dict(kv_lora_rank=16, qk_rope_head_dim=3, v_head_dim=8, position="rotary"), "qk_rope_head_dim"),
    (dict(q_lora_rank=16), "kv_lora_rank"),
    (dict(global_attn_every=2), "global_attn_every"),
    (dict(single_norm=True), "single_norm"),
    (dict(head_dim=-1), "head_dim"),
    (dict(activation="reglu"), "activation"),
])
def test_moe_and_attention_validation_names_the_field(change, field):
    base = dict(name="t", family="gpt", n_layers=2, d_model=64, n_heads=4, vocab_size=100, max_seq_len=32)
    with pytest.raises(ValueError, match=field):
        ModelSpec(**{**base, **change})


def test_head_dim_lifts_the_divisibility_rule():
    spec = ModelSpec(name="t", family="gemma", n_layers=1, d_model=100, n_heads=3, head_dim=32,
                     vocab_size=10, max_seq_len=8)
    assert (spec.d_head, spec.q_dim) == (32, 96)


def test_resize_keeps_experts_and_proportions():
    small = resize(get_model("mixtral-8x7b"), d_model=64, n_heads=8)
    assert (small.n_experts, small.n_experts_active, small.n_kv_heads) == (8, 2, 2)
    assert small.d_ff_expert == round(14336 * 64 / 4096)
    q = resize(get_model("qwen3-30b-a3b"), d_model=64, n_heads=8)
    assert q.d_head == 2 * 64 // 8  # Qwen3-30B-A3B's heads are twice d / h wide
    ds = resize(get_model("deepseek-v3"), n_layers=4, d_model=64, n_heads=4)
    assert ds.is_mla and ds.kv_lora_rank < 64 and ds.qk_rope_head_dim % 2 == 0


def test_architecture_summary_has_stable_keys():
    from llmbench.models.summary import architecture_summary

    dense, moe = architecture_summary(get_model("gpt2-xl")), architecture_summary(get_model("deepseek-v3"))
    assert dense.keys() == moe.keys()
    assert dense["active_fraction"] == 1.0 and dense["n_experts"] == 0 and dense["attention"] == "mha"
    assert moe["attention"] == "mla" and moe["n_moe_layers"] == 58
    assert 0.05 < moe["active_fraction"] < 0.06  # 37.6B of 671B
