"""Analytical model: equations, modes, sparsity, inference, time-to-train, sweep (fast, CPU, no torch).

Hardware is built in the test where a property must not depend on the catalog's numbers."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from llmbench.hardware import HardwareSpec, Interconnect, MemoryTier, get_hardware
from llmbench.models import get_model
from llmbench.models.counting import kv_cache_bytes_per_token, training_flops
from llmbench.perfmodel import predict_infer, predict_train, streaming_crossover_tokens, sweep_train
from llmbench.perfmodel.params import defaults, gemm_efficiency
from llmbench.perfmodel.project import DATASETS, get_dataset, project
from llmbench.point import METRICS, Workload

TRAIN_KEYS = {"workload", "step_time_s", "tokens_per_s", "samples_per_s", "achieved_tflops", "executed_tflops",
              "mfu", "bound", "mode", "peak_mem_bytes", "fits", "breakdown_s", "weights_bytes", "grads_bytes",
              "optimizer_bytes", "activations_bytes", "tier_bytes", "energy_j_per_token", "cost_usd_per_token"}
BREAKDOWN_KEYS = {"compute", "memory", "network", "stream", "optimizer", "exposed"}
INFER_KEYS = {"workload", "time_to_first_token_s", "decode_tokens_per_s_per_seq", "tokens_per_s", "latency_s_p50",
              "bound", "kv_cache_bytes", "weights_bytes", "peak_mem_bytes", "tier_bytes", "mode", "fits",
              "max_batch_x_context", "engine", "kv_precision", "concurrency", "kv_capacity_tokens", "note",
              "link_bytes_per_token"}
LAYOUT = ("tp", "pp", "zero", "recompute", "offload", "mode")


def wl(spec, hw, *, batch, seq, devices=1, precision=None, tp=1, pp=1, zero=0, recompute="none", offload=None,
       mode=None, grad_accum=None, micro_batch=None, sparsity=0.0, suite="train") -> Workload:
    """A training Workload with an explicit layout (the planner chooses nothing): the hardware's
    mode, no offload unless streaming, the whole per-replica batch in one micro-batch."""
    if grad_accum is None and micro_batch is None:
        grad_accum = 1
    mode = mode or hw.default_mode_train
    offload = offload or ("weights" if mode == "weight_streaming" else "none")
    return Workload(model=spec.name, hardware=hw.name, suite=suite, batch=batch, seq_len=seq, devices=devices,
                    precision=precision or ("fp32" if hw.kind == "cpu" else "bf16"), grad_accum=grad_accum,
                    micro_batch=micro_batch, sparsity=sparsity,
                    layout={"tp": tp, "pp": pp, "zero": zero, "recompute": recompute, "offload": offload,
                            "mode": mode})


def train(spec, hw, params=None, **kw):
    return predict_train(spec, hw, wl(spec, hw, **kw), params)


def infer(spec, hw, *, batch, prompt_len, gen_len, devices=None, precision="bf16", mode=None):
    w = Workload(model=spec.name, hardware=hw.name, suite="infer", batch=batch, seq_len=prompt_len,
                 gen_len=gen_len, devices=devices, precision=precision, layout={"mode": mode})
    return predict_infer(spec, hw, w)


def gpu(**kw) -> HardwareSpec:
    base = dict(name="testgpu", display_name="test GPU", vendor="t", kind="gpu",
                peak_flops={"bf16": 100e12, "fp32": 10e12}, peak_flops_sparse={"bf16": 200e12},
                structured_sparsity="2:4",
                memory_tiers=(MemoryTier(name="hbm", role="hbm", capacity_bytes=40e9, bandwidth_bytes_per_s=1e12),
                              MemoryTier(name="host", role="dram", capacity_bytes=500e9, bandwidth_bytes_per_s=25e9)),
                interconnect=Interconnect(name="nv", bandwidth_bytes_per_s=100e9, latency_s=5e-6, topology="switch",
                                          devices_per_node=8, inter_node_bandwidth_bytes_per_s=10e9))
    base.update(kw)
    return HardwareSpec(**base)


def wafer(**kw) -> HardwareSpec:
    base = dict(name="testwafer", display_name="test wafer", vendor="t", kind="wafer",
                peak_flops={"bf16": 5e15}, skips_zero_weights=True,
                memory_tiers=(MemoryTier(name="sram", role="sram", capacity_bytes=40e9, bandwidth_bytes_per_s=20e15),
                              MemoryTier(name="memx", role="external", capacity_bytes=1e15, bandwidth_bytes_per_s=100e9)),
                interconnect=Interconnect(name="swarm", bandwidth_bytes_per_s=100e9, latency_s=20e-6, topology="tree"),
                default_mode_train="weight_streaming", default_mode_infer="sram_pipeline")
    base.update(kw)
    return HardwareSpec(**base)


TINY = get_model("gpt2-small")


def test_no_torch_and_no_numpy_on_the_cli_path():
    code = ("import sys, llmbench.perfmodel.cli, llmbench.perfmodel.train, llmbench.perfmodel.infer, "
            "llmbench.perfmodel.validate, llmbench.perfmodel.calibrate, llmbench.perfmodel.plan, llmbench.perfmodel.memory; "
            "assert 'torch' not in sys.modules; "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
    # one prediction (every layout knob given) runs on Python floats: numpy never imported
    # (start-up speed); a knob left out is planned, and the planner may import numpy
    code = ("import sys; from llmbench.cli import main; "
            "main(['predict', 'train', '--model', 'gpt2-small', '--hardware', 'a100-80gb', '--batch', '8', "
            "'--seq', '512', '--tp', '1', '--pp', '1', '--zero', '0', '--recompute', 'none', '--offload', 'none', "
            "'--mode', 'resident', '--micro-batch', '4', '--json']); main(['predict', 'infer', '--model', 'gpt2-small', '--hardware', "
            "'a100-80gb', '--json']); assert 'numpy' not in sys.modules, 'numpy imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_train_keys_and_flop_accounting():
    p = train(TINY, gpu(), batch=16, seq=512, recompute="full")
    d = p.to_dict()
    assert set(d) == TRAIN_KEYS and set(d["breakdown_s"]) == BREAKDOWN_KEYS
    fl = training_flops(TINY, 16, 512, "full")
    assert d["achieved_tflops"] == pytest.approx(fl["model"] / d["step_time_s"] / 1e12)
    assert d["executed_tflops"] == pytest.approx(fl["hardware"] / d["step_time_s"] / 1e12)
    assert d["executed_tflops"] > d["achieved_tflops"]
    assert d["mfu"] == pytest.approx(fl["model"] / d["step_time_s"] / 100e12)
    assert d["tokens_per_s"] == pytest.approx(16 * 512 / d["step_time_s"])
    assert d["mode"] == "resident" and d["fits"]


def test_gemm_efficiency_grows_with_size_and_saturates():
    p = defaults("gpu")
    e = [float(gemm_efficiency(n, n, n, p)) for n in (64, 512, 4096, 65536)]
    assert e == sorted(e) and e[-1] < p["compute_max"] and e[-1] > 0.95 * p["compute_max"]
    # half efficiency at g = compute_half_dim
    h = p["compute_half_dim"]
    assert float(gemm_efficiency(h, h, h, p)) == pytest.approx(p["compute_max"] / 2)


def test_roofline_compute_bound_scales_with_peak():
    a = train(TINY, gpu(), batch=32, seq=512)
    b = train(TINY, gpu(peak_flops={"bf16": 200e12, "fp32": 10e12}), batch=32, seq=512)
    assert a.bound == "compute"
    assert b.breakdown_s["compute"] == pytest.approx(a.breakdown_s["compute"] / 2, rel=1e-6)
    assert b.breakdown_s["memory"] == pytest.approx(a.breakdown_s["memory"], rel=1e-6)


def test_data_parallel_allreduce_ring_and_overlap():
    one = train(TINY, gpu(), batch=8, seq=512, devices=1)
    many = train(TINY, gpu(), batch=8 * 16, seq=512, devices=16)  # spans 2 nodes
    assert one.breakdown_s["network"] == 0.0
    from llmbench.models.counting import param_count
    # ring all-reduce 2(n-1)/n x bytes at the node's aggregate NIC bandwidth (8 x 10 GB/s) x network eff
    p = defaults("gpu")
    expect = 2 * 15 / 16 * param_count(TINY) * 2 / (80e9 * p["network"]) + 2 * 15 * 5e-6
    assert many.breakdown_s["network"] == pytest.approx(expect, rel=1e-6)
    assert many.tokens_per_s <= 16 * one.tokens_per_s
    # nothing hides the all-reduce when overlap is 0: exposed = the whole all-reduce
    bare = train(TINY, gpu(), batch=8 * 16, seq=512, devices=16, params=p | {"overlap": 0.0})
    assert bare.breakdown_s["exposed"] == pytest.approx(expect, rel=1e-6)
    assert bare.tokens_per_s < 16 * one.tokens_per_s


def test_grad_accumulation_amortises_the_allreduce():
    kw = dict(seq=512, devices=16)
    g1 = train(TINY, gpu(), batch=16, grad_accum=1, **kw)
    g4 = train(TINY, gpu(), batch=64, grad_accum=4, **kw)
    assert g1.breakdown_s["exposed"] > 0
    assert g4.samples_per_s > g1.samples_per_s


def test_pipeline_bubble():
    spec = get_model("gpt3-1.3b")
    p = train(spec, gpu(), batch=32, seq=1024, devices=4, pp=4, grad_accum=8)
    assert (p.workload.micro_batch, p.workload.grad_accum) == (4, 8)
    r = p.breakdown_s
    assert r["exposed"] > 0
    # bubble (p-1)/(m+p-1) of the pipelined time
    t_micro = (p.step_time_s - r["optimizer"]) / (8 + 3)
    assert r["exposed"] >= 3 * t_micro * 0.99


def test_zero_stages_reduce_memory_and_not_fitting_says_so():
    spec = get_model("gpt3-2.7b")
    mem = [train(spec, gpu(), batch=8, seq=1024, devices=8, zero=z).peak_mem_bytes
           for z in (0, 1, 2, 3)]
    assert mem == sorted(mem, reverse=True) and mem[3] < mem[0] / 2
    big = train(get_model("llama-2-70b"), gpu(), batch=8, seq=4096)
    assert not big.fits


def test_bad_input_is_one_valueerror():
    for kw in (dict(tp=3), dict(devices=3, tp=2), dict(mode="warp"), dict(recompute="some"),
               dict(sparsity=1.5), dict(batch=7, devices=2), dict(seq=99999)):
        args = dict(batch=8, seq=512) | kw
        with pytest.raises(ValueError):
            train(TINY, gpu(), **args)
    with pytest.raises(ValueError):
        train(TINY, wafer(), batch=8, seq=512, devices=2, tp=2)


def test_weight_streaming_exposes_stream_below_crossover():
    hw = wafer()
    p = defaults("wafer") | {"layer_overhead_s": 0.0}
    x = streaming_crossover_tokens(TINY, hw, seq=512, params=p)
    assert 512 < x < math.inf
    lo = train(TINY, hw, batch=max(1, int(x / 512 / 4)), seq=512, params=p)
    hi = train(TINY, hw, batch=int(x / 512 * 4), seq=512, params=p)
    assert lo.mode == "weight_streaming" and lo.bound == "stream"
    assert hi.bound == "compute"
    # weights in twice (fwd, bwd), gradients out once, over the external link
    from llmbench.models.counting import param_count
    assert hi.breakdown_s["stream"] == pytest.approx(3 * param_count(TINY) * 2 / (100e9 * defaults("wafer")["stream"]))


def test_weight_streaming_without_external_tier():
    # a GPU streaming from host DRAM: the link is the dram tier; a CPU: its own DRAM copy bandwidth
    r = train(TINY, gpu(), batch=8, seq=512, mode="weight_streaming")
    from llmbench.models.counting import param_count
    assert r.breakdown_s["stream"] == pytest.approx(3 * param_count(TINY) * 2 / (25e9 * defaults("gpu")["stream"]))
    cpu = get_hardware("cpu")
    c = train(TINY, cpu, batch=2, seq=128, precision="fp32", mode="weight_streaming")
    assert c.breakdown_s["stream"] > 0 and c.mode == "weight_streaming"
    assert math.isfinite(streaming_crossover_tokens(TINY, cpu, "fp32"))


def test_swarmx_scaling_is_nearly_linear():
    hw = wafer()
    one = train(get_model("gpt3-1.3b"), hw, batch=64, seq=2048)
    eight = train(get_model("gpt3-1.3b"), hw, batch=512, seq=2048, devices=8)
    eff = eight.samples_per_s / (8 * one.samples_per_s)
    assert 0.8 < eff < 1.0


def test_sparsity_only_where_the_hardware_can_use_it():
    spec = get_model("gpt3-1.3b")
    base = train(spec, wafer(), batch=64, seq=2048).step_time_s
    spp = train(spec, wafer(), batch=64, seq=2048, sparsity=0.9)
    sp = spp.step_time_s
    assert sp < base / 1.3
    # model FLOPs stay dense-equivalent; executed FLOPs drop by the skipped dense-layer work
    assert spp.executed_tflops < 0.5 * spp.achieved_tflops
    g = gpu()
    d = train(spec, g, batch=8, seq=2048, devices=8).step_time_s
    assert train(spec, g, batch=8, seq=2048, devices=8, sparsity=0.3).step_time_s == pytest.approx(d)
    assert train(spec, g, batch=8, seq=2048, devices=8, sparsity=0.5).step_time_s < d  # 2:4
    plain = gpu(structured_sparsity="", peak_flops_sparse={})
    assert train(spec, plain, batch=8, seq=2048, devices=8, sparsity=0.9).step_time_s == pytest.approx(
        train(spec, plain, batch=8, seq=2048, devices=8).step_time_s)


def test_sparsity_speedup_grows_with_model_size_on_a_wafer():
    # arXiv 2310.04607 Fig. 7: s=0.9 speed-up GPT-2 XL < 6.7B < 30B on CS-2
    hw = get_hardware("cs2")
    sp = []
    for name, seq in (("gpt2-xl", 1024), ("gpt3-6.7b", 2048), ("gpt3-30b", 2048)):
        s = get_model(name)
        sp.append(train(s, hw, batch=112, seq=seq, sparsity=0.9).samples_per_s
                  / train(s, hw, batch=112, seq=seq).samples_per_s)
    assert sp == sorted(sp) and sp[0] > 1.3


def test_a_wafer_streams_only_the_non_zero_weights_whatever_time_it_saves():
    """Cerebras' documentation ('Sparsity'): "For all zero weights, no computation or memory is
    required". The prior share of the zero-weight work saved is therefore all of it (PARAMS
    sparse = 1.0), and the weights streamed are the non-zero ones (1 - s of the dense layers) even
    where a fit says the cores save less of the time (step.sparse_factors). Held out (the Fig. 7
    rows' source left out, the prior standing) and on the layouts the planner chooses (Cerebras'
    stack sets the accumulation), GPT-2 XL's 1.8-2.0x and GPT-3 30B's 3.79x at s = 0.9 come within
    25% (-8%, +10%; GPT-3 6.7B's 2.1x does not: +44%, docs/predict.md); at the old prior of 0.5, a
    choice without a source, they were -27% and -56%."""
    from llmbench.perfmodel.params import PARAMS
    from llmbench.perfmodel.step import sparse_factors

    assert PARAMS["sparse"][0] == 1.0 and "no computation or memory is required" in PARAMS["sparse"][1]
    hw = get_hardware("cs2")
    for share in (1.0, 0.6):
        t, b = sparse_factors(hw, 0.9, {"sparse": share}, 1.0, "bf16", np)
        assert float(b) == pytest.approx(0.1) and float(t) == pytest.approx(1 - share * 0.9)
    import json

    from llmbench.perfmodel.params import PROFILE_DIR

    # the shipped leave-one-source-out errors (a fresh fit: test_validate_loso.py checks the files)
    rows = json.loads((PROFILE_DIR / "loso_residuals.json").read_text())["rows"]
    held = {r["id"]: r["loso_error"] for r in rows if r["id"].startswith("emani-sparsity-")}
    assert abs(held["emani-sparsity-gpt2xl"]) <= 0.25 and abs(held["emani-sparsity-30b"]) <= 0.25, held
    assert held["emani-sparsity-6.7b"] > 0.25, held  # the miss docs/predict.md names


def test_a_wafer_updates_and_stores_only_the_non_zero_weights():
    """The same statement for the optimizer and MemoryX (seed 002 Sec. V-B4: sparsity trains faster
    by "reducing the number of parameters updated in each optimizer step"; seed 001: sparsity lowers
    the optimization's work): at s = 0.9 a wafer's optimizer time and MemoryX bytes are those of the
    non-zero weights (the dense layers' 10% plus the embeddings); a GPU streaming from its host
    updates every weight whatever the sparsity."""
    spec, hw = get_model("gpt3-30b"), get_hardware("cs2")
    dense, sparse = (train(spec, hw, batch=112, seq=2048, recompute="full", sparsity=s) for s in (0.0, 0.9))
    from llmbench.perfmodel.shapes import shape

    sh = shape(spec, "bf16")
    nz = (sh.dense_params * 0.1 + sh.params - sh.dense_params) / sh.params
    assert sparse.breakdown_s["optimizer"] == pytest.approx(nz * dense.breakdown_s["optimizer"], rel=1e-9)
    assert sparse.tier_bytes["memoryx"] == pytest.approx(nz * dense.tier_bytes["memoryx"], rel=1e-9)
    assert 0.1 < nz < 0.15
    g, small = get_hardware("h100-sxm"), get_model("gpt3-1.3b")
    gd, gs = (train(small, g, batch=8, seq=2048, mode="weight_streaming", sparsity=s) for s in (0.0, 0.9))
    assert gs.breakdown_s["optimizer"] == pytest.approx(gd.breakdown_s["optimizer"])


def test_sweep_matches_single_predictions_and_broadcasts():
    hw = get_hardware("a100-80gb")
    spec = get_model("gpt3-1.3b")
    batch = np.array([8, 16, 64, 256])
    dev = np.array([1, 2, 8, 32])
    base = wl(spec, hw, batch=8, seq=2048, recompute="selective")
    r = sweep_train(spec, hw, base, batch=batch, devices=dev, micro_batch=batch // dev)
    for i in range(4):
        one = train(spec, hw, batch=int(batch[i]), seq=2048, devices=int(dev[i]), recompute="selective")
        assert r["step_time_s"][i] == pytest.approx(one.step_time_s, rel=1e-9)
        assert r["mfu"][i] == pytest.approx(one.mfu, rel=1e-9)
        assert r["peak_mem_bytes"][i] == pytest.approx(one.peak_mem_bytes, rel=1e-9)
    b = np.array([8, 16])[:, None]
    grid = sweep_train(spec, hw, base, batch=b, micro_batch=b, seq_len=np.array([512, 1024, 2048])[None, :])
    assert grid["step_time_s"].shape == (2, 3)
    assert (grid["step_time_s"][:, 1:] > grid["step_time_s"][:, :-1]).all()


def test_infer_decode_is_memory_bound_and_batch_helps():
    hw = gpu(memory_tiers=(MemoryTier(name="hbm", role="hbm", capacity_bytes=80e9, bandwidth_bytes_per_s=2e12),))
    spec = get_model("llama-2-7b")
    one = infer(spec, hw, batch=1, prompt_len=512, gen_len=128)
    d = one.to_dict()
    assert set(d) == INFER_KEYS and d["bound"] == "memory" and d["workload"]["devices"] == 1
    # decode at batch 1 reads every weight once per token, at the engine's bandwidth (serving.py)
    from llmbench.perfmodel.serving import default_engine

    eng = default_engine(hw)
    assert d["engine"] == eng.name
    t_weights = 2 * 6.74e9 / (2e12 * eng.bandwidth_fraction) + eng.step_overhead_s
    assert 1 / d["decode_tokens_per_s_per_seq"] == pytest.approx(t_weights, rel=0.2)
    many = infer(spec, hw, batch=32, prompt_len=512, gen_len=128)
    # decode: 32 sequences per weight read; tokens_per_s counts the prefill time too (request time)
    assert 32 * many.decode_tokens_per_s_per_seq > 10 * one.decode_tokens_per_s_per_seq
    assert many.tokens_per_s > 5 * one.tokens_per_s
    assert many.kv_cache_bytes == pytest.approx(32 * 640 * kv_cache_bytes_per_token(spec))
    assert many.time_to_first_token_s > one.time_to_first_token_s


def test_infer_fewest_devices_and_sram_pipeline():
    big = infer(get_model("llama-2-70b"), get_hardware("a100-80gb"), batch=1, prompt_len=128, gen_len=128)
    assert big.devices == 2  # 138 GB of bf16 weights: two 80 GB GPUs
    cs3 = get_hardware("cs3")
    r70 = infer(get_model("llama-3.1-70b"), cs3, batch=1, prompt_len=128, gen_len=128)
    r8 = infer(get_model("llama-3.1-8b"), cs3, batch=1, prompt_len=128, gen_len=128)
    assert (r70.mode, r70.devices, r8.devices) == ("sram_pipeline", 4, 1)
    assert r8.max_batch_x_context > 0
    cap = cs3.tier("sram").capacity_bytes
    assert r8.max_batch_x_context == pytest.approx(
        (cap - 8.03e9 * 2) / kv_cache_bytes_per_token(get_model("llama-3.1-8b")), rel=0.01)
    assert r8.decode_tokens_per_s_per_seq > r70.decode_tokens_per_s_per_seq


def test_wafers_pipeline_decoding_sequences_in_groups():
    """On pp wafers the decoding sequences go round the stages in min(pp, D) groups: a step of D
    sequences takes the time of D / groups through the whole model. Bound by each stage's weight
    reads that gains nothing; where per-sequence work sets the step it does. GPU stages, and
    prompts, still run one after another."""
    from llmbench.perfmodel.serving import build_step_model

    spec, cs3 = get_model("llama-3.1-70b"), get_hardware("cs3")
    from dataclasses import replace

    sm = build_step_model(spec, cs3, precision="bf16", pp=4, mode="sram_pipeline")
    seq = replace(sm, mode="sram_pipeline, stages in turn")  # the same wafers, no groups
    ctx = 1200.0
    assert sm.time_s(0, 1, ctx) == pytest.approx(seq.time_s(0, 1, ctx))
    for d in (1, 3, 4, 64, 256):
        g = min(4, d)
        assert sm.time_s(0, d, d * ctx) == pytest.approx(seq.time_s(0, d / g, d / g * ctx))
    assert sm.time_s(0, 256, 256 * ctx) < 0.5 * seq.time_s(0, 256, 256 * ctx)  # per-sequence work: shared out
    assert sm.time_s(512, 4, 4 * ctx) == pytest.approx(seq.time_s(512, 4, 4 * ctx))  # a prompt: one group
    gpu = build_step_model(spec, get_hardware("h100-sxm"), precision="bf16", pp=2)
    assert gpu.time_s(0, 64, 64 * ctx) > gpu.time_s(0, 32, 32 * ctx)  # GPU stages: one after another
    r = [infer(spec, cs3, batch=b, prompt_len=128, gen_len=1024) for b in (1, 64)]
    assert r[1].devices == 4 and r[1].decode_tokens_per_s_per_seq > 0.7 * r[0].decode_tokens_per_s_per_seq


def test_encoder_classification_latency():
    hw = get_hardware("a100-80gb")
    bert = get_model("bert-base")
    lat = [infer(bert, hw, batch=b, prompt_len=128, gen_len=0).latency_s_p50 for b in (1, 64, 512)]
    assert lat == sorted(lat)
    with pytest.raises(ValueError):
        infer(bert, hw, batch=1, prompt_len=128, gen_len=5)


def test_time_to_train():
    hw = get_hardware("a100-80gb")
    pred = train(TINY, hw, batch=64, seq=1024, devices=8)
    pile = project(get_dataset("pile"), pred)
    assert pile["seconds"] == pytest.approx(DATASETS["pile"].tokens / pred.tokens_per_s)
    assert pile["device_hours"] == pytest.approx(pile["hours"] * 8)
    sst = project(get_dataset("SST2"), pred, epochs=2)
    assert sst["seconds"] == pytest.approx(2 * 67_349 / pred.samples_per_s)
    assert get_dataset("1e9").tokens == 1e9 and DATASETS["owt"].samples == 8_013_769
    for bad in ("wikipedia", "-5"):
        with pytest.raises(ValueError):
            get_dataset(bad)


def test_streaming_ratio_matches_the_crossover():
    from llmbench.perfmodel import streaming_ratio

    hw = get_hardware("a100-80gb")
    spec = get_model("gpt2-medium")
    x = streaming_crossover_tokens(spec, hw, seq=1024)
    below = streaming_ratio(spec, hw, batch=max(1, int(x / 1024 / 4)), seq=1024)
    above = streaming_ratio(spec, hw, batch=int(4 * x / 1024) + 1, seq=1024)
    assert below > 1.5 and 0.9 < above < 1.1


def test_predictions_carry_the_resolved_workload_and_metrics_names():
    from llmbench.perfmodel.predict import predict
    from llmbench.point import check_metrics

    t = predict(Workload(model="gpt2-small", hardware="a100-80gb", batch=16, seq_len=512, devices=2,
                         layout={"tp": 1, "pp": 1, "zero": 1, "recompute": "selective", "offload": "none"}))
    i = predict(Workload(model="llama-2-7b", hardware="a100-80gb", suite="infer", batch=4, seq_len=256, gen_len=32))
    for pred in (t, i):
        d = pred.to_dict()
        assert check_metrics(pred.metrics(), type(pred).__name__) == []
        assert set(d) == {"workload"} | set(pred.metrics())
        w = Workload.from_dict(d["workload"])  # the JSON gives the workload back
        knobs = LAYOUT if w.suite == "train" else ("tp", "pp", "mode")  # serving has no ZeRO or recompute
        assert w.precision == "bf16" and w.devices >= 1 and all(getattr(w.layout, k) is not None for k in knobs)
    assert (t.workload.micro_batch, t.workload.grad_accum) == (8, 1) and t.workload.layout.zero == 1
    assert t.weights_bytes + t.grads_bytes + t.optimizer_bytes + t.activations_bytes == pytest.approx(t.peak_mem_bytes)


def test_the_engine_takes_a_workload_and_nothing_else():
    # the keyword converters are gone (issue 19): a Workload is the one way in, keywords are refused
    spec, hw = get_model("gpt3-1.3b"), get_hardware("a100-80gb")
    with pytest.raises(TypeError):
        predict_train(spec, hw, batch=64, seq=2048, devices=8)
    with pytest.raises(TypeError):
        predict_infer(spec, hw, batch=2, prompt_len=128, gen_len=16)
    with pytest.raises(TypeError):
        sweep_train(spec, hw, batch=np.array([8, 16]), seq=128)


def test_fp4_gemms_gain_the_square_of_fp8s_gain_over_bf16():
    """step.gemm_peak: each halving of the element width realises (1 + lowp_gemm) of the bf16 rate.
    Measured on B200 (vLLM PRs #19566, #20578; Llama-8B shape, activation quantisation included):
    fp8 1.47x bf16, NVFP4 2.0-2.2x, about 1.47^2; a gain linear in the datasheet ratio with the
    same fp8 gain would give 2.4x. Gaudi 3's fp8 peak equals its bf16 one: no gain."""
    from llmbench.perfmodel.step import gemm_peak

    b200, p = get_hardware("b200"), {"lowp_gemm": 0.47}
    bf16 = gemm_peak(b200, "bf16", p)
    assert gemm_peak(b200, "fp8", p) / bf16 == pytest.approx(1.47)
    assert gemm_peak(b200, "fp4", p) / bf16 == pytest.approx(1.47 ** 2)
    assert 2.0 <= gemm_peak(b200, "fp4", p) / bf16 <= 2.2
    g3 = get_hardware("gaudi3")
    assert gemm_peak(g3, "fp8", p) == pytest.approx(gemm_peak(g3, "bf16", p))


def test_a_single_process_block_runs_on_one_of_the_gpus_a_package_shows():
    """An MI250 is two GCDs, each its own GPU to ROCm: a one-process micro-benchmark (suite block)
    runs on one, at half the package's peaks and bandwidth, and its MFU is against the package's
    peak (arXiv:2310.04607 Sec. V-A: 'the MI250's overall efficiency is lower than the A100's').
    Training across devices keeps the whole package."""
    from dataclasses import replace

    from llmbench.perfmodel.predict import predict

    two = gpu(logical_gpus=2)
    one = two.one_logical_gpu()
    assert one.peak("bf16") == 50e12 and one.device_memory.bandwidth_bytes_per_s == 0.5e12
    assert one.device_memory.capacity_bytes == 20e9 and one.tier("host").bandwidth_bytes_per_s == 25e9
    assert gpu().one_logical_gpu() == gpu()
    w = Workload(model="gpt2-xl", suite="block", hardware="testgpu", seq_len=1024, batch=64, precision="bf16")
    split, whole = predict(w, hw=two), predict(w, hw=gpu())
    assert split.achieved_tflops == pytest.approx(predict(w, hw=replace(one, logical_gpus=1)).achieved_tflops)
    assert split.achieved_tflops < 0.6 * whole.achieved_tflops
    assert split.mfu == pytest.approx(split.achieved_tflops * 1e12 / 100e12)
    t = Workload(model="gpt2-xl", hardware="testgpu", seq_len=1024, batch=64, precision="bf16", devices=2,
                 micro_batch=8)
    assert predict(t, hw=two).tokens_per_s == pytest.approx(predict(t, hw=gpu()).tokens_per_s)
    from llmbench.perfmodel.predict import one_process

    pred = predict(w, hw=replace(one, logical_gpus=1))
    assert one_process(pred, two).mfu == pytest.approx(pred.mfu / 2)
    # the catalog's MI250 says so, from AMD's docs, and its block MFU falls below the A100's
    mi250 = get_hardware("mi250")
    assert mi250.logical_gpus == 2 and "independent GPU" in mi250.sources["logical_gpus"]
    blk = {hw: predict(w.with_(hardware=hw, precision="fp16")).mfu for hw in ("mi250", "a100-40gb")}
    assert blk["mi250"] < 0.6 * blk["a100-40gb"]
