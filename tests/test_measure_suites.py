"""The suites through run_workload on tiny models: resolved workloads, METRICS names, info, units,
OOM as a result, sparsity, data, ceilings; and the run_suite shim the study runner calls."""
import math
from dataclasses import replace

import pytest
import torch

from llmbench.errors import BadInput
from llmbench.measure import ceilings as ceil
from llmbench.measure.options import RunOptions
from llmbench.measure.suites import run_suite, run_workload
from llmbench.models import get_model
from llmbench.models.counting import layer_ops, training_flops
from llmbench.models.spec import resize
from llmbench.point import Workload, check_metrics

TINY = {"n_layers": 2, "d_model": 64, "n_heads": 4}
CPU = RunOptions(device="cpu", repeats=2, warmup=1, steps=2, warmup_steps=1)


def measure(suite, model, run=CPU, **kw):
    """(resolved Workload, result) of a tiny model on the CPU."""
    return run_workload(Workload(suite=suite, model=model, resize={**TINY, **kw.pop("resize", {})}, **kw), run)


@pytest.fixture
def home(tmp_path, monkeypatch):
    from llmbench.hardware.lookup import clear_cache
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path))
    clear_cache()
    yield tmp_path
    clear_cache()


SMALL = {"resize": {"vocab_size": 128}, "seq_len": 16, "batch": 2}
RUNS = {  # one tiny run per suite, shared by the tests below (each runs once per session)
    "block": lambda: measure("block", "gpt2-xl", batch=2, seq_len=32),
    "train": lambda: measure("train", "gpt2-small", resize={"vocab_size": 128}, batch=4, micro_batch=2,
                             seq_len=32, run=replace(CPU, steps=3)),
    "infer encoder": lambda: measure("infer", "bert-base", gen_len=4, run=replace(CPU, repeats=5), **SMALL),
    "infer decoder": lambda: measure("infer", "gpt2-small", gen_len=4, run=replace(CPU, repeats=4), **SMALL),
    "genslm": lambda: measure("genslm", "genslm-25m", run=replace(CPU, steps=1, warmup_steps=0), seq_len=16),
    "ceilings": lambda: run_workload(Workload(suite="ceilings", model="-"),
                                     replace(CPU, gemm_size=64, save_profile=False)),
}
_DONE = {}


def tiny(name):
    """(resolved Workload, result) of RUNS[name], measured once."""
    if name not in _DONE:
        _DONE[name] = RUNS[name]()
    return _DONE[name]


@pytest.mark.parametrize("name", list(RUNS))
def test_every_suite_reports_only_metrics_names(name):
    w, r = tiny(name)
    assert r["status"] == "ok", r["error"]
    assert check_metrics(r["metrics"], name) == []
    assert w.hardware == "cpu" and w.devices == 1
    if name == "genslm":
        assert r["info"]["tokenizer_vocab"] == 69 and r["info"]["genome_sequences"] == 64


def test_block_resolved_workload_flops_and_ceiling():
    w, r = tiny("block")
    assert (w.precision, w.layout.tp, w.layout.recompute) == ("fp32", 1, "none")  # the CPU's; plain layout
    m, info = r["metrics"], r["info"]
    flops = sum(o.flops for o in layer_ops(resize(get_model("gpt2-xl"), **TINY), 2, 32, "fp32"))
    assert info["flops_fwd"] == flops and info["flops_fwd_bwd"] == 3 * flops
    assert m["fwd_tflops"] == pytest.approx(flops / m["fwd_time_s"] / 1e12)
    assert m["frac_of_ceiling"] == pytest.approx(m["fwd_bwd_tflops"] / m["ceiling_tflops"])
    assert m["mfu"] is None and info["datasheet"] is None  # a CPU has no datasheet peak
    assert r["environment"]["device_type"] == "cpu"


