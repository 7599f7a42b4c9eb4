"""The physics of a serving step (perfmodel/serving.py), the engine as a knob, KV memory as engines
hold it (footprint), and predict infer on the one step model. Fast, CPU, no torch."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from llmbench.errors import BadInput
from llmbench.footprint import kv_split, paged_tokens, seqs_that_fit
from llmbench.hardware import catalog, get_hardware
from llmbench.models import get_model
from llmbench.models.counting import kv_cache_bytes_per_token
from llmbench.perfmodel.infer import predict_infer
from llmbench.perfmodel.serving import (
    Engine, build_step_model, default_engine, default_engine_name, engine, engine_names, step_model,
)
from llmbench.point import Workload

DENSE_7B_PLUS = ("llama-3.1-8b", "llama-2-13b")


def infer(model, hw, **kw):
    eng = kw.pop("engine", None)
    w = Workload(model=model, hardware=hw, suite="infer", **kw)
    return predict_infer(w.spec(), get_hardware(hw), w, engine=eng)


def gpus():
    return [h for h in catalog().values() if h.kind == "gpu"]


@pytest.mark.parametrize("model", DENSE_7B_PLUS)
def test_batch1_decode_is_memory_bound_on_every_gpu_near_bandwidth_over_weights(model):
    # the step model's physics, on each GPU's default engine at its priors: the shipped engine fit
    # moves them by what the published rows show (vLLM's ROCm build: 6 ms a step), held by validate
    spec = get_model(model)
    checked = 0
    for hw in gpus():
        w = Workload(model=model, hardware=hw.name, suite="infer")
        sm = step_model(spec, hw, w, engine=engine(default_engine_name(hw), fitted=False))
        if not sm.fits:
            continue  # a 13B model in 16-bit does not fit a 24 GB card
        part = sm.parts(0, 1, 1100)
        tok_s = 1.0 / part.time_s
        ceiling = hw.device_memory.bandwidth_bytes_per_s / sm.weights_bytes
        assert part.bound == "memory", (hw.name, part)
        assert 0.5 * ceiling <= tok_s <= 1.0 * ceiling, (hw.name, tok_s, ceiling)
        checked += 1
    assert checked >= 8


def test_llama_8b_batch1_a100_h100_ranges_and_their_ratio_follows_bandwidth():
    # TensorRT-LLM at its priors (the physics; the shipped fit adds what its published rows show)
    trt = engine("trtllm", fitted=False)
    a = infer("llama-3.1-8b", "a100-80gb", batch=1, seq_len=128, gen_len=128, engine=trt)
    h = infer("llama-3.1-8b", "h100-sxm", batch=1, seq_len=128, gen_len=128, engine=trt)
    assert 80 <= a.decode_tokens_per_s_per_seq <= 120 and a.bound == "memory"
    assert 130 <= h.decode_tokens_per_s_per_seq <= 200 and h.bound == "memory"
    bw = get_hardware("a100-80gb").device_memory.bandwidth_bytes_per_s / \
        get_hardware("h100-sxm").device_memory.bandwidth_bytes_per_s
    ratio = a.decode_tokens_per_s_per_seq / h.decode_tokens_per_s_per_seq
    assert abs(ratio / bw - 1) <= 0.2, (ratio, bw)


def test_decode_turns_compute_bound_at_large_batch_and_time_grows_sublinearly():
    hw, spec = get_hardware("h100-sxm"), get_model("llama-3.1-8b")
    sm = step_model(spec, hw, Workload(model=spec.name, hardware=hw.name, suite="infer"))
    b = np.array([1, 8, 64, 512, 4096])
    parts = sm.parts(np.zeros(5), b, b * 200)  # vectorised: one call, five steps
    assert parts.time_s.shape == (5,) and list(parts.bound[:2]) == ["memory", "memory"]
    assert parts.bound[-1] == "compute"
    assert parts.time_s[2] < 2 * parts.time_s[0]  # batch 64 costs far less than 64 x batch 1
    one = sm.time_s(0, 64, 64 * 200)
    assert isinstance(one, float) and one == pytest.approx(parts.time_s[2])


def test_memory_bound_whenever_bytes_win_and_prefill_is_compute_bound():
    hw, spec = get_hardware("a100-80gb"), get_model("llama-3.1-8b")
    sm = step_model(spec, hw, Workload(model=spec.name, hardware=hw.name, suite="infer"))
    p = sm.parts(4096, 0, 0, prefill_seqs=4)
    assert p.bound == "compute" and p.compute_s > p.memory_s
    d = sm.parts(0, 4, 4 * 5000)  # long contexts: KV reads add to the bytes
    assert d.bound == "memory" and d.memory_s > sm.parts(0, 4, 4 * 100).memory_s


def test_moe_decode_reads_the_experts_the_batch_routes_to():
    hw, spec = get_hardware("h100-sxm"), get_model("mixtral-8x7b")
    sm = step_model(spec, hw, Workload(model=spec.name, hardware=hw.name, suite="infer", layout={"tp": 2}))
    one, many = sm.parts(0, 1, 500), sm.parts(0, 64, 64 * 500)
    # batch 1 reads 2 of 8 experts per layer (~13B of 47B weights), batch 64 all of them
    assert 2.0 < many.memory_s / one.memory_s < 4.5


def test_mla_decode_is_bandwidth_bound_on_the_latent():
    hw, spec = get_hardware("h200-sxm"), get_model("deepseek-v3")
    w = Workload(model=spec.name, hardware=hw.name, suite="infer", precision="fp8", layout={"tp": 8})
    sm = step_model(spec, hw, w)
    p = sm.parts(0, 64, 64 * 4096)
    assert p.bound == "memory"
    assert sm.kv_bytes_per_token == kv_cache_bytes_per_token(spec, sm.kv_precision)


def test_deepseek_v3_kv_per_device_under_tp_follows_the_engine_rule():
    spec, hw = get_model("deepseek-v3"), get_hardware("h200-sxm")
    full = kv_cache_bytes_per_token(spec, "bf16")
    vllm = build_step_model(spec, hw, precision="fp8", tp=8, eng=engine("vllm"), kv_precision="bf16")
    dp_attn = build_step_model(spec, hw, precision="fp8", tp=8, kv_precision="bf16",
                               eng=Engine(name="sglang-dp-attention", mla_replicated_tp=False))
    assert vllm.kv_bytes_per_token_per_device == full  # the 576-wide latent on every rank
    assert dp_attn.kv_bytes_per_token_per_device == pytest.approx(full / 8)
    assert engine("sglang").mla_replicated_tp and engine("vllm").mla_replicated_tp
    assert vllm.kv_capacity_tokens * 7 < dp_attn.kv_capacity_tokens
    # GQA: 8 KV heads over 16 ranks: a head is never split, each rank holds one
    assert kv_split(get_model("llama-3.1-70b"), 16) == 8 and kv_split(get_model("llama-3.1-70b"), 4) == 4


def test_a_concurrency_that_does_not_fit_is_answered_with_the_one_that_does():
    r = infer("deepseek-v3", "h200-sxm", batch=64, seq_len=32768, gen_len=1024, devices=8, precision="fp8",
              layout={"tp": 8}, engine="vllm")
    assert r.fits and 0 < r.concurrency < 64 and "does not fit" in r.note and "64" in r.note
    eng = engine("vllm")
    assert r.concurrency == seqs_that_fit(r.kv_capacity_tokens, 32768 + 1024, eng.block_tokens)
    assert (r.concurrency + 1) * paged_tokens(33792, eng.block_tokens) > r.kv_capacity_tokens
    ok = infer("llama-3.1-8b", "a100-80gb", batch=8, seq_len=512, gen_len=64)
    assert ok.concurrency == 8 and ok.note == ""


def test_7b_with_a_large_kv_cache_on_one_gaudi2_is_served_not_refused():
    # 3,072 + 1,024 tokens: within llama-2-7b's 4,096 positions; 256 such sequences need ~512 GiB of
    # bf16 KV cache (0.5 MiB a token), far beyond one Gaudi2's 96 GB
    r = infer("llama-2-7b", "gaudi2", batch=256, seq_len=3072, gen_len=1024, devices=1)
    assert r.fits and r.devices == 1 and r.concurrency < 256 and r.note


def test_model_larger_than_hbm_on_sn40l_is_placed_in_ddr():
    r = infer("deepseek-v3", "sn40l", batch=1, seq_len=128, gen_len=128, devices=16)
    assert r.fits and r.tier_bytes.get("ddr", 0) > 0
    # a GPU's engines keep weights in HBM: on too few devices it does not fit (the CLI refuses)
    assert not infer("deepseek-v3", "h100-sxm", batch=1, seq_len=128, gen_len=128, devices=8, layout={"tp": 8}).fits


def test_paged_blocks_round_each_sequence_up():
    assert paged_tokens(1, 16) == 16 and paged_tokens(16, 16) == 16 and paged_tokens(17, 16) == 32
    assert seqs_that_fit(160, 17, 16) == 5 and seqs_that_fit(160, 17, 1) == 9


def test_fp8_kv_halves_the_cache_and_doubles_what_fits():
    a = infer("llama-3.1-70b", "h100-sxm", batch=1, seq_len=1024, gen_len=128, devices=2, layout={"tp": 2},
              precision="fp8", engine="vllm")
    w = Workload(model="llama-3.1-70b", hardware="h100-sxm", suite="infer", batch=1, seq_len=1024, gen_len=128,
                 devices=2, precision="fp8", layout={"tp": 2})
    b = predict_infer(w.spec(), get_hardware("h100-sxm"), w, engine="vllm", kv_precision="fp8")
    assert (a.kv_precision, b.kv_precision) == ("bf16", "fp8")
    assert b.kv_cache_bytes == pytest.approx(a.kv_cache_bytes / 2)
    assert b.kv_capacity_tokens == pytest.approx(2 * a.kv_capacity_tokens, rel=0.01)


def test_engines_have_sources_and_defaults_per_family():
    names = engine_names()
    assert {"trtllm", "vllm", "sglang", "tgi", "jetstream", "ideal"} <= set(names)
    for n in names:
        e = engine(n)
        assert e.sources, n
        assert 0 < e.kv_mem_fraction <= 1 and e.block_tokens >= 1
    assert default_engine_name(get_hardware("mi300x")) == "vllm-rocm"
    assert default_engine_name(get_hardware("h100-sxm")) == "trtllm"
    assert default_engine(get_hardware("cs3")).name == "native"
    with pytest.raises(BadInput):
        engine("nope")


def test_engine_changes_the_answer_and_ideal_is_the_upper_bound():
    rs = {e: infer("llama-3.1-8b", "h100-sxm", batch=1, seq_len=128, gen_len=128, engine=e)
          for e in ("ideal", "trtllm", "vllm", "tgi")}
    speeds = {e: r.decode_tokens_per_s_per_seq for e, r in rs.items()}
    assert speeds["ideal"] > max(v for e, v in speeds.items() if e != "ideal")
    assert len({round(v) for v in speeds.values()}) == 4
    assert all(r.engine == e for e, r in rs.items())


def test_cli_states_the_engine_in_text_and_json(cli):
    code, out, _ = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "mi300x", "--batch", "1")
    assert code == 0 and "engine" in out and "vllm" in out
    code, out, _ = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1",
                       "--engine", "sglang", "--kv-precision", "fp8", "--json")
    d = json.loads(out)
    assert code == 0 and d["engine"] == "sglang" and d["kv_precision"] == "fp8" and d["bound"] == "memory"
    code, out, _ = cli("predict", "infer", "--model", "deepseek-v3", "--hardware", "h200-sxm", "--devices", "8",
                       "--tp", "8", "--batch", "64", "--prompt-len", "32768", "--gen-len", "1024", "--precision",
                       "fp8", "--engine", "vllm")
    assert code == 0 and "concurrency" in out and "does not fit" in out
    code, _, err = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "x")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_pooled_fit_moves_the_engine_parameter_its_rows_need():
    """Rows on one engine that are uniformly 15% too fast in bandwidth: the fit lowers that engine's
    bandwidth_fraction (and no other engine's); the hardware columns see nothing."""
    from llmbench.perfmodel import pooled
    from llmbench.perfmodel.params import resolve_params

    n = 10
    hw = ["h100-sxm"] * n
    priors = {"h100-sxm": resolve_params(get_hardware("h100-sxm"), use_profile=False)}
    Je = np.zeros((n, len(pooled.ENGINE_SIGMA)))
    Je[:, 0] = -1.0  # log prediction (a time) falls as the bandwidth fraction rises
    engines = ["vllm"] * 5 + ["trtllm"] * 5
    r0 = np.where(np.array(engines) == "vllm", -0.15, 0.0)  # vLLM rows predicted 14% too fast
    epri = {e: {k: getattr(engine(e, fitted=False), k) for k in pooled.ENGINE_SIGMA} for e in ("vllm", "trtllm")}
    lin = pooled.Linear(ids=[f"r{i}" for i in range(n)], sources=[f"s{i % 3}" for i in range(n)], hardware=hw,
                        r0=r0, J=np.zeros((n, len(pooled.SIGMA))), priors=priors, engines=engines, Je=Je,
                        engine_priors=epri)
    fit, _ = pooled.solve(lin, np.ones(n, dtype=bool))
    v = fit["engine:vllm"]["bandwidth_fraction"] / epri["vllm"]["bandwidth_fraction"]
    t = fit["engine:trtllm"]["bandwidth_fraction"] / epri["trtllm"]["bandwidth_fraction"]
    assert 0.86 < v < 0.95 and abs(t - 1) < 1e-6
    assert fit["h100-sxm"] == {k: priors["h100-sxm"][k] for k in fit["h100-sxm"]}
    full = pooled.full(lin, fit)
    assert full["engine:vllm"] == fit["engine:vllm"]  # what predict_row takes


def _gpt2_small_4l():
    from llmbench.models.spec import resize

    return resize(get_model("gpt2-small"), n_layers=4, d_model=256, n_heads=4)


def test_cpu_gemm_of_two_rows_reads_its_weights_twice_a_gpu_once():
    """GEMM_WEIGHT_PASSES: on a CPU a decode of 2 sequences (packed GEMM) moves twice the weight
    bytes of a decode of 1 (matrix-vector); on a GPU the same bytes (benchmarks/cpu_small_m.py)."""
    spec = _gpt2_small_4l()
    cpu = build_step_model(spec, get_hardware("cpu"), precision="fp32")
    gpu = build_step_model(spec, get_hardware("h100-sxm"), precision="fp32")
    assert cpu.weight_passes == 2.0 and gpu.weight_passes == 1.0
    one, two = (cpu.parts(0, b, 32 * b) for b in (1, 2))
    w = cpu.dense_weight_elems * 4.0 / cpu.bandwidth_bytes_per_s  # one pass over the weights, s
    assert one.bound == two.bound == "memory"
    assert two.memory_s - one.memory_s == pytest.approx(w, rel=0.02)
    g1, g2 = (gpu.parts(0, b, 32 * b).memory_s for b in (1, 2))
    assert g2 - g1 < 0.05 * g1  # the second sequence's KV and activations only


def test_cpu_single_prompt_packs_the_layers_not_the_head_and_arrays_match_scalars():
    """A prompt alone: its layers' GEMMs have P rows (packed), the LM head reads one (matrix-
    vector); two prompts pack the head too. The vectorised path gives the scalar path's times."""
    spec = _gpt2_small_4l()
    sm = build_step_model(spec, get_hardware("cpu"), precision="fp32")
    from llmbench.perfmodel.shapes import shape

    head = sum(n * k for n, k in shape(spec, "fp32").head_tok) * 4.0 / sm.bandwidth_bytes_per_s
    body = sm.dense_weight_elems * 4.0 / sm.bandwidth_bytes_per_s - head
    once = replace(sm, weight_passes=1.0)  # the same step with every GEMM reading its weights once
    for seqs, packed in ((1, body), (2, body + head)):
        extra = sm.parts(16, 0, 0, prefill_seqs=seqs).memory_s - once.parts(16, 0, 0, prefill_seqs=seqs).memory_s
        assert extra == pytest.approx(packed, rel=1e-9)
    assert sm.parts(1, 0, 0).memory_s == once.parts(1, 0, 0).memory_s  # one row: nothing packed
    P, D, C = np.array([0.0, 0, 16, 64]), np.array([1.0, 2, 0, 3]), np.array([32.0, 64, 0, 96])
    ps = np.array([0.0, 0, 1, 2])
    vec = sm.time_s(P, D, C, prefill_seqs=ps, prefill_attn_pairs=P * (P + 1) / 2)
    one = [sm.time_s(*x, prefill_seqs=s, prefill_attn_pairs=x[0] * (x[0] + 1) / 2) for *x, s in zip(P, D, C, ps)]
    assert np.allclose(vec, one, rtol=1e-12)


def test_vllm_on_an_amd_gpu_is_its_rocm_build():
    """`--engine vllm` (and a published row that ran vLLM) on an AMD GPU takes the ROCm build's
    efficiencies (serving.ROCM_BUILD), on NVIDIA the CUDA build's; other engines are one build."""
    from llmbench.perfmodel.serving import resolve_engine
    from llmbench.perfmodel.validate import row_engine

    mi300x, h100 = get_hardware("mi300x"), get_hardware("h100-sxm")
    assert resolve_engine("vllm", mi300x).name == "vllm-rocm"
    assert resolve_engine("vllm", h100).name == "vllm"
    assert resolve_engine("sglang", mi300x).name == "sglang"
    assert resolve_engine(None, mi300x).name == "vllm-rocm"
    assert row_engine({"engine": "vLLM"}, mi300x) == "vllm-rocm"
    assert row_engine({"engine": "vLLM"}, h100) == "vllm"


def test_trtllm_before_xqa_reads_each_kv_head_per_query_head():
    """TensorRT-LLM before v0.8 had no grouped-query generation kernel (serving.RELEASES): a GQA
    model's decode reads its KV cache once per query head (8x for Llama-2-70B), an MHA model's once;
    a release that is not stated is the current one."""
    from llmbench.perfmodel.serving import release

    trt, hw = engine("trtllm"), get_hardware("h200-sxm")
    assert not release(trt, "0.6.1").gqa_decode_kernel and not release(trt, "v0.5").gqa_decode_kernel
    for v in ("0.8.0", "v1.2.0rc1", "1.0 era (PyTorch backend)", "not stated", "", None):
        assert release(trt, v).gqa_decode_kernel, v
    assert release(engine("vllm"), "0.5").gqa_decode_kernel
    old = release(trt, "0.6.1")
    gqa, mha = get_model("llama-2-70b"), get_model("llama-2-7b")
    assert build_step_model(gqa, hw, precision="fp8", eng=old).kv_read_passes == 8
    assert build_step_model(gqa, hw, precision="fp8", eng=trt).kv_read_passes == 1
    assert build_step_model(mha, hw, precision="fp8", eng=old).kv_read_passes == 1
    new_sm, old_sm = (build_step_model(gqa, hw, precision="fp8", eng=e) for e in (trt, old))
    t_new, t_old = (sm.time_s(0, 256, 256 * 1100) for sm in (new_sm, old_sm))
    assert t_old > 2 * t_new  # decode of 256 sequences at 1,100 tokens: KV reads dominate


#: one small all-reduce as each engine's source times it (engines.toml [NAME.sources]), in seconds:
#: TensorRT-LLM's and SGLang's custom kernels 3.7-7.8 us, vLLM's 8.5-11.8 us (SGLang PR #2904),
#: TGI's NCCL ~20 us (20-25 us on 8x H100), gpt-fast's PyTorch intra-node one-shot 6-15 us
SMALL_ALL_REDUCE_S = {"trtllm": (3.7e-6, 7.8e-6), "sglang": (3.7e-6, 7.8e-6), "vllm": (8.5e-6, 11.8e-6),
                      "tgi": (15e-6, 25e-6), "gptfast": (6e-6, 15e-6)}


def test_engine_collective_latency_is_per_hop_and_a_small_all_reduce_lands_in_its_cited_range():
    """collective_latency_s is one hop; a small all-reduce is a one-shot, two hops (step.ring):
    2 x the engine's value must lie in the range its source measured per all-reduce (the per-hop
    value given as the whole all-reduce had doubled TGI's and gpt-fast's)."""
    from llmbench.perfmodel.step import ring

    for name, (lo, hi) in SMALL_ALL_REDUCE_S.items():
        lat = engine(name).collective_latency_s
        t = ring(1024.0, 8.0, 450e9, lat, 1.0, np)  # 1 KiB over 8 GPUs: latency-bound
        assert lo <= float(t) <= hi * 1.05, (name, lat, float(t))


def test_request_overhead_is_in_ttft_and_latency_once_not_in_decode():
    """Engine.request_overhead_s (the client-side time per request a TTFT includes: NIM's metrics
    guide) adds once to TTFT and to the request latency; the decode rate does not see it. It is
    what the TTFT rows fit (pooled.ENGINE_SIGMA), so it no longer inflates every step."""
    base = replace(engine("trtllm"), request_overhead_s=0.0)
    a = infer("llama-3.1-8b", "h100-sxm", batch=1, seq_len=128, gen_len=128, engine=base)
    b = infer("llama-3.1-8b", "h100-sxm", batch=1, seq_len=128, gen_len=128,
              engine=replace(base, request_overhead_s=0.004))
    assert b.time_to_first_token_s - a.time_to_first_token_s == pytest.approx(0.004, abs=1e-12)
    assert b.latency_s_p50 - a.latency_s_p50 == pytest.approx(0.004, abs=1e-12)
    assert b.decode_tokens_per_s_per_seq == a.decode_tokens_per_s_per_seq
    from llmbench.perfmodel import pooled
    from llmbench.perfmodel.serving import FITTED

    assert "request_overhead_s" in FITTED and tuple(pooled.ENGINE_SIGMA) == FITTED


def test_measured_gemm_times_replace_the_roofline_gemms_and_interpolate():
    """GemmTimes: a step's GEMMs cost what was measured at its rows (interpolated between measured
    rows, the last rate beyond), the weights' bytes leave the memory term (the kernels read them),
    and attention's term comes after the GEMMs (kernels one after another), not under a max."""
    from llmbench.perfmodel.serving import GemmTimes

    spec = _gpt2_small_4l()
    sm = build_step_model(spec, get_hardware("cpu"), precision="fp32")
    gt = GemmTimes(rows=(1.0, 2.0, 8.0), body_s=(1e-3, 1e-3, 4e-3), head_s=(2e-3, 2e-3, 6e-3))
    m = replace(sm, gemm_times=gt, engine=replace(sm.engine, step_overhead_s=0.0), overhead_per_step_s=0.0)
    # a decode of 5 sequences with no context: body at 5 rows 2.5 ms, head at 5 rows 4 ms, plus the
    # new tokens' KV written and activations (bytes, no weights), nothing else
    p5 = m.parts(0, 5, 0)
    kv_act = p5.memory_s - 6.5e-3  # both terms carry the measured GEMMs
    assert 0 < kv_act < 0.05 * m.dense_weight_elems * 4.0 / m.bandwidth_bytes_per_s  # no weight bytes
    assert p5.time_s == pytest.approx(2.5e-3 + 4e-3 + max(p5.compute_s - 6.5e-3, kv_act), rel=1e-9)
    # beyond the last measured row: that row's time per row; a prompt alone runs its head on 1 row
    assert m.gemm_times.body(16, np) == pytest.approx(8e-3)
    assert m.parts(16, 0, 0).compute_s >= 8e-3 + 2e-3
    # attention adds to the GEMMs: a decode over a long context costs more than over none
    assert m.time_s(0, 2, 2 * 4000) > m.time_s(0, 2, 0) + 0.9 * (m.parts(0, 2, 8000).compute_s - 3e-3)
    # the simulator's decode lines (time = max(compute, memory) + the rest, exact) hold
    from llmbench.queueing.sim import _DecodeLines
    assert _DecodeLines(m)[4] is not None
    # vectorised = scalar
    D = np.array([1.0, 3.0, 12.0])
    assert np.allclose(m.time_s(np.zeros(3), D, 32 * D), [m.time_s(0, d, 32 * d) for d in D], rtol=1e-12)
    with pytest.raises(ValueError):
        GemmTimes(rows=(2.0, 1.0), body_s=(1.0, 1.0), head_s=(1.0, 1.0))


def test_link_bytes_count_a_tokens_all_reduces_and_pipeline_hops():
    # seed 004: "between WSEs only a relatively small amount of data passes"; d 8192, 80 layers, 2 bytes
    wafers = infer("llama-3.1-70b", "cs3", batch=1, seq_len=2048, gen_len=256)
    assert wafers.workload.layout.pp == 4 and wafers.link_bytes_per_token == 3 * 8192 * 2
    assert wafers.link_bytes_per_token / wafers.weights_bytes < 1e-5
    gpus_tp4 = infer("llama-3.1-70b", "h100-sxm", devices=4, batch=1, seq_len=2048, gen_len=256)
    assert gpus_tp4.workload.layout.tp == 4
    assert gpus_tp4.link_bytes_per_token == 2 * 80 * 2 * 3 * 8192 * 2  # ring: 2 (tp - 1) / tp from each of tp
    assert infer("llama-3.1-8b", "h100-sxm", batch=1).link_bytes_per_token == 0.0


def test_a_step_whose_fixed_overhead_outweighs_every_term_is_latency_bound():
    spec = get_model("llama-3.1-8b")
    sm = step_model(spec, get_hardware("cs3"), Workload(model="llama-3.1-8b", hardware="cs3", suite="infer"))
    p = sm.parts(0, 1, 2048)
    assert p.overhead_s > max(p.compute_s, p.memory_s, p.comm_s) and p.bound == "latency"
    big = sm.parts(64 * 2048, 0, 0, prefill_seqs=64)  # 64 prompts at once: the FLOPs outweigh it
    assert big.bound == "compute"
    h100 = step_model(spec, get_hardware("h100-sxm"), Workload(model="llama-3.1-8b", hardware="h100-sxm",
                                                               suite="infer"))
    assert h100.parts(0, 1, 2048).bound == "memory"


def test_a_tp_group_wider_than_a_node_all_reduces_over_the_links_between_nodes():
    """tp 16 on 8-GPU H100 nodes: the all-reduce of a large prefill step runs at the inter-node
    bandwidth (400 Gb/s a GPU, not NVLink's 450 GB/s), so it takes several times tp 8's within
    one node, where a split over the NVLink ring alone would make tp 16 cheaper per byte."""
    h = get_hardware("h100-sxm")
    assert h.interconnect.devices_per_node == 8
    spec = get_model("llama-3.1-70b")
    comm = {tp: build_step_model(spec, h, precision="bf16", tp=tp).parts(8192, 0, 0).comm_s for tp in (8, 16)}
    ratio = h.interconnect.bandwidth_bytes_per_s / h.interconnect.inter_node_bandwidth_bytes_per_s
    assert comm[16] > 0.5 * ratio * comm[8], (comm, ratio)
