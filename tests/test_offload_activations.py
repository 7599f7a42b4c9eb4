"""Offloading the activations saved for the backward to the host (offload "activations": DeepSpeed
cpu_checkpointing, Megatron-Core / TE CPU offloading, MaxText remat offload): what the device keeps,
what crosses the link, and that the planner offers it only when asked."""
from __future__ import annotations

from dataclasses import replace

import pytest

from llmbench import footprint
from llmbench._xp import Scalar
from llmbench.errors import BadInput
from llmbench.grid import grid_of
from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.perfmodel.plan import plan
from llmbench.perfmodel.train import predict_train
from llmbench.point import Workload

W = Workload(model="llama-3.1-8b", hardware="h100-sxm", precision="bf16", devices=8, batch=64, seq_len=8192, micro_batch=2,
             layout={"tp": 1, "pp": 1, "zero": 3, "recompute": "full", "offload": "none", "mode": "resident"})


def _fp(w):
    spec = get_model(w.model)
    return footprint.training(spec, grid_of(w), "bf16", "mixed")


def test_the_device_keeps_two_layers_and_the_host_the_rest():
    spec = get_model("llama-3.1-8b")
    on, off = _fp(W), _fp(W.with_(offload="activations"))
    rebuilt = 2 * footprint.act_per_seq(spec, 8192, "bf16")[0]  # micro-batch 2, tp 1: one layer in full
    layer = (on.activations - rebuilt) / spec.n_layers
    assert off.activations == pytest.approx(rebuilt + footprint.ACT_SLOTS * layer)
    assert off.store == pytest.approx(on.activations - off.activations)  # nothing lost, nothing made
    assert off.peak_bytes < on.peak_bytes
    assert off.weights == on.weights and off.optimizer == on.optimizer


def test_the_link_hides_under_compute_unless_it_is_slow():
    spec, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    base = predict_train(spec, hw, W)
    off = predict_train(spec, hw, W.with_(offload="activations"))
    moved = footprint.offloaded_per_micro(spec.n_layers, grid_of(W.with_(offload="activations")),
                                          footprint.act_per_seq(spec, 8192, "bf16"), Scalar)
    assert moved > 0
    assert off.step_time_s == pytest.approx(base.step_time_s, rel=1e-6)  # hidden under each pass
    tiers = tuple(replace(t, bandwidth_bytes_per_s=1e8) if t.name == "host_dram" else t for t in hw.memory_tiers)
    slow = predict_train(spec, replace(hw, memory_tiers=tiers), W.with_(offload="activations"))
    assert slow.step_time_s > base.step_time_s + moved / 1e8  # at 0.1 GB/s the transfer shows


def test_the_planner_offers_it_only_when_asked():
    spec, hw = get_model("llama-3.1-70b"), get_hardware("h100-sxm")
    w = Workload(model="llama-3.1-70b", hardware="h100-sxm", precision="bf16", devices=8, batch=64, seq_len=8192)
    searched = plan(spec, hw, w)
    assert "activations" not in {searched.workload_at(int(i)).layout.offload for i in searched.order}
    # 8B, micro-batch 4 x 8192, no recompute: 136 GiB of saved activations a device; offloaded, 8.5 GiB stay
    spec = get_model("llama-3.1-8b")
    w = W.with_(recompute="none", micro_batch=4, offload=None)
    with pytest.raises(BadInput, match="fits no layout"):
        plan(spec, hw, w)
    assert plan(spec, hw, w.with_(offload="activations")).best().layout.offload == "activations"


def test_no_host_tier_no_offload():
    spec = get_model("gpt2-xl")
    for name in ("cs2", "sn30"):
        w = Workload(model="gpt2-xl", hardware=name, precision="bf16", devices=1, batch=8, seq_len=1024, layout={"offload": "activations"})
        with pytest.raises(BadInput):
            plan(spec, get_hardware(name), w)
