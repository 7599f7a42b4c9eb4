"""The suites through run_suite, on tiny models: keys, units, OOM as a result, sparsity, data."""
import math

import pytest
import torch

from llmbench.measure import ceilings as ceil
from llmbench.measure.suites import run_suite
from llmbench.models import get_model
from llmbench.models.counting import layer_ops, training_flops

TINY = {"n_layers": 2, "d_model": 64, "n_heads": 4, "device": "cpu"}


def test_block_keys_and_flops_from_counting():
    r = run_suite("block", {"model": "gpt2-xl", **TINY, "batch": 2, "seq": 32, "repeats": 2})
    assert r["status"] == "ok" and r["error"] is None
    m = r["metrics"]
    for k in ("fwd_time_s", "fwd_bwd_time_s", "fwd_tflops", "fwd_bwd_tflops", "ceiling_tflops",
              "frac_of_ceiling", "mfu"):
        assert k in m
    spec = get_model("gpt2-xl")
    from llmbench.measure.modeling import resize
    flops = sum(o.flops for o in layer_ops(resize(spec, d_model=64, n_heads=4), 2, 32, "fp32"))
    assert m["flops_fwd"] == flops and m["flops_fwd_bwd"] == 3 * flops
    assert m["fwd_tflops"] == pytest.approx(flops / m["fwd_time_s"] / 1e12)
    assert m["frac_of_ceiling"] == pytest.approx(m["fwd_bwd_tflops"] / m["ceiling_tflops"])
    assert m["mfu"] is None  # no datasheet peak for a CPU
    assert r["environment"]["device_type"] == "cpu"


def test_train_keys_flops_and_loss():
    cfg = {"model": "gpt2-small", **TINY, "vocab_size": 128, "batch": 2, "seq": 32, "steps": 3,
           "warmup_steps": 1, "grad_accum": 2}
    r = run_suite("train", cfg)
    assert r["status"] == "ok", r["error"]
    m = r["metrics"]
    for k in ("tokens_per_s", "samples_per_s", "step_time_s", "step_time_s_p10", "step_time_s_p90",
              "achieved_tflops", "mfu", "peak_mem_bytes", "warmup_s"):
        assert k in m
    assert m["step_time_s_p10"] <= m["step_time_s"] <= m["step_time_s_p90"]
    assert m["tokens_per_s"] == pytest.approx(2 * 32 * 2 / m["step_time_s"])
    from llmbench.measure.common import model_from_config
    spec = model_from_config(cfg)
    assert m["flops_per_step"] == training_flops(spec, 2, 32)["model"] * 2
    assert math.isfinite(m["loss_first"]) and abs(m["loss_first"] - math.log(128)) < 1.0


def test_train_on_corpus_learns():
    cfg = {"model": "gpt2-small", **TINY, "vocab_size": 4096, "max_seq_len": 32, "batch": 4, "seq": 32,
           "steps": 12, "warmup_steps": 0, "data": "corpus", "lr": 1e-2}
    m = run_suite("train", cfg)["metrics"]
    assert m["loss_last"] < m["loss_first"] - 1.0  # real text: a tiny GPT learns quickly


def test_corpus_needs_the_tokenizer_vocab():
    with pytest.raises(ValueError, match="vocab_size"):
        run_suite("train", {"model": "gpt2-small", **TINY, "vocab_size": 100, "batch": 1, "seq": 16,
                            "steps": 1, "data": "corpus"})


def test_unstructured_sparsity_is_kept_after_steps():
    r = run_suite("train", {"model": "gpt2-small", **TINY, "vocab_size": 128, "batch": 2, "seq": 16,
                            "steps": 2, "warmup_steps": 1, "sparsity": 0.75})
    m = r["metrics"]
    assert m["sparsity"] == 0.75 and m["zero_fraction_measured"] == pytest.approx(0.75, abs=0.01)


def test_two_four_sparsity_on_cpu_reports_why_not_measured():
    m = run_suite("train", {"model": "gpt2-small", **TINY, "vocab_size": 128, "batch": 2, "seq": 16,
                            "steps": 1, "warmup_steps": 0, "sparsity_pattern": "2:4"})["metrics"]
    assert m["zero_fraction_measured"] == pytest.approx(0.5)
    assert m["semi_structured"]["measured"] is False and "CUDA" in m["semi_structured"]["reason"]