def test_train_global_batch_micro_steps_flops_and_loss():
    w, r = tiny("train")
    assert (w.batch, w.micro_batch, w.grad_accum, w.devices) == (4, 2, 2, 1)
    m, info = r["metrics"], r["info"]
    assert m["step_time_s_p10"] <= m["step_time_s"] <= m["step_time_s_p90"]
    assert m["tokens_per_s"] == pytest.approx(4 * 32 / m["step_time_s"]) and info["tokens_per_step"] == 4 * 32
    spec = w.spec()
    assert info["flops_per_step"] == training_flops(spec, 2, 32)["model"] * 2 and info["steps"] == 3
    assert m["achieved_tflops"] == pytest.approx(info["flops_per_step"] / m["step_time_s"] / 1e12)
    assert math.isfinite(m["loss_first"]) and abs(m["loss_first"] - math.log(128)) < 1.0


def test_train_on_corpus_learns():
    _, r = measure("train", "gpt2-small", resize={"vocab_size": 4096}, batch=4, seq_len=32,
                   run=replace(CPU, steps=12, warmup_steps=0, data="corpus", lr=1e-2))
    m = r["metrics"]
    assert m["loss_last"] < m["loss_first"] - 1.0  # real text: a tiny GPT learns quickly


def test_unstructured_and_two_four_sparsity_in_info():
    _, r = measure("train", "gpt2-small", resize={"vocab_size": 128}, batch=2, seq_len=16, sparsity=0.75)
    sp = r["info"]["sparsity"]
    assert sp["sparsity"] == 0.75 and sp["zero_fraction_measured"] == pytest.approx(0.75, abs=0.01)
    w, r = measure("train", "gpt2-small", resize={"vocab_size": 128}, batch=2, seq_len=16,
                   run=replace(CPU, steps=1, warmup_steps=0, sparsity_pattern="2:4"))
    sp = r["info"]["sparsity"]
    assert w.sparsity == 0.5  # keyed apart from the dense workload
    assert sp["zero_fraction_measured"] == pytest.approx(0.5)
    assert sp["semi_structured"]["measured"] is False and "CUDA" in sp["semi_structured"]["reason"]


def test_two_four_mask_pattern():
    from llmbench.measure.sparsity import two_four_mask
    w = torch.randn(8, 16)
    mask = two_four_mask(w)
    assert (mask.reshape(-1, 4).sum(-1) == 2).all()
    kept = (w.abs() * mask).reshape(-1, 4).min(-1).values  # the kept ones are the two largest
    dropped = (w.abs() * ~mask).reshape(-1, 4).max(-1).values
    assert ((kept >= dropped) | (kept == 0)).all()


def test_oom_and_failures_are_results(monkeypatch):
    import llmbench.measure.block as block

    def boom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

    monkeypatch.setattr(block, "build_block", boom)
    _, r = measure("block", "gpt2-xl")
    assert r["status"] == "oom" and "out of memory" in r["error"] and r["metrics"] == {} == r["info"]
    monkeypatch.setattr(block, "build_block", lambda *a, **k: 1 / 0)
    _, r = measure("block", "gpt2-xl")
    assert r["status"] == "error" and r["error"].startswith("ZeroDivisionError")


@pytest.mark.parametrize("kw, says", [
    ({"suite": "nope"}, "suite must be one of"),
    ({"model": "gpt-99", "suite": "train"}, "unknown model"),
    ({"precision": "tf32"}, "tf32"),
    ({"precision": "cbf16"}, "no torch dtype"),
    ({"devices": 2}, "one device"),
    ({"suite": "train", "devices": 4}, "processes torchrun started"),
    ({"layout": {"tp": 2}}, "data parallel only"),
    ({"hardware": "no-such-chip"}, "unknown hardware"),
    ({"suite": "train", "batch": 6, "micro_batch": 4}, "not a multiple"),
    ({"suite": "train", "sparsity": 0.9, "run": replace(CPU, sparsity_pattern="2:4")}, "half the weights"),
    ({"sparsity": 0.5}, "dense weights"),
])
def test_bad_input_raises_before_measuring(kw, says):
    with pytest.raises(ValueError, match=says):
        measure(**{"suite": "block", "model": "gpt2-xl", **kw})


def test_corpus_needs_the_tokenizer_vocab():
    with pytest.raises(ValueError, match="vocab_size"):
        measure("train", "gpt2-small", resize={"vocab_size": 100}, seq_len=16, run=replace(CPU, data="corpus"))


