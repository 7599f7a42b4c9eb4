"""Torch models from ModelSpec: exact parameter counts, exact FLOPs against counting, behaviour."""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from llmbench.measure.flops import count_flops
from llmbench.measure.modeling import build_block, build_model, count_params
from llmbench.models.spec import resize
from llmbench.models import get_model, param_count
from llmbench.models.counting import layer_ops, model_ops

B, T = 2, 16


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: torch on one thread


def tiny(name, **changes):
    base = get_model(name)
    if changes:
        base = base.with_(**changes)
    return resize(base, n_layers=2, d_model=64, n_heads=8, vocab_size=97, max_seq_len=32)


TINY = {
    "gpt": lambda: tiny("gpt2-small"),
    "llama-gqa": lambda: tiny("llama-3.1-70b"),
    "gptj": lambda: tiny("gpt-j-6b"),
    "neox": lambda: tiny("genslm-25m"),
    "bert-cls": lambda: tiny("bert-base"),
    "bert-mlm": lambda: tiny("bert-base", head="mlm"),
}


@pytest.mark.parametrize("name", ["gpt2-small", "gpt2-xl", "gpt3-175b", "bert-base", "bert-large",
                                  "llama-2-7b", "llama-3.1-70b", "gpt-j-6b", "genslm-25m", "genslm-2.5b"])
def test_param_count_on_meta_equals_counting(name):
    spec = get_model(name)
    model = build_model(spec, meta=True)
    assert all(p.is_meta for p in model.parameters())
    assert sum(p.numel() for p in model.parameters()) == param_count(spec)


def test_tied_embedding_is_one_parameter_and_survives_materialisation():
    spec = tiny("gpt2-small")
    model = build_model(spec, meta=True)
    model.to_empty(device="cpu")
    model.init_weights()
    assert model.head_module.lm_head.weight is model.embedding.wte.weight
    assert sum(p.numel() for p in model.parameters()) == param_count(spec)
    assert torch.isfinite(model(torch.zeros(1, 4, dtype=torch.long))).all()
    untied = tiny("llama-2-7b")
    m2 = build_model(untied)
    assert m2.head_module.lm_head.weight is not m2.embedding.wte.weight


@pytest.mark.parametrize("key", list(TINY))
def test_forward_flops_equal_counting(key):
    spec = TINY[key]()
    torch.manual_seed(0)
    model = build_model(spec)
    idx = torch.randint(0, spec.vocab_size, (B, T))
    want = sum(o.matmul_flops for o in model_ops(spec, B, T, "fp32"))
    assert count_flops(lambda: model(idx)) == want  # the real (CPU flash) SDPA kernel


@pytest.mark.parametrize("key", list(TINY))
def test_forward_backward_flops_equal_three_times_forward(key):
    spec = TINY[key]()
    model = build_model(spec)
    idx = torch.randint(0, spec.vocab_size, (B, T))
    fwd = sum(o.matmul_flops for o in model_ops(spec, B, T, "fp32"))
    with sdpa_kernel(SDPBackend.MATH):  # backward as plain matmuls: exactly 2 x forward
        assert count_flops(lambda: model(idx).float().sum().backward()) == 3 * fwd
    # the flash kernel's backward recomputes Q K^T once per layer (hardware FLOPs, not model FLOPs)
    qk = next(o.matmul_flops for o in layer_ops(spec, B, T, "fp32") if o.name == "attn_scores")
    assert count_flops(lambda: model(idx).float().sum().backward()) == 3 * fwd + spec.n_layers * qk


def test_block_flops_and_shape():
    spec = resize(get_model("gpt2-xl"), d_model=64, n_heads=4)
    block = build_block(spec)
    x = torch.randn(B, T, 64, requires_grad=True)
    want = sum(o.matmul_flops for o in layer_ops(spec, B, T, "fp32"))
    assert count_flops(lambda: block(x)) == want
    assert block(x).shape == (B, T, 64)


