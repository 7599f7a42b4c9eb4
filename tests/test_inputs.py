"""Inputs refused for their real reason, in one line (issue 20 item 4), and work bounded for any
input (issue 23 item 1): each case names the rule it breaks; each extreme answers quickly."""
from __future__ import annotations

import json
import time

import pytest

import llmbench as lb
from llmbench.errors import BadInput
from llmbench.layouts import CAPABILITIES, PLAIN, capability, check_layout_knobs, resolve_knobs
from llmbench.perfmodel.plan import divisors, spread
from llmbench.point import MAX_BATCH, Workload, check_positions

P = ("predict", "train", "--hardware", "h100-sxm")


def refused(cli, *argv, words=()):
    code, out, err = cli(*argv)
    line = err.strip()
    assert code == 2 and "\n" not in line and "internal error" not in line, (code, err)
    for w in words:
        assert w in line, line
    return line


# ---------------------------------------------------------------- positions

def test_learned_positions_refused_naming_the_table(cli):
    refused(cli, *P, "--model", "gpt2-xl", "--batch", "8", "--seq", "8192",
            words=("8,192 tokens", "gpt2-xl's 1,024 learned positions"))


def test_learned_positions_extended_only_when_stated():
    w = Workload(model="gpt2-xl", seq_len=8192, resize={"max_seq_len": 8192})
    assert w.spec().max_seq_len == 8192


def test_rotary_positions_need_rope_scaling(cli):
    refused(cli, *P, "--model", "llama-3.1-8b", "--batch", "8", "--seq", "262144",
            words=("131,072 rotary positions", "--rope-scaling 2"))
    w = Workload(model="llama-3.1-8b", seq_len=262144, rope_scaling=2.0)
    assert w.spec().max_seq_len == 262144
    with pytest.raises(BadInput, match="x rope scaling 1.5"):
        Workload(model="llama-3.1-8b", seq_len=262144, rope_scaling=1.5).spec()


def test_rope_scaling_on_learned_positions_and_the_id():
    with pytest.raises(BadInput, match="applies to rotary"):
        Workload(model="gpt2-small", rope_scaling=2.0).spec()
    assert "rope_scaling" not in Workload(model="gpt2-small").to_dict()  # old ids unchanged


def test_positions_rule_counts_generation_too():
    spec = Workload(model="gpt2-small").spec()
    assert check_positions(spec, 1024) == 1024
    with pytest.raises(BadInput, match="1,025 tokens exceed"):
        check_positions(spec, 1025)


def test_stream_infer_checks_positions_before_allocating(cli):
    t0 = time.perf_counter()
    refused(cli, "stream", "infer", "--model", "tiny", "--prompt-len", "100000", words=("128 learned positions",))
    assert time.perf_counter() - t0 < 30  # the torch import, on a shared machine; it hung before


# ---------------------------------------------------------------- layout rules

def test_tp_must_divide_kv_heads_too(cli):
    """Training: tp divides the KV heads (Megatron). Serving: tp divides the query heads and divides
    or is a multiple of the KV heads (vLLM replicates them), so tp 16 serves 8 KV heads and tp 12
    is refused with the rule."""
    refused(cli, *P, "--model", "llama-3.1-8b", "--batch", "16", "--seq", "1024", "--devices", "16", "--tp", "16",
            "--pp", "1", "--zero", "0", "--recompute", "none", words=("8 key/value heads",))
    refused(cli, "predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "12",
            "--tp", "12", words=("32 heads", "8 key/value heads", "replicated"))
    code, out, _ = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "16",
                       "--tp", "16", "--json")
    assert code == 0 and json.loads(out)["workload"]["layout"]["tp"] == 16


def test_infer_pp_must_split_the_layers(cli):
    refused(cli, "predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "3",
            "--pp", "3", words=("pp 3", "32 layers", "equal pipeline stages", "nearest valid pp: 2 or 4"))
    code, out, _ = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "4",
                       "--pp", "4", "--json")
    assert code == 0 and json.loads(out)["workload"]["layout"]["pp"] == 4


def test_train_pp_must_split_the_layers(cli):
    refused(cli, *P, "--model", "llama-3.1-8b", "--batch", "16", "--seq", "1024", "--devices", "3", "--pp", "3",
            words=("pp 3", "32 layers"))


def test_micro_batch_names_the_batch_rule(cli):
    line = refused(cli, *P, "--model", "llama-3.1-8b", "--devices", "8", "--batch", "512", "--seq", "2048",
                   "--micro-batch", "3", words=("--micro-batch 3", "micro_batch x grad_accum x data-parallel"))
    assert "fits no layout" not in line
    refused(cli, *P, "--model", "llama-3.1-8b", "--devices", "8", "--batch", "512", "--seq", "2048",
            "--grad-accum", "3", words=("--grad-accum 3",))


# ---------------------------------------------------------------- ceilings, declared once

@pytest.mark.parametrize("argv, words", [
    (("plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "8", "--batch", "1e15",
      "--seq", "1024"), ("1,000,000,000,000,000 exceeds the supported 2^40",)),
    (("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--devices", "1e12"),
     ("exceeds the supported 2^24",)),
    (("predict", "train", "--model", "gpt2-small", "--hardware", "h100-sxm", "--batch", "8", "--seq", "1e9"),
     ("exceeds the supported 2^24",)),
])
def test_cli_ceilings(cli, argv, words):
    refused(cli, *argv, words=words)