def test_infer_encoder_and_decoder():
    w, enc = tiny("infer encoder")
    m = enc["metrics"]
    assert w.gen_len == 0  # an encoder generates nothing
    assert m["latency_s_p50"] <= m["latency_s_p90"] <= m["latency_s_p99"]
    assert m["samples_per_s"] == pytest.approx(2 / m["latency_s_p50"])
    _, dec = tiny("infer decoder")
    m = dec["metrics"]
    for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "time_to_first_token_s", "decode_time_s_per_token"):
        assert m[k] > 0
    assert m["decode_tokens_per_s"] == pytest.approx(2 / m["decode_time_s_per_token"])
    assert m["decode_tokens_per_s_per_seq"] == pytest.approx(m["decode_tokens_per_s"] / 2)
    assert m["latency_s_p50"] > m["time_to_first_token_s"]


def test_ceilings_in_base_units_saved_and_used_by_block(home):
    w, r = run_workload(Workload(suite="ceilings", model="gpt2-small", resize={"n_layers": 1, "d_model": 64,
                                 "n_heads": 4}, seq_len=32), replace(CPU, gemm_size=256))
    assert (w.suite, w.hardware, w.precision) == ("ceilings", "cpu", None)  # None: every precision here
    m, info = r["metrics"], r["info"]
    g = m["gemm_flops_per_s"]["fp32"]
    assert g["min"] <= g["median"] <= g["max"] and info["gemm_shape"] == [256, 256, 256]
    assert m["layer_gemm_flops_per_s"]["fp32"] > 0 and m["copy_bytes_per_s"]["max"] > 0
    from llmbench.hardware.lookup import clear_cache, get_hardware
    clear_cache()
    hw = get_hardware("cpu")
    assert hw.peak("fp32") == pytest.approx(g["max"])
    assert hw.tier("dram").bandwidth_bytes_per_s == pytest.approx(m["copy_bytes_per_s"]["max"])
    assert ceil.load_ceilings(torch.device("cpu"))["gemm_flops_per_s"]["fp32"] == g
    _, b = measure("block", "gpt2-xl", seq_len=16, run=replace(CPU, ceiling="profile"))
    assert b["metrics"]["ceiling_tflops"] == pytest.approx(g["median"] / 1e12)
    assert b["info"]["ceiling_kind"].startswith("profile")


def test_layer_gemms_cover_three_times_the_forward_matmul_flops():
    spec = get_model("llama-3.1-8b")
    gemms = ceil.layer_gemms(spec, 2, 128)
    fwd = sum(o.matmul_flops for o in layer_ops(spec, 2, 128, "fp32"))
    assert sum(g.flops for g in gemms) == 3 * fwd
    assert sum(g.flops for g in ceil.layer_gemms(spec, 2, 128, backward=False)) == fwd


def test_train_with_a_classification_head():
    # BERT with its sequence-classification head: one class id per sequence (SST-2 shape)
    _, r = measure("train", "bert-base", resize={"vocab_size": 128}, batch=4, seq_len=16, head="cls")
    assert r["status"] == "ok", r["error"]
    assert abs(r["metrics"]["loss_first"] - math.log(2)) < 0.5  # 2 classes, random labels


def test_run_suite_shim_takes_a_study_config(monkeypatch):
    """studies/runner.py's config: batch per replica per micro-step, flat size keys, run keys."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    cfg = {"model": "gpt2-small", **TINY, "vocab_size": 128, "batch": 2, "grad_accum": 2, "seq": 16,
           "precision": "fp32", "steps": 1, "warmup_steps": 0, "sparsity": 0.0, "data": "synthetic",
           "device": "cpu"}
    r = run_suite("train", cfg)
    assert r["status"] == "ok", r["error"]
    w = r["workload"]
    assert (w["batch"], w["micro_batch"], w["grad_accum"], w["seq_len"]) == (4, 2, 2, 16)
    assert w["resize"] == {**TINY, "vocab_size": 128}
    assert r["environment"]["info"] == r["info"] and r["info"]["tokens_per_step"] == 4 * 16
    with pytest.raises(BadInput, match="unknown keys nope"):
        run_suite("block", {"model": "gpt2-xl", "nope": 1})
