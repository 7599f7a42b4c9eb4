"""Each accelerator's memory hierarchy as a training layout uses it, and where a step's memory
lives per device: weights, gradients, optimizer state, activations, on each tier. What a device
holds, kind by kind, is llmbench/footprint.py's answer (on the hardware stack's runtime,
`Hierarchy.runtime`, or the one a caller names); this module places it on the tiers.

    from llmbench.perfmodel.memory import hierarchy
    h = hierarchy(get_hardware("sn30"))
    h.resident.name, h.store, h.rule       # 'ddr', None, 'DDR holds weights, ... (source)'

One rule per architecture (`RULES`, each with its source; docs/predict.md "Memory"):

- GPU / Gaudi (and any HBM device): HBM holds weights, gradients, optimizer state and activations
  (ZeRO / FSDP shard them over data-parallel ranks); the node's host DRAM (the catalog's per-device
  share) takes offloaded optimizer state (ZeRO-Offload) or the whole model state, streamed to the
  device layer by layer (ZeRO-Infinity / FSDP CPU offload = weight streaming). No NVMe tier is in
  the catalog, so none is used.
- SambaNova RDU: the DDR next to each RDU (1 TB) holds weights, optimizer state and activations;
  on-chip SRAM is working memory (its bandwidth runs the ops). The optimizer update runs at DDR
  bandwidth and each micro-batch reads the weights from DDR (hidden behind compute when it can be).
- Graphcore IPU: in-processor SRAM holds weights, gradients and activations of its pipeline stage;
  streaming memory takes the optimizer state (optimizer_state_offchip, sharded over replicas:
  replicated tensor sharding = ZeRO 1) or, with phased execution, the weights too (streamed).
- Cerebras wafer: weight streaming only: MemoryX holds weights and optimizer state for every
  system at once (its capacity limits the model; more systems do not add any), on-wafer SRAM holds
  activations and the layer being computed; SwarmX broadcasts weights and reduces gradients in a
  tree of fan-out 32, up to the cluster's system count.
- CPU: DRAM holds everything; weight streaming copies within it.

A mixture-of-experts model holds every expert: its routed experts' state is split by expert
parallelism and sharded by ZeRO over the replicas that hold the same experts (`sharded`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from llmbench.errors import BadInput

from llmbench import footprint
from llmbench.grid import OFF_OPTIMIZER, Grid

#: per architecture: (rule, source) — printed by `llmbench plan` and in docs/predict.md
RULES = {
    "gpu": ("HBM holds weights, gradients, optimizer state and activations, sharded by ZeRO/FSDP; host "
            "DRAM takes offloaded optimizer state, the activations saved for the backward, or, streamed "
            "per layer, the whole model state",
            "ZeRO arXiv:1910.02054 Sec. 3.1 / 5; ZeRO-Offload arXiv:2101.06840; ZeRO-Infinity arXiv:2104.07857; "
            "activation offload: DeepSpeed activation_checkpointing.cpu_checkpointing, MaxText remat "
            "policies with offloaded decoder-layer inputs"),
    "rdu": ("DDR (1 TB per RDU) holds weights, optimizer state and activations; on-chip SRAM is working "
            "memory; the optimizer update runs at DDR bandwidth",
            "arXiv:2310.04607 (seed 002) Sec. III: 1 TB off-chip memory per RDU; Table III: a 13B model "
            "fits one RDU from 1K to 64K tokens"),
    "ipu": ("In-processor SRAM holds weights, gradients and activations of a pipeline stage; streaming "
            "memory takes the optimizer state (sharded over replicas) or, with phased execution, the "
            "weights too",
            "Graphcore IPUConfig (optimum-graphcore; Graphcore/*-ipu ipu_config.json): "
            "optimizer_state_offchip, replicated_tensor_sharding, ipus_per_replica/layers_per_ipu; "
            "Bow-2000 datasheet: 900 MB SRAM per IPU, 256 GB streaming memory per 4 IPUs"),
    "wafer": ("weight streaming: MemoryX holds weights and optimizer state for all systems (its capacity "
              "limits the model), on-wafer SRAM holds activations and the layer in flight; SwarmX "
              "broadcasts weights and reduces gradients, fan-out 32",
              "seed 001 (Hot Chips 33 review): MemoryX 4 TB-2.4 PB stores weights and optimizer state, "
              "activations stay on-wafer, SwarmX links 32 CS-2 per switch, up to 192 CS-2; Cerebras "
              "glossary 'Wafer-Scale Cluster': strictly data parallel"),
    "cpu": ("DRAM holds everything; weight streaming copies within it", "the catalog's one tier"),
}
#: Cerebras cluster limits: systems one cluster runs data parallel, SwarmX fan-out
SWARMX = {"cs2": (192, 32, "cerebras.net/product-cluster: clusters of up to 192 CS-2; seed 001: "
                           "a SwarmX links 32 CS-2, 6 of them for 192"),
          "cs3": (2048, 32, "Cerebras WSE-3 announcement 2024-03-13: clusters of up to 2,048 CS-3; "
                            "fan-out taken as the CS-2's (no CS-3 figure)")}
WAFER_DEFAULT = (192, 32, "as the CS-2 (seed 001)")


@dataclass(frozen=True, kw_only=True)
class Hierarchy:
    """The memory tiers of one accelerator as a training layout uses them."""

    kind: str
    """the architecture rule that applies: gpu | rdu | ipu | wafer | cpu"""
    resident: Any
    """MemoryTier holding weights, gradients and activations (the tier that bounds a layout)"""
    working_bytes_per_s: float
    """bandwidth memory-bound ops run at"""
    store: Any = None
    """MemoryTier for offload and weight streaming (None: no tier below the device)"""
    store_shared: bool = False
    """one store serves every device (MemoryX): its capacity does not grow with devices"""
    link_bytes_per_s: float = 0.0
    """between the store and the device (the resident tier itself when there is no store)"""
    state_bytes_per_s: float | None = None
    """bandwidth of the resident optimizer update when it is not the working one (RDU: DDR)"""
    weights_from_resident: bool = False
    """each micro-batch reads the weights from the resident tier into working memory (RDU)"""
    offload_on_device: bool = False
    """offloaded optimizer state is streamed through the device (IPU), not updated by a host CPU"""
    modes: tuple = ("resident",)
    """training modes the planner searches (the vendor stack's)"""
    tp_max: int = 1
    """largest tensor-parallel degree (the scale-up domain)"""
    pp: bool = True
    """pipeline parallelism available"""
    zero_max: int = 3
    offloads: tuple = ("none",)
    offloads_asked: tuple = ()
    """offloads the architecture runs when asked (--offload), which the planner does not pick on
    its own: the activations saved for the backward, which no framework offloads by default"""
    max_devices: int | None = None
    fanout: int = 2
    """tree fan-out of the weight broadcast / gradient reduce in weight streaming"""
    rule: tuple = field(default=("", ""))
    runtime: str = "mixed"
    """the vendor stack's footprint.STATE entry (Megatron / DeepSpeed mixed precision)"""

    @property
    def store_is_device(self) -> bool:
        """weights stream over the device's own memory (no tier below it: a CPU)"""
        return self.store is None


def hierarchy(hw) -> Hierarchy:
    """The Hierarchy of `hw`, by its kind; an unknown kind with HBM is treated as a GPU."""
    kind = hw.kind if hw.kind in ("rdu", "ipu", "wafer", "cpu") else "gpu"
    return {"gpu": _gpu, "rdu": _rdu, "ipu": _ipu, "wafer": _wafer, "cpu": _cpu}[kind](hw)


def _below(hw, tier):
    tiers = list(hw.memory_tiers)
    i = tiers.index(tier)
    return tiers[i + 1] if i + 1 < len(tiers) else None


def _dpn(hw) -> int:
    return max(hw.interconnect.devices_per_node, 1) if hw.interconnect else 1


def _gpu(hw) -> Hierarchy:
    dev = hw.device_memory
    store = hw.tier("external") or _below(hw, dev)
    return Hierarchy(kind="gpu", resident=dev, working_bytes_per_s=dev.bandwidth_bytes_per_s, store=store,
                     link_bytes_per_s=(store or dev).bandwidth_bytes_per_s, tp_max=_dpn(hw),
                     modes=("resident", "weight_streaming") if store else ("resident",),
                     offloads=("none", "optimizer") if store else ("none",), rule=RULES["gpu"],
                     offloads_asked=("activations",) if store else ())


def _rdu(hw) -> Hierarchy:
    sram = hw.tier("sram") or hw.memory_tiers[0]
    ddr = hw.tier("dram") or sram
    return Hierarchy(kind="rdu", resident=ddr, working_bytes_per_s=sram.bandwidth_bytes_per_s,
                     link_bytes_per_s=ddr.bandwidth_bytes_per_s, store=None,
                     state_bytes_per_s=ddr.bandwidth_bytes_per_s if ddr is not sram else None,
                     weights_from_resident=ddr is not sram, tp_max=_dpn(hw), zero_max=0, rule=RULES["rdu"])


def _ipu(hw) -> Hierarchy:
    sram = hw.tier("sram") or hw.memory_tiers[0]
    store = hw.tier("dram") or _below(hw, sram)
    return Hierarchy(kind="ipu", resident=sram, working_bytes_per_s=sram.bandwidth_bytes_per_s, store=store,
                     link_bytes_per_s=(store or sram).bandwidth_bytes_per_s, offload_on_device=True,
                     modes=("resident", "weight_streaming") if store else ("resident",),
                     offloads=("none", "optimizer") if store else ("none",), tp_max=_dpn(hw), zero_max=1,
                     rule=RULES["ipu"])


def _wafer(hw) -> Hierarchy:
    sram = hw.tier("sram") or hw.memory_tiers[0]
    ext = hw.tier("external") or _below(hw, sram)
    n, fan, _ = SWARMX.get(hw.name, WAFER_DEFAULT)
    return Hierarchy(kind="wafer", resident=sram, working_bytes_per_s=sram.bandwidth_bytes_per_s, store=ext,
                     store_shared=True, link_bytes_per_s=(ext or sram).bandwidth_bytes_per_s,
                     modes=("weight_streaming",), pp=False, zero_max=0, max_devices=n, fanout=fan,
                     rule=RULES["wafer"])


def _cpu(hw) -> Hierarchy:
    dev = hw.device_memory
    return Hierarchy(kind="cpu", resident=dev, working_bytes_per_s=dev.bandwidth_bytes_per_s,
                     link_bytes_per_s=dev.bandwidth_bytes_per_s, modes=("resident", "weight_streaming"),
                     rule=RULES["cpu"])


def model_state_bytes(spec, precision: str, runtime: str = "mixed") -> tuple[float, float, float]:
    """(weights, gradients, optimizer incl. fp32 master) bytes of the whole model on `runtime`
    (footprint.STATE); this module only places them per device and tier."""
    k = footprint.state_totals(spec, precision, runtime)
    return k["weights"], k["grads"], k["master"] + k["optimizer"]


@dataclass(frozen=True, kw_only=True)
class MemoryUse:
    """Bytes per device of each configuration; the kinds are what the device's resident tier
    holds (they sum to peak_mem_bytes); tier_bytes says what every tier holds."""

    weights_bytes: Any
    grads_bytes: Any
    optimizer_bytes: Any
    activations_bytes: Any
    """saved activations at the peak (in-flight micro-batches, the rebuilt layer, fp32 logits)"""
    peak_mem_bytes: Any
    """what the resident tier holds at the peak"""
    store_bytes: Any
    """what the store holds for this device (a shared store: the whole model state)"""
    fits: Any
    resident_tier: str
    store_tier: str | None

    def tier_bytes(self, i=None) -> dict:
        """{tier name: bytes} of one configuration (i: its index in a sweep)."""
        pick = (lambda v: float(v if i is None else v.flat[i] if hasattr(v, "flat") else v))
        out = {self.resident_tier: pick(self.peak_mem_bytes)}
        if self.store_tier:
            out[self.store_tier] = pick(self.store_bytes)
        return out


def memory_use(spec, sh, precision: str, hw, g: Grid, acts, xp, runtime: str | None = None,
               logit_bytes: float | None = None) -> MemoryUse:
    """Per-device bytes on each tier: footprint.training on `runtime` (None: the hardware's stack,
    Hierarchy.runtime) placed by the rules above; fits when every tier holds its share.
    logit_bytes: the framework's loss per logit (None: the runtime's)."""
    h = hierarchy(hw)
    rt = runtime or h.runtime
    f = footprint.training(spec, g, precision, rt, xp, acts=acts, stream_layer_params=sh.layer_params,
                           logit_bytes=logit_bytes)
    off = g.offload == OFF_OPTIMIZER
    opt = f.master + f.optimizer
    kinds = (f.weights, f.grads, xp.where(off, 0.0, opt))
    store = xp.where(off, opt, f.store)
    if h.store is None:  # weight streaming over the device's own memory (a CPU): all of it there
        W, G, O = (v / g.dp for v in model_state_bytes(spec, precision, rt))
        kinds = tuple(xp.where(g.streaming, a, b) for a, b in zip((f.weights + W, G, O), kinds))
        store = xp.where(g.streaming, 0.0, store)
    elif h.store_shared:  # one store for every device (MemoryX): the whole model state; where the
        # hardware skips zero weights, of the non-zero weights only ("for all zero weights, no
        # computation or memory is required": Cerebras docs, 'Sparsity'; step.streaming_step)
        nz = sh.kept_params(1.0 - g.sparsity) / sh.params if hw.skips_zero_weights else 1.0
        store = xp.where(g.streaming, nz * sum(model_state_bytes(spec, precision, rt)), store)
    peak = sum(kinds) + f.activations + f.logits + f.buffers
    cap_store = h.store.capacity_bytes if h.store is not None else 0.0
    fits = (peak <= h.resident.capacity_bytes) & (store <= cap_store)
    return MemoryUse(weights_bytes=kinds[0], grads_bytes=kinds[1], optimizer_bytes=kinds[2],
                     activations_bytes=f.activations + f.logits, peak_mem_bytes=peak, store_bytes=store,
                     fits=fits, resident_tier=h.resident.name, store_tier=h.store.name if h.store is not None else None)


def swarm_depth(devices, fanout: int, xp):
    """Levels of a broadcast / reduce tree of `fanout` over `devices` (0 for one device)."""
    d = xp.maximum(devices, 1.0)
    return xp.where(d > 1, xp.ceil(xp.log2(d) / math.log2(fanout) - 1e-9), 0.0)


def check_devices(hw, n: int, lay=None) -> None:
    """BadInput for a device count or a tp / pp the architecture does not have (a wafer cluster:
    at most its systems, strictly data parallel)."""
    h = hierarchy(hw)
    if lay is not None and h.kind == "wafer" and ((lay.tp or 1) > 1 or (lay.pp or 1) > 1):
        raise BadInput(f"{hw.name} trains strictly data parallel (weight streaming from MemoryX over SwarmX): "
                       "tensor and pipeline parallelism do not apply; leave --tp and --pp out")
    if h.max_devices and n > h.max_devices:
        raise BadInput(f"{hw.name}: a cluster runs at most {h.max_devices} systems data parallel "
                       f"({SWARMX.get(hw.name, WAFER_DEFAULT)[2]}); got --devices {n}")