def test_api_ceiling_is_the_same_rule():
    t0 = time.perf_counter()
    with pytest.raises(BadInput, match="batch 1,000,000,000,000,000 exceeds the supported 2"):
        lb.plan(model="llama-3.1-8b", hardware="h100-sxm", devices=8, batch=10**15, seq=1024)
    with pytest.raises(BadInput, match="must be >= 1"):
        Workload(model="gpt2-small", batch=0)
    assert time.perf_counter() - t0 < 20  # a hang detector (it ran for years); speed: benchmarks/


def test_batch_at_the_ceiling_is_planned_quickly():
    t0 = time.perf_counter()
    r = lb.plan(model="llama-3.1-8b", hardware="h100-sxm", devices=8, batch=MAX_BATCH, seq=1024, top=1)
    assert r.layouts and time.perf_counter() - t0 < 20  # a hang detector; speed: benchmarks/
    t0 = time.perf_counter()
    lb.predict_train(model="llama-3.1-8b", hardware="h100-sxm", devices=8, batch=10**8, seq=1024)
    assert time.perf_counter() - t0 < 20  # a hang detector (it ran for years); speed: benchmarks/


def test_user_hardware_file_with_absurd_values_refused(tmp_path):
    from llmbench.hardware import get_hardware
    from llmbench.hardware.lookup import init_toml

    text = init_toml("h100-sxm", name="my-gpu")
    assert "devices_per_node = 8" in text
    path = tmp_path / "mine.toml"
    path.write_text(text.replace("devices_per_node = 8", "devices_per_node = 100000000000000000000", 1))
    with pytest.raises(BadInput, match="devices_per_node .* exceeds the supported"):
        get_hardware(str(path))


def test_model_config_with_a_billion_layers_refused(tmp_path, cli):
    cfg = {"model_type": "llama", "num_hidden_layers": 10**9, "hidden_size": 256, "num_attention_heads": 4,
           "num_key_value_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 512}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    t0 = time.perf_counter()
    refused(cli, "models", "show", str(tmp_path / "config.json"), words=("n_layers", "exceeds the supported 2^16"))
    assert time.perf_counter() - t0 < 20  # a hang detector (it ran for years); speed: benchmarks/


def test_measure_train_huge_batch_refused_before_running(cli):
    t0 = time.perf_counter()
    refused(cli, "measure", "train", "--model", "gpt2-small", "--n-layers", "1", "--device", "cpu",
            "--batch", "1e9", "--seq", "16", words=("micro-step of 1,000,000,000 x 16 tokens",))
    refused(cli, "measure", "train", "--model", "gpt2-small", "--n-layers", "1", "--device", "cpu",
            "--batch", "1e9", "--seq", "16", "--micro-batch", "4", words=("micro-steps", "at most 65,536"))
    refused(cli, "measure", "train", "--model", "gpt2-small", "--n-layers", "1", "--device", "cpu",
            "--batch", "1e9", "--seq", "16", "--layout", "auto", words=("micro-steps", "at most 65,536"))
    assert time.perf_counter() - t0 < 30


# ---------------------------------------------------------------- bounded enumeration

def test_divisors_by_factorisation():
    for n in (1, 2, 12, 97, 360, 1024, 9699690):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    t0 = time.perf_counter()
    assert len(divisors(MAX_BATCH)) == 41 and len(divisors(2**8 * 5**8)) == 81
    assert time.perf_counter() - t0 < 5  # by range it would take hours


def test_spread_keeps_small_lists_and_caps_large_ones():
    assert spread([1, 2, 4, 8], 16) == [1, 2, 4, 8]
    big = spread(divisors(10**8), 16)
    assert len(big) <= 16 and big[0] == 1 and big[-1] == 10**8 and big == sorted(big)


# ---------------------------------------------------------------- one layout capability

def test_measure_block_ep_is_a_one_line_bad_input():
    with pytest.raises(BadInput) as e:
        lb.measure_block(model="gpt2-small", ep=2, device="cpu")
    assert "ep=2" in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, ValueError)


def test_capability_record():
    assert set(PLAIN) == set(capability("perfmodel.train").knobs)  # the predictor runs every knob
    check_layout_knobs("measure.train", {"tp": 2, "zero": 3, "recompute": "full"})
    with pytest.raises(BadInput, match="measure train runs .*not pp=2"):
        check_layout_knobs("measure.train", {"pp": 2})
    with pytest.raises(BadInput, match="unknown layout knob"):
        check_layout_knobs("measure.train", {"cp": 2})
    assert resolve_knobs("measure.infer", {"tp": 1}) == {k: v for k, v in PLAIN.items() if k != "ep"}
    assert all(set(c.knobs) <= set(PLAIN) for c in CAPABILITIES.values())


def test_measure_layout_presets_within_the_record():
    from llmbench.measure.cli import LAYOUTS

    for name, knobs in LAYOUTS.items():
        for world in (1, 2, 4, 8):
            check_layout_knobs("measure.train", knobs(world))
