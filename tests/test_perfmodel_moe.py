"""Mixture of experts in the analytical model: FLOPs against models/ counting, memory of every
expert, expert parallelism in the planner, decode reading the experts a batch touches.

    python -m pytest -q tests/test_perfmodel_moe.py
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from llmbench.errors import BadInput
from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.models.counting import (
    active_param_count, kv_cache_bytes_per_token, matmul_weight_params, model_ops, param_breakdown, param_count,
)
from llmbench.models.moe import expert_weight_bytes_read, moe_layer_params
from llmbench._xp import Scalar
from llmbench.grid import Grid
from llmbench.perfmodel.memory import memory_use
from llmbench.perfmodel.moe import all_to_all_s, expert_weight_bytes
from llmbench.perfmodel.params import resolve_params
from llmbench.perfmodel.plan import plan, search
from llmbench.perfmodel.shapes import shape, weights_per_token
from llmbench.perfmodel.step import act_per_seq, layer_forward
from llmbench.perfmodel.train import predict_train
from llmbench.point import Workload

H100 = get_hardware("h100-sxm")


def _grid(**kw) -> Grid:
    base = dict(batch=8.0, seq=4096.0, devices=8.0, tp=1.0, pp=1.0, micro_batch=1.0, sparsity=0.0, zero=0.0,
                recompute=0.0, offload=0.0, ep=1.0)
    return Grid(**{**base, **{k: float(v) for k, v in kw.items()}})


@pytest.mark.parametrize("name", ["mixtral-8x7b", "deepseek-v3"])
def test_weights_per_token_are_counting_active_weights(name):
    """The time model multiplies each token by the top-k experts, the shared ones, the router and
    (DeepSeek-V3) the dense layers' MLP: exactly models/ counting's matmul weights, and within 1.5%
    of the active parameters less embeddings, norms (and MLA's latent norms)."""
    spec = get_model(name)
    sh = shape(spec)
    head = spec.vocab_size * spec.d_model
    assert weights_per_token(sh) == matmul_weight_params(spec) - head
    emb = param_breakdown(spec)["embedding"] + (0 if spec.tied_embeddings else head)
    assert weights_per_token(sh) == pytest.approx(active_param_count(spec) - emb, rel=0.015)
    # every expert held: the shape's matmul weights are (nearly) all parameters
    assert sh.dense_params == pytest.approx(param_count(spec) - emb, rel=0.01)


@pytest.mark.parametrize("name,ep", [("mixtral-8x7b", 1), ("mixtral-8x7b", 8), ("deepseek-v3", 16)])
def test_layer_forward_flops_equal_counting(name, ep):
    """At efficiency 1, unit peak and infinite bandwidth the forward's compute time of the layers is
    their GEMM FLOPs: counting's weight GEMMs (top-k experts, not all, not a dense MLP) plus the
    attention core; expert parallelism moves the rows, not the FLOPs."""
    spec = get_model(name)
    sh, T = shape(spec), 512
    p = {**resolve_params(H100), "compute_max": 1.0, "compute_half_dim": 0.0, "layer_overhead_s": 0.0}
    lc, lm, la = layer_forward(sh, 1.0, float(T), 1.0, p, 1.0, 1e30, 1.0, 1.0, Scalar, ep=float(ep))
    gemm = sum(o.matmul_flops for o in model_ops(spec, 1, T) if o.kind == "matmul" and o.where == "layer")
    assert sh.L * (lc - la) == pytest.approx(gemm, rel=1e-9)
    assert gemm == pytest.approx(2.0 * T * (matmul_weight_params(spec) - spec.vocab_size * spec.d_model), rel=1e-12)


def test_memory_holds_every_expert_sharded_by_ep_and_zero():
    spec = get_model("mixtral-8x7b")
    sh = shape(spec)
    P, E = param_count(spec), param_breakdown(spec)["experts"]
    acts = act_per_seq(spec, 4096, "bf16")

    def weights(**kw):
        return memory_use(spec, sh, "bf16", H100, _grid(**kw), acts, Scalar).weights_bytes

    assert weights() == 2.0 * P  # one device: all 8 experts of every layer
    assert weights(ep=8) == pytest.approx(2.0 * (P - E + E / 8))  # experts split over 8
    assert weights(ep=8, tp=2, devices=16) == pytest.approx(2.0 * (P - E + E / 8) / 2)
    assert weights(ep=8, zero=3) == pytest.approx(2.0 * P / 8)  # ZeRO-3 shards all of it anyway
    opt = memory_use(spec, sh, "bf16", H100, _grid(ep=4, zero=1), acts, Scalar).optimizer_bytes
    assert opt == pytest.approx(12.0 * ((P - E) / 8 + E / 4 / 2))  # experts over dp / ep = 2 replicas


def test_activations_are_those_of_the_active_experts():
    """Saved activations follow top-k, not the number of experts."""
    spec = get_model("mixtral-8x7b")
    base = act_per_seq(spec, 4096, "bf16")[0]
    more_experts = act_per_seq(spec.with_(n_experts=64), 4096, "bf16")[0]
    more_active = act_per_seq(spec.with_(n_experts_active=4), 4096, "bf16")[0]
    assert more_experts == pytest.approx(base, rel=0.01) and more_active > 1.3 * base


def test_all_to_all_volume_and_links():
    """tokens x hidden x top-k x bytes x (ep-1)/ep per all-to-all; slower once the group leaves the node."""
    sh, p = shape(get_model("mixtral-8x7b")), resolve_params(H100)
    ic = H100.interconnect
    vol = 4096 * 2 * 4096 * 2.0
    t8 = all_to_all_s(sh, H100, 4096.0, 1.0, 8.0, p, Scalar)
    assert t8 == pytest.approx(vol * 7 / 8 / (ic.bandwidth_bytes_per_s * p["network"]) + ic.latency_s)
    assert all_to_all_s(sh, H100, 4096.0, 1.0, 1.0, p, Scalar) == 0.0
    # ep 8 x tp 2 = 16 ranks span two nodes: half of each device's rows leave through its NIC
    t16 = all_to_all_s(sh, H100, 4096.0, 2.0, 8.0, p, Scalar)
    assert t16 == pytest.approx(vol / 2 * 4 / 8 / (ic.inter_node_bandwidth_bytes_per_s * p["network"]) + ic.latency_s)
    assert t16 > all_to_all_s(sh, H100, 4096.0, 2.0, 4.0, p, Scalar) * 3


def test_planner_chooses_expert_parallelism_for_mixtral():
    w = Workload(model="mixtral-8x7b", hardware="h100-sxm", precision="bf16", devices=64, batch=512, seq_len=4096)
    spec, p = w.spec(), resolve_params(H100)
    best = plan(spec, H100, w, p).best()
    assert best.layout.ep > 1 and spec.n_experts % best.layout.ep == 0
    chosen = predict_train(spec, H100, best, p)
    no_ep = predict_train(spec, H100, plan(spec, H100, w.with_(ep=1), p).best(), p)
    assert chosen.fits and chosen.step_time_s < no_ep.step_time_s
    # the resolved layout states ep; a plan that cannot use it (a dense model) resolves it to 1
    assert chosen.to_dict()["workload"]["layout"]["ep"] == best.layout.ep
    dense = Workload(model="llama-2-7b", hardware="h100-sxm", precision="bf16", devices=8, batch=64, seq_len=2048)
    assert set(search(dense.spec(), H100, dense, p).layouts["ep"]) == {1}


def test_planner_fits_deepseek_v3_on_2048_gpus():
    """DeepSeek-V3 trained on 2048 H800 (arXiv:2412.19437 Sec. 3.1); some layout must fit 2048 H100s."""
    w = Workload(model="deepseek-v3", hardware="h100-sxm", precision="bf16", devices=2048, batch=15360,
                 seq_len=4096)
    spec, p = w.spec(), resolve_params(H100)
    res = search(spec, H100, w, p)
    assert len(res.order) and max(res.layouts["ep"]) == 256
    best = predict_train(spec, H100, res.best(), p)
    assert best.fits and best.peak_mem_bytes <= H100.device_memory.capacity_bytes


def test_ep_options_rejected_with_one_line():
    p = resolve_params(H100)
    dense = Workload(model="llama-2-7b", hardware="h100-sxm", precision="bf16", devices=8, batch=64, seq_len=2048)
    with pytest.raises(BadInput, match="no routed experts"):
        search(dense.spec(), H100, dense.with_(ep=2), p)
    mix = Workload(model="mixtral-8x7b", hardware="h100-sxm", precision="bf16", devices=8, batch=64,
                   seq_len=2048, micro_batch=1)
    with pytest.raises(BadInput, match="must divide"):
        search(mix.spec(), H100, mix.with_(ep=3), p)
    with pytest.raises(BadInput, match="must divide"):
        predict_train(mix.spec(), H100, mix.with_(tp=1, pp=1, zero=3, recompute="full", offload="none",
                                                  mode="resident", ep=16), p)


def test_decode_reads_the_experts_a_batch_touches():
    """Expert weight bytes per decode step: uniform routing E (1 - (1 - k/E)^b), so a batch of one
    reads k experts a layer and a large batch all of them; the same figure as models/moe."""
    spec = get_model("mixtral-8x7b")
    mo = shape(spec).moe
    b = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0])
    read = expert_weight_bytes(mo, b, 1.0, 1.0, 2.0, np) * mo.moe_layers
    assert np.all(np.diff(read) > 0)
    one_expert = sum(N * K for N, K, _ in mo.expert_gemms) * 2.0 * mo.moe_layers
    assert read[0] == pytest.approx(2 * one_expert) and read[-1] == pytest.approx(8 * one_expert)
    for tokens, got in zip(b, read):
        assert got == pytest.approx(expert_weight_bytes_read(spec, int(tokens)))
    shared = moe_layer_params(get_model("deepseek-v3"))["shared_experts"]
    assert shared > 0  # DeepSeek-V3's shared expert is read by every token (in Shape.moe.token_gemms)


