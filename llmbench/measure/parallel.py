"""Lay a model out over devices from the outside: DDP, ZeRO-1, FSDP2, tensor parallel, 2-D TP x FSDP,
activation checkpointing, torch.compile (the order and the calls follow torchtitan's parallelize.py).

    torchrun --nproc-per-node 2 -m llmbench.measure.parallel_train --model gpt2-small --zero 3 --tp 1

    layout = ParallelLayout(tp=2, zero=3, recompute="full")
    mesh = build_mesh(layout, world=4, device=device)          # ("dp", "tp") = (2, 2)
    net = parallelize(model, layout, mesh, precision="bf16")   # model from modeling.build_model

`zero` maps the ZeRO stages onto what torch has: 0 DDP, 1 DDP + ZeroRedundancyOptimizer (optimizer
state sharded), 2 FSDP2 with reshard_after_forward=False (weights stay gathered from forward to
backward: the ZeRO-2 analogue), 3 FSDP2 with reshard_after_forward=True (ZeRO-3). Tensor parallel
splits the attention heads (qkv column-parallel, output projection row-parallel) and the MLP
(fc column-parallel, proj row-parallel) as Megatron-LM does (Shoeybi et al. 2019, arXiv:1909.08053,
Sec. 3); embeddings, norms and the LM head stay replicated over the TP group. Nothing here runs a
collective by hand: DistributedDataParallel, fully_shard and DTensor do.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from llmbench.errors import BadInput
from llmbench.layouts import capability
from llmbench.measure import device as dev

RECOMPUTE = capability("measure.train").knobs["recompute"]


@dataclass(frozen=True, kw_only=True)
class ParallelLayout:
    """How one training job is laid out over the processes torchrun started."""

    tp: int = 1
    """tensor-parallel degree; the data-parallel degree is world / tp"""
    zero: int = 0
    """0 DDP, 1 DDP + sharded optimizer state, 2 FSDP2 without reshard after forward, 3 FSDP2"""
    recompute: str = "none"
    """activation checkpointing per block: none | selective (the attention core) | full (the block)"""
    micro_batch: int | None = None
    """sequences per data-parallel replica per micro-step (None: batch / (dp x grad_accum))"""
    grad_accum: int | None = None
    """micro-steps per optimizer step (None: batch / (dp x micro_batch), else 1)"""
    compile: bool = False
    """torch.compile each block (after checkpointing, before FSDP, as torchtitan)"""
    compile_backend: str = "inductor"
    """torch.compile backend ('aot_eager' compiles fast: the CPU tests use it)"""

    def __post_init__(self):
        if self.tp < 1:
            raise BadInput(f"--tp must be at least 1, got {self.tp}")
        cap = capability("measure.train")
        if self.zero not in cap.knobs["zero"]:
            raise BadInput(f"--zero must be one of {', '.join(map(str, cap.knobs['zero']))}, got {self.zero}")
        if self.recompute not in RECOMPUTE:
            raise BadInput(f"--recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        for name in ("micro_batch", "grad_accum"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise BadInput(f"--{name.replace('_', '-')} must be at least 1, got {value}")

    @property
    def fsdp(self) -> bool:
        return self.zero >= 2

    @property
    def reshard_after_forward(self) -> bool:
        return self.zero == 3

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class BatchPlan:
    """The global batch split over replicas and micro-steps: batch = micro_batch x grad_accum x dp."""

    dp: int
    """data-parallel replicas (world / tp)"""
    micro_batch: int
    """sequences per replica per micro-step"""
    grad_accum: int
    """micro-steps per optimizer step"""


def plan_batch(layout: ParallelLayout, world: int, batch: int) -> BatchPlan:
    """Check that the layout fits `world` processes and the global batch; fill in the knob left out."""
    if world % layout.tp:
        raise BadInput(f"--tp {layout.tp} does not divide the {world} processes")
    dp = world // layout.tp
    mb, ga = layout.micro_batch, layout.grad_accum
    if mb is None:
        ga = ga or 1
        if batch % (dp * ga):
            raise BadInput(f"--batch {batch} is not a multiple of {dp} replicas x grad_accum {ga}")
        mb = batch // (dp * ga)
    elif ga is None:
        if batch % (dp * mb):
            raise BadInput(f"--batch {batch} is not a multiple of {dp} replicas x micro_batch {mb}")
        ga = batch // (dp * mb)
    elif mb * ga * dp != batch:
        raise BadInput(f"--batch {batch} is not micro_batch {mb} x grad_accum {ga} x {dp} replicas")
    return BatchPlan(dp=dp, micro_batch=mb, grad_accum=ga)


def check_layout(spec, layout: ParallelLayout, plan: BatchPlan) -> None:
    """What the model's shape and torch allow; one BadInput line naming the option."""
    tp = layout.tp
    if tp > 1 and (spec.is_moe or spec.is_mla):
        raise BadInput(f"--tp {tp}: tensor parallelism of {'MoE experts' if spec.is_moe else 'MLA'} "
                       "is not built; use --zero 2/3 (FSDP2) for this model")
    for name, size in (("n_heads", spec.n_heads), ("n_kv_heads", spec.n_kv_heads), ("d_ff", spec.d_ff)):
        if size % tp:
            raise BadInput(f"--tp {tp} does not divide the model's {name} ({size})")
    if tp > 1 and plan.dp > 1 and layout.zero < 2:
        raise BadInput(f"--tp {tp} with {plan.dp} data-parallel replicas needs --zero 2 or 3 "
                       "(TP x FSDP2); DDP over a tensor-parallel model is not supported")


