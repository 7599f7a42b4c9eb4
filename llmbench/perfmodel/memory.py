"""Where a training step's memory lives, per device: weights, gradients, optimizer state,
activations, on each tier of the accelerator's memory hierarchy.

    from llmbench.perfmodel.memory import hierarchy, memory_use
    hierarchy(get_hardware("sn30"))       # the tiers a layout may use, with the rule and its source

docs/predict.md ("Memory") gives each architecture's rule and its source.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .grid import FULL, Grid


@dataclass(frozen=True, kw_only=True)
class Hierarchy:
    """The memory tiers of one accelerator as a training layout uses them."""

    resident: Any
    """MemoryTier that holds weights, gradients and activations in resident mode"""
    working_bytes_per_s: float
    """bandwidth memory-bound ops run at"""
    store: Any
    """MemoryTier that weight streaming and offload use (None: none below the device)"""
    link_bytes_per_s: float
    """bandwidth between the store and the device"""
    store_is_device: bool
    """the store is the device's own memory (a CPU streaming from its DRAM)"""
    state_bytes_per_s: float | None = None
    """bandwidth of the optimizer update when the state is resident (None: working bandwidth)"""


def hierarchy(hw) -> Hierarchy:
    tiers = list(hw.memory_tiers)
    dev = hw.device_memory
    ext = hw.tier("external")
    i = tiers.index(dev)
    below = ext or (tiers[i + 1] if i + 1 < len(tiers) else None)
    return Hierarchy(resident=dev, working_bytes_per_s=dev.bandwidth_bytes_per_s,
                     store=below, link_bytes_per_s=(below or dev).bandwidth_bytes_per_s,
                     store_is_device=below is None)


@dataclass(frozen=True, kw_only=True)
class MemoryUse:
    """Bytes per device of each configuration, by kind; whether it fits."""

    weights_bytes: Any
    grads_bytes: Any
    optimizer_bytes: Any
    activations_bytes: Any
    """saved activations at the peak (in-flight micro-batches, the rebuilt layer, fp32 logits)"""
    peak_mem_bytes: Any
    """what the device holds at the peak"""
    fits: Any


def memory_use(spec, sh, hw, g: Grid, acts, xp) -> MemoryUse:
    """Model state (ZeRO arXiv:1910.02054 Sec. 3.1, partitioned by stage) + activations (1F1B:
    the first stage keeps min(m, pp) micro-batches in flight) + fp32 logits."""
    none, sel, full_act = acts
    full, is_sel = g.recompute == FULL, g.recompute == 1
    per_seq = xp.where(full, full_act, xp.where(is_sel, sel, none))
    act_layer = g.micro_batch * per_seq / g.tp
    P, s = float(sh.params), sh.s
    w, gr = s * P, (4.0 if s >= 4 else s) * P
    opt = (8.0 + (0.0 if s >= 4 else 4.0)) * P
    dp, mp = g.dp, g.tp * g.pp
    wd = w / xp.where(g.zero >= 3, dp, 1.0) / mp
    gd = gr / xp.where(g.zero >= 2, dp, 1.0) / mp
    od = opt / xp.where(g.zero >= 1, dp, 1.0) / mp
    inflight = xp.minimum(g.micro_steps, g.pp)
    act = spec.n_layers / g.pp * act_layer * inflight + full * (g.micro_batch * none / g.tp)
    logits = g.micro_batch * g.seq * spec.vocab_size * 4.0 / g.tp if spec.head == "lm" else 0.0
    resident = wd + gd + od + act + logits
    # weight streaming: weights live off-device; two layers' weights double-buffered
    stream = spec.n_layers * act_layer + 2.0 * sh.layer_params * s
    st = g.streaming
    hier = hierarchy(hw)
    store = hier.store or hier.resident
    store_ok = xp.inf if store.capacity_bytes >= 16.0 * P else -1.0
    peak = xp.where(st, stream, resident)
    cap = xp.where(st, store_ok, hier.resident.capacity_bytes)
    return MemoryUse(weights_bytes=xp.where(st, 2.0 * sh.layer_params * s, wd),
                     grads_bytes=xp.where(st, 0.0, gd), optimizer_bytes=xp.where(st, 0.0, od),
                     activations_bytes=xp.where(st, spec.n_layers * act_layer, act + logits),
                     peak_mem_bytes=peak, fits=peak <= cap)
