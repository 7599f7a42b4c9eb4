"""The two trainers `stream compare` runs one after the other, the per-group initialiser they
share, the synthetic data and the device-memory estimate (llmbench/streaming/run.py drives them).

    groups = initial_groups(spec, seed=0)      # layout first, then one group at a time
    tr = StreamedTrainer(spec, cfg, device)    # ParameterStore + StreamingExecutor
    loss = tr.step(*make_batch(spec, 8, 64, 0, step=0))

Initial weights: each stream group (`ends`, `block.i`) is initialised on its own, from its own
seed (seed * 1,000,003 + group index), with the GPT-2 rule of `measure.modeling` (N(0, 0.02),
output projections scaled by 1/sqrt(2L)). So a model larger than RAM is written to its store one
group at a time, a pipeline stage builds only its own layers, and the resident reference gets the
very same weights.

Data: a synthetic, learnable token stream (a fixed random Markov chain: each token is followed by
`perm[token]` with probability 3/4, else by a uniform one), drawn from a generator seeded by
(seed, step), so a resumed run sees exactly the batches an uninterrupted one would, and data
parallel ranks take their rows of the same global batch.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from llmbench.streaming.config import StreamRun
from llmbench.streaming.executor import DTYPES, StreamingExecutor, group_params
from llmbench.streaming.precision import ELEMENT_BYTES, LossScale, needs_loss_scale
from llmbench.streaming.store import MEASURE_ADAMW, AdamConfig


# ---------------------------------------------------------------- initial weights

def group_module(skeleton: nn.Module, group: str) -> nn.Module:
    """The part of the model that holds a group's parameters, named as in the whole model."""
    if group == "ends":  # one deepcopy keeps the embedding and the LM head tied
        return copy.deepcopy(nn.ModuleDict({"embedding": skeleton.embedding,
                                            "head_module": skeleton.head_module}))
    i = int(group.split(".")[1])
    return nn.ModuleDict({"blocks": nn.ModuleDict({str(i): copy.deepcopy(skeleton.blocks[i])})})


def init_group(spec, seed: int, skeleton: nn.Module, group: str) -> dict[str, torch.Tensor]:
    """One group's initial fp32 weights on the CPU, {parameter name: tensor}, in group order."""
    from llmbench.measure.modeling import init_module_weights

    index = 0 if group == "ends" else int(group.split(".")[1]) + 1
    mod = group_module(skeleton, group).to_empty(device="cpu")
    if group == "ends" and spec.tied_embeddings:
        mod["head_module"].lm_head.weight = mod["embedding"].wte.weight
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed * 1_000_003 + index)
        init_module_weights(mod, spec)
    params = dict(mod.named_parameters())
    return {n: params[n].detach() for n in group_params(skeleton)[group]}


def initial_groups(spec, seed: int, skeleton: nn.Module | None = None):
    """The layout {group: {name: shape}}, then (group, {name: tensor}) for every group, one at a
    time (what ParameterStore.create takes)."""
    from llmbench.measure.modeling import build_model

    skel = skeleton if skeleton is not None else build_model(spec, meta=True)
    groups = group_params(skel)
    yield {g: {n: tuple(p.shape) for n, p in ps.items()} for g, ps in groups.items()}
    for g in groups:
        yield g, init_group(spec, seed, skel, g)


def make_batch(spec, batch: int, seq: int, seed: int, step: int, *, rank: int = 0, world: int = 1):
    """(idx, targets), each (batch, seq) int64: rank's rows of the global batch of step `step`."""
    V = spec.vocab_size
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(V, generator=g)
    g = torch.Generator().manual_seed(seed * 1_000_003 + step + 1)
    B = batch * world
    noise = torch.randint(0, V, (B, seq + 1), generator=g)
    keep = torch.rand(B, seq + 1, generator=g) < 0.75
    toks = torch.empty(B, seq + 1, dtype=torch.long)
    toks[:, 0] = noise[:, 0]
    for t in range(1, seq + 1):
        toks[:, t] = torch.where(keep[:, t], perm[toks[:, t - 1]], noise[:, t])
    toks = toks[rank * batch:(rank + 1) * batch]
    return toks[:, :-1].contiguous(), toks[:, 1:].contiguous()


# ---------------------------------------------------------------- memory

def device_bytes_estimate(spec, *, batch: int, seq: int, prefetch: int, recompute: bool = False,
                          precision: str = "fp32") -> dict:
    """What a streamed step holds on the device at its peak (footprint.streamed, "streamed")."""
    from llmbench.footprint import streamed

    f = streamed(spec, batch=batch, seq=seq, precision=precision, prefetch=prefetch, recompute=recompute)
    acts = int(f.activations + f.logits)
    return {"weights": int(f.weights), "gradients": int(f.grads), "activations": acts,
            "total": int(f.weights + f.grads) + acts, "store": int(f.store)}