def build_mesh(layout: ParallelLayout, world: int, device: torch.device):
    """A DeviceMesh ("dp", "tp") when tensor parallel, ("dp",) when data parallel, None alone."""
    from torch.distributed.device_mesh import init_device_mesh
    if world == 1 and layout.tp == 1 and not layout.fsdp:
        return None
    if layout.tp > 1:
        return init_device_mesh(device.type, (world // layout.tp, layout.tp), mesh_dim_names=("dp", "tp"))
    return init_device_mesh(device.type, (world,), mesh_dim_names=("dp",))


def _submesh(mesh, name: str):
    if mesh is None or name not in (mesh.mesh_dim_names or ()):
        return None
    return mesh[name]


def parallelize(model: nn.Module, layout: ParallelLayout, mesh, *, precision: str = "fp32") -> nn.Module:
    """Apply the layout to a model from modeling.build_model, in torchtitan's order: TP, activation
    checkpointing, compile, then FSDP2 or DDP. Returns the module to call (the model itself under
    FSDP2, which shards in place; a DDP wrapper for zero 0/1 with several replicas)."""
    tp_mesh, dp_mesh = _submesh(mesh, "tp"), _submesh(mesh, "dp")
    if tp_mesh is not None and tp_mesh.size() > 1:
        apply_tp(model, tp_mesh)
    if layout.recompute != "none":
        apply_checkpointing(model, layout.recompute)
    if layout.compile:
        for i, block in enumerate(model.blocks):
            model.blocks[i] = torch.compile(block, backend=layout.compile_backend)
    if layout.fsdp:
        apply_fsdp(model, dp_mesh, reshard_after_forward=layout.reshard_after_forward, precision=precision)
        return model
    if dp_mesh is not None and dp_mesh.size() > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        device = next(model.parameters()).device
        return DDP(model, device_ids=[device.index] if dev.is_accelerator(device) else None,
                   process_group=dp_mesh.get_group())
    return model


# ---------------------------------------------------------------- tensor parallel

def rank_major_rows(sizes: tuple[int, ...], tp: int) -> torch.Tensor:
    """Row order that puts each rank's slice of every fused piece side by side.

    A fused weight stacks pieces (q | k | v, or gate | up) along its rows; ColwiseParallel gives
    rank r the r-th contiguous chunk. Reordered to (q_0 k_0 v_0 | q_1 k_1 v_1 | ...), that chunk is
    exactly rank r's heads of q, k and v (gpt-fast's tp.py splits and re-fuses wqkv the same way)."""
    starts = torch.tensor((0,) + sizes[:-1]).cumsum(0).tolist()
    per_rank = [torch.arange(s, s + n).view(tp, n // tp) for s, n in zip(starts, sizes)]
    return torch.cat(per_rank, dim=1).reshape(-1)


@torch.no_grad()
def _reorder_rows(linear: nn.Linear, order: torch.Tensor) -> None:
    linear.weight.copy_(linear.weight[order.to(linear.weight.device)])
    if linear.bias is not None:
        linear.bias.copy_(linear.bias[order.to(linear.bias.device)])


def apply_tp(model: nn.Module, tp_mesh) -> None:
    """Megatron-style TP on every block: qkv and fc column-parallel, both projections row-parallel
    (one all-reduce after attention and one after the MLP in forward, the same in backward)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    tp = tp_mesh.size()
    for block in model.blocks:
        attn = block.attn
        hd = attn.d_head
        _reorder_rows(attn.qkv, rank_major_rows((attn.n_heads * hd, attn.n_kv_heads * hd,
                                                 attn.n_kv_heads * hd), tp))
        # Attention.forward reshapes its output to (B, T, heads x d_head): with this rank's share
        # of the heads it runs unchanged (as gpt-fast's tp.py sets n_head / n_local_heads)
        attn.n_heads, attn.n_kv_heads = attn.n_heads // tp, attn.n_kv_heads // tp
        if block.mlp.gated:  # fused gate | up: each rank must hold its gate and its up rows
            f = block.mlp.proj.in_features
            _reorder_rows(block.mlp.fc, rank_major_rows((f, f), tp))
        parallelize_module(block, tp_mesh, {
            "attn.qkv": ColwiseParallel(), "attn.proj": RowwiseParallel(),
            "mlp.fc": ColwiseParallel(), "mlp.proj": RowwiseParallel()})


# ---------------------------------------------------------------- activation checkpointing

def _matmul_ops() -> set:
    """The linear layers' matmuls (a Linear on (B, T, C) input is one mm or addmm)."""
    aten = torch.ops.aten
    return {aten.mm.default, aten.addmm.default}


def selective_context_fn():
    """Selective recomputation: torch's op-level selective checkpointing saves the output of every
    linear layer's matmul and recomputes everything else in backward: the attention core (the SDPA
    kernel, or its bmm/softmax on the math path: the recomputation of Korthikanti et al. 2022,
    arXiv:2205.05198, Sec. 4.2, which `counting.training_flops(recompute="selective")` counts) and
    the cheap element-wise ops (norms, activations, rotary, residual adds; a few FLOPs per element).
    Saving those too would be closer to the paper, but a decomposed norm updates its statistics in
    place (RMSNorm on the CPU: mean, then add_ eps), which selective checkpointing must not cache.
    torchtitan's "op" policy differs in keeping the SDPA output (and every other matmul)."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    saved = _matmul_ops()

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def apply_checkpointing(model: nn.Module, recompute: str) -> None:
    """Wrap every block in a non-reentrant checkpoint: full keeps only the block's input and
    recomputes its whole forward in backward; selective also keeps the matmul outputs."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    kwargs = {"context_fn": selective_context_fn} if recompute == "selective" else {}
    for i, block in enumerate(model.blocks):
        model.blocks[i] = checkpoint_wrapper(block, preserve_rng_state=False, **kwargs)


# ---------------------------------------------------------------- FSDP2

def mixed_precision_policy(precision: str):
    """bf16/fp16 compute with fp32 master weights (the sharded parameters) and fp32 gradient
    reduction; fp32/tf32 compute in fp32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    if precision in ("bf16", "fp16"):
        return MixedPrecisionPolicy(param_dtype=dev.dtype_of(precision), reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def apply_fsdp(model: nn.Module, dp_mesh, *, reshard_after_forward: bool, precision: str) -> None:
    """fully_shard each block, then the root (embeddings, final norm, head). The last block is not
    resharded after forward: backward needs it at once (torchtitan does the same)."""
    from torch.distributed.fsdp import fully_shard
    mp = mixed_precision_policy(precision)
    last = len(model.blocks) - 1
    for i, block in enumerate(model.blocks):
        fully_shard(block, mesh=dp_mesh, reshard_after_forward=reshard_after_forward and i < last,
                    mp_policy=mp)
    fully_shard(model, mesh=dp_mesh, reshard_after_forward=reshard_after_forward, mp_policy=mp)
