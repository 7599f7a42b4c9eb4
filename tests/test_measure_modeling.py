"""Torch models from ModelSpec: exact parameter counts, exact FLOPs against counting, behaviour."""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from llmbench.measure.flops import count_flops
from llmbench.measure.modeling import build_block, build_model
from llmbench.models.spec import resize
from llmbench.models import get_model, param_count
from llmbench.models.counting import layer_ops, model_ops

B, T = 2, 16


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