def check_budget(estimate: dict, budget: int | None) -> None:
    from llmbench.errors import BadInput

    if budget is not None and estimate["total"] > budget:
        raise BadInput(f"does not fit: a streamed step needs ~{estimate['total']:,} bytes on the "
                       f"device (weights {estimate['weights']:,}, gradients {estimate['gradients']:,}, "
                       f"activations {estimate['activations']:,}), over --device-memory-budget "
                       f"{budget:,}; lower --batch, --seq or --prefetch")


def check_streamed_fits(spec, estimate: dict, cfg: StreamRun, device) -> None:
    """Refuse a streamed run whose step (and, on a CPU, its RAM store) cannot fit in the memory
    free on `device`, before allocating anything (BadInput)."""
    from llmbench.errors import BadInput

    store = estimate["store"] if device.type == "cpu" and cfg.store.kind == "ram" else 0
    free = free_memory_bytes(device)
    if free is not None and estimate["total"] + store > free:
        raise BadInput(f"stream training of {spec.name} cannot start: a step needs ~{estimate['total']:,} "
                       f"bytes on {device}{f' and its RAM store {store:,}' if store else ''}, over the "
                       f"{free:,} bytes free; lower --batch or --seq")


def resident_bytes_estimate(spec, *, batch: int, seq: int, precision: str = "fp32") -> dict:
    """What resident training holds (footprint.training on "masters", ResidentTrainer's STATE)."""
    from llmbench.footprint import one_device, training

    f = training(spec, one_device(batch, seq), precision, "masters")
    state, acts = int(f.state_bytes), int(f.activations + f.logits)
    return {"state": state, "activations": acts, "total": state + acts}


def free_memory_bytes(device) -> int | None:
    """Memory that can still be allocated on `device`: MemAvailable on the CPU, the driver's free
    bytes on an accelerator (None where unknown)."""
    from llmbench.measure.hostmem import available_bytes

    if device.type == "cpu":
        return available_bytes()
    mod = torch.get_device_module(device)
    return int(mod.mem_get_info(device)[0]) if hasattr(mod, "mem_get_info") else None


def check_resident_fits(spec, cfg: StreamRun, device) -> dict:
    """Refuse resident training that cannot fit, before allocating anything (BadInput)."""
    from llmbench.errors import BadInput

    need = resident_bytes_estimate(spec, batch=cfg.batch, seq=cfg.seq, precision=cfg.precision)
    free = free_memory_bytes(device)
    if free is not None and need["total"] > free:
        raise BadInput(f"resident training of {spec.name} cannot start: it needs ~{need['total']:,} "
                       f"bytes (state {need['state']:,}, activations {need['activations']:,}), over "
                       f"the {free:,} bytes free on {device}; stream it (llmbench stream train)")
    return need


# ---------------------------------------------------------------- trainers

def loss_scale_of(cfg: StreamRun) -> LossScale | None:
    if not needs_loss_scale(cfg.precision):
        return None
    return LossScale(scale=cfg.loss_scale_init, growth_interval=cfg.loss_scale_growth_interval)


def load_initial(model, spec, seed: int) -> None:
    """Copy the initial weights the streamed runs start from (initial_groups) into a resident model."""
    params = dict(model.named_parameters())
    groups = initial_groups(spec, seed)
    next(groups)
    with torch.no_grad():
        for _, tensors in groups:
            for name, t in tensors.items():
                params[name].copy_(t)