def test_two_four_mask_pattern():
    from llmbench.measure.sparsity import two_four_mask
    w = torch.randn(8, 16)
    mask = two_four_mask(w)
    assert (mask.reshape(-1, 4).sum(-1) == 2).all()
    kept = (w.abs() * mask).reshape(-1, 4).min(-1).values  # the kept ones are the two largest
    dropped = (w.abs() * ~mask).reshape(-1, 4).max(-1).values
    assert ((kept >= dropped) | (kept == 0)).all()


def test_oom_is_a_result(monkeypatch):
    import llmbench.measure.block as block

    def boom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

    monkeypatch.setattr(block, "build_block", boom)
    r = run_suite("block", {"model": "gpt2-xl", "device": "cpu"})
    assert r["status"] == "oom" and "out of memory" in r["error"] and r["metrics"] == {}


def test_other_failures_are_error_results_and_bad_config_raises(monkeypatch):
    import llmbench.measure.block as block
    monkeypatch.setattr(block, "build_block", lambda *a, **k: 1 / 0)
    r = run_suite("block", {"model": "gpt2-xl", "device": "cpu"})
    assert r["status"] == "error" and r["error"].startswith("ZeroDivisionError")
    with pytest.raises(ValueError, match="unknown suite"):
        run_suite("nope", {})
    with pytest.raises(ValueError, match="unknown model"):
        run_suite("train", {"model": "gpt-99", "device": "cpu"})
    with pytest.raises(ValueError, match="tf32"):
        run_suite("block", {"model": "gpt2-xl", **TINY, "precision": "tf32"})


def test_infer_encoder_and_decoder():
    enc = run_suite("infer", {"model": "bert-base", **TINY, "vocab_size": 128, "batch": 2, "seq": 16,
                              "repeats": 5})["metrics"]
    assert enc["latency_s_p50"] <= enc["latency_s_p90"] <= enc["latency_s_p99"]
    assert enc["samples_per_s"] == pytest.approx(2 / enc["latency_s_p50"])
    dec = run_suite("infer", {"model": "gpt2-small", **TINY, "vocab_size": 128, "batch": 2, "seq": 16,
                              "gen_len": 4, "repeats": 4})["metrics"]
    for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "time_to_first_token_s",
              "decode_time_s_per_token"):
        assert dec[k] > 0
    assert dec["decode_tokens_per_s"] == pytest.approx(2 / dec["decode_time_s_per_token"])


def test_genslm_trains_on_codons():
    m = run_suite("genslm", {**TINY, "batch": 2, "seq": 64, "steps": 2, "warmup_steps": 0})["metrics"]
    assert m["tokenizer_vocab"] == 69 and m["genome_sequences"] == 64
    assert abs(m["loss_first"] - math.log(69)) < 1.0


def test_ceilings_suite_and_layer_ceiling(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path))
    r = run_suite("ceilings", {"device": "cpu", "size": 256, "repeats": 2, "model": "gpt2-small",
                               "n_layers": 1, "d_model": 64, "n_heads": 4, "seq": 32})
    m = r["metrics"]
    g = m["gemm"]["fp32"]
    assert g["min"] <= g["median"] <= g["max"] and g["shape"] == [256, 256, 256]
    assert m["copy"]["max"] > 0
    assert (tmp_path / "hardware" / "cpu.json").exists()
    from llmbench.hardware.spec import clear_cache, get_hardware
    clear_cache()
    assert get_hardware("cpu").peak("fp32") == pytest.approx(g["max"] * 1e12)
    assert ceil.load_ceilings(torch.device("cpu"))["gemm"]["fp32"]["max"] == g["max"]
    clear_cache()


def test_layer_gemms_cover_three_times_the_forward_matmul_flops():
    spec = get_model("llama-3.1-8b")
    gemms = ceil.layer_gemms(spec, 2, 128)
    fwd = sum(o.matmul_flops for o in layer_ops(spec, 2, 128, "fp32"))
    assert sum(g.flops for g in gemms) == 3 * fwd
    assert sum(g.flops for g in ceil.layer_gemms(spec, 2, 128, backward=False)) == fwd


def test_train_with_a_classification_head():
    # BERT with its sequence-classification head: one class id per sequence (SST-2 shape)
    cfg = {"model": "bert-base", "n_layers": 2, "d_model": 64, "n_heads": 4, "vocab_size": 128,
           "batch": 4, "seq": 16, "steps": 2, "warmup_steps": 1}
    r = run_suite("train", cfg)
    assert r["status"] == "ok", r["error"]
    assert abs(r["metrics"]["loss_first"] - math.log(2)) < 0.5  # 2 classes, random labels
