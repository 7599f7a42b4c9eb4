"""Model catalog and counting: published parameter counts, FLOPs against FlopCounterMode and the
closed forms of PaLM (arXiv:2204.02311 App. B) and Megatron (arXiv:2104.04473 Eq. 3), memory."""
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmbench.errors import BadInput
from llmbench.models import ModelSpec, get_model, presets
from llmbench.models.counting import (
    activation_bytes_per_layer, closed_form_flops_per_token, decode_flops, flops_per_token,
    head_ops, kv_cache_bytes_per_token, layer_ops, matmul_weight_params, param_count,
    training_flops, training_memory_bytes,
)
from llmbench.models.hf import from_hf_config

HF = Path(__file__).parent / "data" / "hf_configs"
REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- published parameter counts

@pytest.mark.parametrize("name, expected", [
    ("gpt2-xl", 1_557_611_200),       # HF GPT2LMHeadModel (tied head), issue 2
    ("gpt2-small", 124_439_808),      # HF openai-community/gpt2
    ("llama-2-7b", 6_738_415_616),    # HF LlamaForCausalLM, issue 2
    ("llama-3.1-8b", 8_030_261_248),  # HF meta-llama/Llama-3.1-8B
    ("gpt-j-6b", 6_050_882_784),      # HF GPTJForCausalLM (EleutherAI/gpt-j-6b)
    ("genslm-25m", 25_290_752),       # genslm neox_25,290,752.json
    ("genslm-2.5b", 2_533_931_008),   # genslm neox_2,533,931,008.json
])
def test_published_param_counts(name, expected):
    assert param_count(get_model(name)) == expected


def test_bert_base_with_pooler():
    # BertModel with its pooler: 109,482,240 (issue 2); the 2-class classifier adds 768*2+2
    spec = get_model("bert-base")
    assert param_count(spec, classifier=False) == 109_482_240
    assert param_count(spec) == 109_482_240 + 768 * 2 + 2


def test_megatron_table1_param_counts():
    # arXiv:2104.04473 Table 1 lists parameters in billions, to one decimal
    published = {"megatron-1.7b": 1.7, "megatron-3.6b": 3.6, "megatron-7.5b": 7.5,
                 "megatron-18.4b": 18.4, "megatron-39.1b": 39.1, "megatron-76.1b": 76.1,
                 "megatron-145.6b": 145.6, "megatron-310.1b": 310.1, "megatron-529.6b": 529.6,
                 "megatron-1008b": 1008.0}
    for name, billions in published.items():
        assert abs(param_count(get_model(name)) / 1e9 - billions) <= 0.051 * max(1, billions / 100), name


def test_gpt3_sizes_match_their_names():
    # GPT-3 Table 2.1 names: within 8% (names are rounded; 20B/30B are Cerebras shapes)
    for name, billions in [("gpt3-125m", 0.125), ("gpt3-350m", 0.35), ("gpt3-760m", 0.76),
                           ("gpt3-1.3b", 1.3), ("gpt3-2.7b", 2.7), ("gpt3-6.7b", 6.7),
                           ("gpt3-13b", 13), ("gpt3-20b", 20), ("gpt3-30b", 30), ("gpt3-175b", 175)]:
        got = param_count(get_model(name)) / 1e9
        assert abs(got / billions - 1) < 0.08, (name, got)


# ---------------------------------------------------------------- presets and validation

def test_every_preset_parses_and_cites_a_source():
    table = presets()
    assert len(table) >= 38
    for name, spec in table.items():
        assert spec.name == name
        assert spec.source, name
        assert param_count(spec) > 0


