"""SwarmComm: data parallel the SwarmX way, over torch.distributed (gloo on CPU, NCCL on GPU).

    python -m torch.distributed.run --nproc-per-node 2 -m llmbench stream train --model tiny ...

Rank 0 owns the ParameterStore (MemoryX). For every layer of the schedule it broadcasts the
weights to all ranks (SwarmX's broadcast); each rank runs the layer on its own slice of the batch;
each layer's gradient is reduced (summed) to rank 0 and divided by the world size, and rank 0 runs
the store-side optimizer. No rank but 0 keeps any weight between uses. Two process groups keep the
loader thread's broadcasts and the main thread's reductions from interleaving.
"""
from __future__ import annotations

import torch
import torch.distributed as dist


class SwarmComm:
    def __init__(self, device: torch.device):
        if not dist.is_initialized():
            dist.init_process_group(backend="gloo" if device.type == "cpu" else "nccl")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        backend = dist.get_backend()
        self.bcast_pg = dist.new_group(backend=backend)
        self.reduce_pg = dist.new_group(backend=backend)
        self.device = device

    def broadcast(self, t: torch.Tensor) -> None:
        dist.broadcast(t, src=0, group=self.bcast_pg)

    def reduce_mean(self, t: torch.Tensor) -> torch.Tensor:
        """Sum `t` onto rank 0 and divide by the world size (each rank's loss is a mean over its
        slice, so the mean of the gradients is the gradient of the whole batch's mean loss)."""
        t = t.contiguous()
        dist.reduce(t, dst=0, group=self.reduce_pg)
        if self.rank == 0:
            t.div_(self.world)
        return t

    def mean_loss(self, loss: torch.Tensor) -> torch.Tensor:
        loss = loss.clone()
        dist.all_reduce(loss, group=self.reduce_pg)
        return loss / self.world

    def gather_objects(self, obj) -> list:
        out = [None] * self.world
        dist.all_gather_object(out, obj, group=self.reduce_pg)
        return out

    def barrier(self) -> None:
        dist.barrier(group=self.reduce_pg)

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