def test_heads_and_loss_shapes():
    spec = TINY["bert-cls"]()
    model = build_model(spec)
    idx = torch.randint(0, spec.vocab_size, (B, T))
    logits, loss = model(idx, torch.tensor([0, 1]))
    assert logits.shape == (B, spec.n_classes) and loss.ndim == 0
    gpt = build_model(TINY["gpt"]())
    logits, loss = gpt(idx, torch.randint(0, 97, (B, T)))
    assert logits.shape == (B, T, 97)
    assert abs(loss.item() - torch.log(torch.tensor(97.0)).item()) < 0.5  # near-uniform at init


@pytest.mark.parametrize("key", ["gpt", "llama-gqa", "neox"])
def test_kv_cache_decode_matches_full_forward(key):
    spec = TINY[key]()
    torch.manual_seed(0)
    model = build_model(spec).eval()
    idx = torch.randint(0, spec.vocab_size, (B, 10))
    with torch.no_grad():
        full = model(idx)
        caches = model.new_caches(B, 16)
        out = [model(idx[:, :6], caches=caches)]
        out.append(model(idx[:, 6:8], caches=caches, start=6))  # two at once: needs the mask
        for t in (8, 9):
            out.append(model(idx[:, t:t + 1], caches=caches, start=t))
    torch.testing.assert_close(torch.cat(out, dim=1), full, atol=1e-4, rtol=1e-4)


def test_causality_and_bidirectionality():
    torch.manual_seed(0)
    idx = torch.randint(0, 97, (1, 8))
    changed = idx.clone()
    changed[0, -1] = (idx[0, -1] + 1) % 97
    gpt = build_model(TINY["gpt"]()).eval()
    with torch.no_grad():
        torch.testing.assert_close(gpt(idx)[:, :-1], gpt(changed)[:, :-1])
    bert = build_model(TINY["bert-mlm"]()).eval()
    with torch.no_grad():
        assert not torch.allclose(bert(idx)[:, 0], bert(changed)[:, 0])