def test_megatron_presets_follow_the_reference_csv():
    with open(REPO / "llmbench" / "models" / "presets" / "megatron.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 10
    for row in rows:
        spec = get_model(row["name"])
        assert (spec.n_layers, spec.d_model, spec.n_heads) == (
            int(row["n_layers"]), int(row["d_model"]), int(row["n_heads"]))


def test_fuzzy_lookup_and_suggestions():
    assert get_model("GPT2-XL").name == "gpt2-xl"
    assert get_model("405b").name == "llama-3.1-405b"
    with pytest.raises(ValueError, match="did you mean"):
        get_model("gpt2-xxl")


BASE = dict(name="t", family="gpt", n_layers=2, d_model=64, n_heads=4, vocab_size=100, max_seq_len=32)


@pytest.mark.parametrize("change, field", [
    (dict(d_model=65), "d_model"),
    (dict(n_kv_heads=3), "n_kv_heads"),
    (dict(family="rnn"), "family"),
    (dict(activation="relu"), "activation"),
    (dict(norm="batchnorm"), "norm"),
    (dict(position="alibi"), "position"),
    (dict(n_layers=0), "n_layers"),
    (dict(vocab_size=-1), "vocab_size"),
    (dict(rotary_pct=0.0), "rotary_pct"),
    (dict(head="seq2seq"), "head"),
    (dict(causal=False), "head"),
])
def test_validation_names_the_field(change, field):
    with pytest.raises(ValueError, match=field):
        ModelSpec(**{**BASE, **change})


def test_derived_fields():
    spec = ModelSpec(**{**BASE, "n_kv_heads": 2})
    assert spec.d_ff == 256 and spec.d_head == 16 and spec.kv_dim == 32
    assert spec.with_(n_layers=5).n_layers == 5


# ---------------------------------------------------------------- FLOPs

def _torch_layer(spec):
    """A minimal reference layer in torch (pre-LN, SDPA), independent of llmbench.measure."""
    torch = pytest.importorskip("torch")
    nn, F = torch.nn, torch.nn.functional

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            d, f = spec.d_model, spec.d_ff
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv = nn.Linear(d, d + 2 * spec.kv_dim, bias=spec.attn_biases)
            self.out = nn.Linear(d, d, bias=spec.attn_biases)
            up = 2 * f if spec.activation == "swiglu" else f
            self.up = nn.Linear(d, up, bias=spec.biases)
            self.down = nn.Linear(f, d, bias=spec.biases)

        def forward(self, x):  # (B, T, C)
            B, T, C = x.shape
            h, kv, hd = spec.n_heads, spec.n_kv_heads, spec.d_head
            q, k, v = self.qkv(self.n1(x)).split([C, kv * hd, kv * hd], dim=-1)
            q = q.view(B, T, h, hd).transpose(1, 2)  # (B, h, T, hd)
            k = k.view(B, T, kv, hd).transpose(1, 2).repeat_interleave(h // kv, dim=1)
            v = v.view(B, T, kv, hd).transpose(1, 2).repeat_interleave(h // kv, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=spec.causal)
            x = x + self.out(y.transpose(1, 2).reshape(B, T, C))
            u = self.up(self.n2(x))
            if spec.activation == "swiglu":
                g, u = u.chunk(2, dim=-1)
                u = F.silu(g) * u
            else:
                u = F.gelu(u, approximate="tanh")
            return x + self.down(u)

    return Layer()


@pytest.mark.parametrize("spec", [
    ModelSpec(**BASE),
    ModelSpec(**{**BASE, "family": "llama", "activation": "swiglu", "norm": "rmsnorm",
                 "position": "rotary", "n_kv_heads": 2, "d_ff": 96, "biases": False,
                 "tied_embeddings": False}),
])
def test_matmul_flops_match_flop_counter(spec):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, T = 2, 16
    layer = _torch_layer(spec)
    x = torch.randn(B, T, spec.d_model, requires_grad=True)
    ours = sum(o.matmul_flops for o in layer_ops(spec, B, T))
    # FlopCounterMode has no formula for the CPU flash kernel (it counts 0 there); the math
    # backend runs the same attention as two bmm's, which it counts over the full T x T square.
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as fc:
            layer(x)
        assert fc.get_total_flops() == ours
        with FlopCounterMode(display=False) as fc:
            layer(x).sum().backward()
    assert fc.get_total_flops() == 3 * ours  # backward = 2 x forward for every matmul


def test_lm_head_flops_match_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    spec = ModelSpec(**BASE)
    B, T = 3, 8
    head = torch.nn.Linear(spec.d_model, spec.vocab_size, bias=False)
    with FlopCounterMode(display=False) as fc:
        head(torch.randn(B, T, spec.d_model))
    ours = sum(o.matmul_flops for o in head_ops(spec, B, T) if o.kind == "matmul")
    assert fc.get_total_flops() == ours


@pytest.mark.parametrize("name", ["gpt2-xl", "gpt3-175b", "megatron-1.7b", "bert-large", "gpt-j-6b"])
def test_training_flops_vs_palm_closed_form(name):
    # PaLM App. B: 6N + 12 L d T per token. Our matmul FLOPs equal it exactly (N = matmul weights,
    # full-square attention); the total adds what it leaves out (norms, softmax, activations, biases,
    # loss), a few percent at most.
    spec = get_model(name)
    T = spec.max_seq_len
    closed = closed_form_flops_per_token(spec, T)
    tf = training_flops(spec, 1, T)
    assert tf["model"] == pytest.approx(3 * tf["forward"])
    ops = [o for o in layer_ops(spec, 1, T)]
    matmul = 3 * (spec.n_layers * sum(o.matmul_flops for o in ops)
                  + sum(o.matmul_flops for o in head_ops(spec, 1, T) if o.name in ("lm_head", "mlm_decoder")))
    if spec.head == "lm":
        assert matmul / T == pytest.approx(closed, rel=1e-12)
    total = flops_per_token(spec, T)
    assert 1.0 <= total / closed < 1.05


def test_megatron_eq3_with_full_recompute():
    # arXiv:2104.04473 Eq. (3): 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per step, full recompute
    for name in ("megatron-1.7b", "megatron-145.6b", "megatron-1008b"):
        spec = get_model(name)
        B, s, l, h, V = 8, spec.max_seq_len, spec.n_layers, spec.d_model, spec.vocab_size
        eq3 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
        ours = training_flops(spec, B, s, recompute="full")["hardware"]
        assert ours / eq3 == pytest.approx(1.0, abs=0.01), name
        assert ours > eq3  # Eq. 3 leaves out element-wise work, never adds any


def test_recompute_ordering():
    spec = get_model("gpt2-xl")
    flops = {r: training_flops(spec, 4, 1024, recompute=r) for r in ("none", "selective", "full")}
    assert flops["none"]["recompute"] == 0
    assert 0 < flops["selective"]["recompute"] < flops["full"]["recompute"]
    assert flops["full"]["model"] == flops["none"]["model"]
    with pytest.raises(ValueError, match="recompute"):
        training_flops(spec, 1, 8, recompute="some")


def test_decode_flops_are_about_2n_per_token():
    spec = get_model("llama-2-7b")
    f = decode_flops(spec, context=1)
    assert f / (2 * matmul_weight_params(spec)) == pytest.approx(1.0, rel=0.01)
    assert decode_flops(spec, 4096) > f


def test_causal_discount_halves_attention():
    spec = get_model("gpt2-small")
    full = training_flops(spec, 1, 1024)
    causal = training_flops(spec, 1, 1024, causal_discount=True)
    attn = 3 * spec.n_layers * sum(o.flops for o in layer_ops(spec, 1, 1024)
                                   if o.name in ("attn_scores", "attn_values", "softmax"))
    assert full["model"] - causal["model"] == pytest.approx(attn * (1 - 0.5 * 1025 / 1024), rel=1e-9)


# ---------------------------------------------------------------- bytes and memory

def test_kv_cache_bytes_per_token():
    assert kv_cache_bytes_per_token(get_model("llama-2-7b"), "bf16") == 2 * 32 * 4096 * 2  # 512 KiB
    assert kv_cache_bytes_per_token(get_model("llama-3.1-70b"), "bf16") == 2 * 80 * 8 * 128 * 2  # GQA
    assert kv_cache_bytes_per_token(get_model("llama-2-7b"), "fp8") == 2 * 32 * 4096


def test_activation_memory_matches_korthikanti_without_dropout():
    # arXiv:2205.05198 Sec. 4.1: 34 sbh + 5 a s^2 b bytes per layer at 16 bits; without dropout
    # (two sbh masks and the a s^2 b mask + dropout output dropped): 32 sbh + 2 a s^2 b
    spec = get_model("gpt3-1.3b")
    s, b, h, a = 2048, 4, spec.d_model, spec.n_heads
    unfused = activation_bytes_per_layer(spec, b, s, "bf16", fused_attention=False)
    assert unfused == 32 * s * b * h + 2 * a * s * s * b
    assert activation_bytes_per_layer(spec, b, s, "bf16", recompute="selective") == 32 * s * b * h
    assert activation_bytes_per_layer(spec, b, s, "bf16", recompute="full") == 2 * s * b * h
    fused = activation_bytes_per_layer(spec, b, s, "bf16")
    assert 32 * s * b * h < fused < unfused


def test_training_memory_is_16_bytes_per_param():
    spec = get_model("gpt2-xl")
    mem = training_memory_bytes(spec, "bf16")
    assert mem["total"] == 16 * param_count(spec)  # ZeRO arXiv:1910.02054: 2 + 2 + 12 bytes
    assert training_memory_bytes(spec, "fp32")["total"] == 16 * param_count(spec)


def test_matmul_bytes_count_weights_and_activations():
    spec = ModelSpec(**BASE)
    qkv = next(o for o in layer_ops(spec, 2, 16, "fp32") if o.name == "qkv")
    n, d = 32, 64
    assert qkv.bytes_read == 4 * (n * d + d * 3 * d + 3 * d)
    assert qkv.bytes_written == 4 * n * 3 * d
    assert qkv.weight_params == d * 3 * d + 3 * d
    fused = {o.name: o for o in layer_ops(spec, 2, 16, "fp32")}
    unfused = {o.name: o for o in layer_ops(spec, 2, 16, "fp32", fused_attention=False)}
    assert fused["softmax"].bytes == 0 < unfused["softmax"].bytes


# ---------------------------------------------------------------- Hugging Face config.json

@pytest.mark.parametrize("folder, expected", [
    ("gpt2-xl", 1_557_611_200),
    ("llama-2-7b", 6_738_415_616),
    ("gpt-j-6b", 6_050_882_784),
    ("genslm-neox-25m", 25_290_752),
])
def test_hf_import_counts(folder, expected):
    spec = get_model(str(HF / folder / "config.json"))
    assert param_count(spec) == expected


def test_hf_import_bert_and_matches_preset():
    spec = from_hf_config(HF / "bert-base-uncased")
    assert param_count(spec, classifier=False) == 109_482_240
    preset = get_model("llama-2-7b")
    imported = from_hf_config(HF / "llama-2-7b" / "config.json")
    for f in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "activation",
              "norm", "position", "tied_embeddings", "biases"):
        assert getattr(imported, f) == getattr(preset, f), f


def test_hf_import_errors(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        from_hf_config(bad)
    bad.write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(ValueError, match="unsupported model_type"):
        from_hf_config(bad)
    bad.write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    with pytest.raises(ValueError, match="lacks"):
        from_hf_config(bad)
    with pytest.raises(BadInput, match="no such config.json"):  # bad input, one line (was FileNotFoundError)
        from_hf_config(tmp_path / "nope.json")


# ---------------------------------------------------------------- CLI

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "llmbench", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=60)


def test_cli_models_show_json():
    r = _cli("models", "show", "gpt2-xl", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    for key in ("name", "params", "n_layers", "d_model", "n_heads", "vocab_size",
                "flops_per_token_train", "flops_per_token_infer", "kv_cache_bytes_per_token_bf16"):
        assert key in info
    assert info["params"] == 1_557_611_200
    assert info["kv_cache_bytes_per_token_bf16"] == 2 * 48 * 1600 * 2


def test_cli_models_list_json_has_every_preset():
    r = _cli("models", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert {row["name"] for row in json.loads(r.stdout)} == set(presets())


@pytest.mark.parametrize("args, needle", [
    (("models", "show", "gpt2-xxl"), "did you mean"),
    (("models", "show", "tests/data/hf_configs/README.md.json"), "no such config.json"),
    (("models", "frobnicate"), "invalid choice"),
])
def test_cli_bad_input_is_one_line_exit_2(args, needle):
    r = _cli(*args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_cli_invalid_shape_and_malformed_config(tmp_path):
    cfg = json.loads((HF / "gpt2-xl" / "config.json").read_text())
    cfg["n_head"] = 7  # 1600 % 7 != 0
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = _cli("models", "show", str(tmp_path / "config.json"))
    assert r.returncode == 2 and "divisible" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "config.json").write_text("[1, 2")
    r = _cli("models", "show", str(tmp_path / "config.json"))
    assert r.returncode == 2 and "not valid JSON" in r.stderr


def test_models_and_cli_import_no_torch():
    code = ("import sys, llmbench.models, llmbench.hardware, llmbench.cli; "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