def test_predict_infer_mixtral_batch_1_vs_64_and_mla_cache():
    from llmbench.perfmodel.infer import predict_infer

    def run(name, b, n):
        w = Workload(model=name, hardware="h100-sxm", suite="infer", batch=b, seq_len=1024, gen_len=256, devices=n)
        return predict_infer(w.spec(), H100, w)

    one, many = run("mixtral-8x7b", 1, 2), run("mixtral-8x7b", 64, 2)
    t1, t64 = 1 / one.decode_tokens_per_s_per_seq, 1 / many.decode_tokens_per_s_per_seq
    # batch 1 reads about active / total of the weights (12.9B of 46.7B); batch 64 all of them
    assert 2.0 < t64 / t1 < 6.0 and many.tokens_per_s > 10 * one.tokens_per_s
    ds = get_model("deepseek-v3")
    assert kv_cache_bytes_per_token(ds) == ds.n_layers * 576 * 2  # MLA latent + rope key, bf16
    assert shape(ds).kv_elems_tok == 576


def test_layout_without_ep_keeps_its_id():
    w = Workload(model="gpt2-xl", hardware="a100-80gb", batch=8, seq_len=1024, layout={"tp": 2})
    assert "ep" not in w.to_dict()["layout"]
    d = w.with_(ep=4).to_dict()
    assert d["layout"]["ep"] == 4 and Workload.from_dict(json.loads(json.dumps(d))).layout.ep == 4