def test_dtype_argument():
    model = build_model(TINY["gpt"](), dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


# ---------------------------------------------------------------- MoE, MLA and modern layers

MODERN = {
    "gpt-moe": lambda: tiny("gpt-moe-tiny"),
    "mixtral": lambda: tiny("mixtral-8x7b"),
    "qwen3-moe": lambda: tiny("qwen3-30b-a3b", n_experts=16),  # q/k norms, head_dim 2 x d/h
    "deepseek": lambda: tiny("deepseek-v3", first_dense_layers=1, n_experts=16),  # MLA + shared
    "qwen2": lambda: tiny("qwen2-7b"),  # biases on q/k/v only
    "gemma2": lambda: tiny("gemma2-9b").with_(sliding_window=6),  # post-norms, soft-caps, window
    "gemma3": lambda: tiny("gemma3-1b").with_(sliding_window=6, global_attn_every=2),
    "falcon": lambda: tiny("falcon-7b", n_kv_heads=1),  # one norm, parallel, multi-query
}


@pytest.mark.parametrize("name", ["gpt-moe-tiny", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3",
                                  "qwen2-7b", "gemma2-9b", "gemma3-1b", "phi3-mini", "falcon-7b"])
def test_modern_param_count_on_meta_equals_counting(name):
    spec = get_model(name)
    assert count_params(build_model(spec, meta=True)) == param_count(spec)


@pytest.mark.parametrize("key", list(MODERN))
def test_modern_forward_and_backward_flops_equal_counting(key):
    spec = MODERN[key]()
    torch.manual_seed(0)
    model = build_model(spec)
    assert count_params(model) == param_count(spec)
    idx = torch.randint(0, spec.vocab_size, (B, T))
    fwd = sum(o.matmul_flops for o in model_ops(spec, B, T, "fp32"))
    assert count_flops(lambda: model(idx)) == fwd
    with sdpa_kernel(SDPBackend.MATH):  # backward as plain matmuls: exactly 2 x forward
        assert count_flops(lambda: model(idx).float().sum().backward()) == 3 * fwd


def test_moe_layer_equals_a_token_by_token_reference():
    from llmbench.measure.moe import MoE

    torch.manual_seed(0)
    for name in ("mixtral-8x7b", "deepseek-v3"):
        spec = tiny(name, first_dense_layers=0) if name == "deepseek-v3" else tiny(name)
        moe = build_block(spec).mlp
        assert isinstance(moe, MoE)
        x = torch.randn(2, 5, spec.d_model)
        flat = x.reshape(-1, spec.d_model)
        weights, idx = moe.router(flat)
        ex = moe.experts
        want = []
        for t in range(flat.shape[0]):  # every token through its k experts, weighted, summed
            acc = torch.zeros(spec.d_model)
            for w, e in zip(weights[t], idx[t]):
                gate, up = (ex.w_up[e] @ flat[t]).chunk(2)
                acc += w * (ex.w_down[e] @ (torch.nn.functional.silu(gate) * up))
            want.append(acc + (moe.shared(flat[t:t + 1])[0] if moe.shared is not None else 0))
        torch.testing.assert_close(moe(x), torch.stack(want).view_as(x), atol=1e-5, rtol=1e-5)
        if spec.router_norm_topk:
            torch.testing.assert_close(weights.sum(-1), torch.ones(flat.shape[0]))


def test_router_choice_bias_moves_the_choice_not_the_weights():
    spec = tiny("deepseek-v3", first_dense_layers=0, n_experts=16)
    router = build_block(spec).mlp.router
    x = torch.randn(6, spec.d_model)
    _, before = router(x)
    with torch.no_grad():
        router.choice_bias[before[:, 0]] -= 10.0  # push every token's first choice out
    weights, after = router(x)
    assert not (after == before[:, :1]).any(dim=-1).all()
    probs = router.gate(x).float().sigmoid().gather(-1, after)
    torch.testing.assert_close(weights, probs / probs.sum(-1, keepdim=True))


def test_tiny_moe_trains_on_cpu():
    spec = resize(get_model("gpt-moe-tiny"), n_layers=2, d_model=64, n_heads=4, vocab_size=97,
                  max_seq_len=32)
    torch.manual_seed(0)
    model = build_model(spec)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    idx = torch.randint(0, spec.vocab_size, (4, 17))
    losses = []
    for _ in range(12):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses  # memorising one batch: log(97) = 4.57 falls
    assert all(p.grad is not None for n, p in model.named_parameters() if "choice_bias" not in n)


@pytest.mark.parametrize("key", ["mixtral", "gemma3"])
def test_kv_cache_decode_matches_full_forward_moe_and_window(key):
    spec = MODERN[key]()
    torch.manual_seed(0)
    model = build_model(spec).eval()
    idx = torch.randint(0, spec.vocab_size, (B, 12))
    with torch.no_grad():
        full = model(idx)
        caches = model.new_caches(B, 16)
        out = [model(idx[:, :7], caches=caches)]
        out += [model(idx[:, t:t + 1], caches=caches, start=t) for t in range(7, 12)]
    torch.testing.assert_close(torch.cat(out, dim=1), full, atol=1e-4, rtol=1e-4)


def test_sliding_window_limits_what_a_token_sees():
    spec = tiny("mistral-7b").with_(sliding_window=4)
    torch.manual_seed(0)
    model = build_model(spec.with_(n_layers=1)).eval()
    idx = torch.randint(0, 97, (1, 10))
    changed = idx.clone()
    changed[0, 0] = (idx[0, 0] + 1) % 97
    with torch.no_grad():
        a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, 4:], b[:, 4:])  # token 4 on sees tokens 1.. only (one layer)
    assert not torch.allclose(a[:, 3], b[:, 3])