class ResidentTrainer:
    """The reference: the whole model on the device, torch.optim.AdamW, same init and data, and
    the same precision policy: fp32; or bf16/fp16 weights with fp32 master copies that AdamW
    updates from the upcast gradients, fp16 through torch.amp.GradScaler itself."""

    def __init__(self, spec, cfg: StreamRun, device):
        from llmbench.measure.modeling import build_model

        check_resident_fits(spec, cfg, device)
        self.model = build_model(spec, meta=True).to_empty(device=device)
        load_initial(self.model, spec, cfg.seed)
        self.mixed = cfg.precision != "fp32"
        self.params = list(self.model.parameters())
        self.masters = self.params
        if self.mixed:
            self.masters = [p.detach().clone().requires_grad_(True) for p in self.params]
            self.model.to(DTYPES[cfg.precision])
            self.params = list(self.model.parameters())
        a = AdamConfig(lr=cfg.lr, **MEASURE_ADAMW)  # the store's optimizer
        self.opt = torch.optim.AdamW(self.masters, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                                     weight_decay=a.weight_decay)
        self.scaler = None
        if needs_loss_scale(cfg.precision):
            self.scaler = torch.amp.GradScaler(device.type, init_scale=cfg.loss_scale_init,
                                               growth_interval=cfg.loss_scale_growth_interval)
        self.device = device
        self.skipped_steps = 0

    @property
    def state_bytes(self) -> int:
        """weights, gradients, Adam moments (and fp32 masters with their gradients)"""
        n = sum(p.numel() for p in self.masters)
        own = sum(p.numel() * p.element_size() for p in self.params)
        return 2 * own + (8 * n if self.mixed else 0) + 8 * n

    def step(self, idx, targets) -> float:
        _, loss = self.model(idx.to(self.device), targets.to(self.device))
        self.opt.zero_grad(set_to_none=True)
        self.model.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        if self.mixed:
            for m, p in zip(self.masters, self.params):
                m.grad = p.grad.float()
        if self.scaler is not None:
            before = self.scaler.get_scale()
            self.scaler.step(self.opt)
            self.scaler.update()
            self.skipped_steps += self.scaler.get_scale() < before
        else:
            self.opt.step()
        if self.mixed:
            with torch.no_grad():
                for m, p in zip(self.masters, self.params):
                    p.copy_(m)
        return float(loss.detach())


class StreamedTrainer:
    """ParameterStore + StreamingExecutor (+ SwarmComm under torchrun)."""

    def __init__(self, spec, cfg: StreamRun, device, comm=None):
        from llmbench.measure.modeling import build_model

        self.skeleton = build_model(spec, meta=True)
        groups = group_params(self.skeleton)
        self.numel = {g: sum(p.numel() for p in ps.values()) for g, ps in groups.items()}
        self.estimate = device_bytes_estimate(spec, batch=cfg.batch, seq=cfg.seq, prefetch=cfg.prefetch,
                                              recompute=cfg.recompute, precision=cfg.precision)
        check_budget(self.estimate, cfg.device_memory_budget_bytes)
        check_streamed_fits(spec, self.estimate, cfg, device)
        self.store = None
        if comm is None or comm.rank == 0:
            world = comm.world if comm is not None else 1
            self.store = _open_store(spec, cfg, device, self.skeleton, world)
        try:
            acts = self.estimate["activations"]
            budget = cfg.device_memory_budget_bytes
            self.ex = StreamingExecutor(self.skeleton, self.store, device=device, prefetch=cfg.prefetch,
                                        comm=comm, budget_bytes=None if budget is None else budget - acts,
                                        record_digests=cfg.check_ranks, recompute=cfg.recompute,
                                        precision=cfg.precision)
        except BaseException:
            self.close()
            raise
        self.device = device

    @property
    def start_step(self) -> int:
        return self.store.step if self.store is not None else 0

    def step(self, idx, targets) -> float:
        return self.ex.train_step(idx.to(self.device), targets.to(self.device))

    def close(self) -> None:
        if getattr(self, "ex", None) is not None:
            self.ex.close()
        if self.store is not None:
            self.store.close()


def _open_store(spec, cfg: StreamRun, device, skeleton, world: int):
    """Rank 0's store: resumed (same run only), or created one group at a time from the seed."""
    from llmbench.errors import BadInput
    from llmbench.streaming.store import ParameterStore

    meta = {"model": spec.to_dict(), "batch": cfg.batch, "seq": cfg.seq, "seed": cfg.seed,
            "sparsity": cfg.sparsity, "lr": cfg.lr, "world": world, "precision": cfg.precision}
    pin = device.type != "cpu"
    if cfg.resume:
        store = ParameterStore.open(cfg.store, pin_memory=pin)
        if store.meta != meta:
            store.close()
            raise BadInput(f"--resume: the store at {cfg.store.path} was made for another run "
                           "(model, batch, seq, seed, sparsity, lr, precision or ranks differ)")
        return store
    groups = initial_groups(spec, cfg.seed, skeleton)
    masks = None
    if cfg.sparsity > 0:  # magnitude masks need the initial weights: small models only
        from llmbench.streaming.sparse import magnitude_masks

        layout = next(groups)
        tensors = dict(groups)
        masks = magnitude_masks(tensors, cfg.sparsity)
        groups = iter([layout, *tensors.items()])
    return ParameterStore.create(cfg.store, groups, adam=AdamConfig(lr=cfg.lr, **MEASURE_ADAMW), masks=masks,
                                 meta=meta, pin_memory=pin, loss_scale=loss_scale_of(cfg),
                                 overwrite=cfg.overwrite)
