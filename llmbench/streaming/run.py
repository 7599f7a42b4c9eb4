"""Set-up and loops of `llmbench stream train` and `llmbench stream compare`.

    llmbench stream train --model tiny --batch 8 --seq 64 --steps 20 --store disk:/tmp/st --json
    llmbench stream compare --model tiny --layers 4 --width 256 --batch 8 --seq 256 --steps 6 --json
    python -m torch.distributed.run --nproc-per-node 2 -m llmbench stream train --model tiny ...

Data: a synthetic, learnable token stream (a fixed random Markov chain: each token is followed by
`perm[token]` with probability 3/4, else by a uniform one), drawn from a generator seeded by
(seed, step), so a resumed run sees exactly the batches an uninterrupted one would, and data
parallel ranks take their rows of the same global batch.
"""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, fields

import torch

TINY = dict(n_layers=4, d_model=64, n_heads=4, n_kv_heads=0, d_ff=0, vocab_size=256, max_seq_len=128)


@dataclass(frozen=True, kw_only=True)
class StreamConfig:
    model: str = "tiny"
    """a preset name, or `tiny` (GPT-2 shape, 4 layers, width 64, vocab 256)"""
    layers: int | None = None
    """override n_layers"""
    width: int | None = None
    """override d_model (d_ff becomes 4 x width)"""
    heads: int | None = None
    """override n_heads"""
    vocab: int | None = None
    """override vocab_size"""
    batch: int = 8
    """sequences per step per rank"""
    seq: int = 64
    """tokens per sequence"""
    steps: int = 20
    """total optimizer steps (a resumed run continues up to this step)"""
    store: str = "ram"
    """ram | disk:PATH"""
    device: str = "cpu"
    """cpu | cuda | cuda:1 | auto ... (llmbench.measure.device.resolve)"""
    prefetch: int = 1
    """layers loaded ahead of the one computing"""
    sparsity: float = 0.0
    """fraction of each weight matrix pruned by magnitude at step 0 (and kept at zero)"""
    device_memory_budget: int | None = None
    """bytes the run may use on the device (weights, gradients, activations), None: no limit"""
    resume: bool = False
    """continue from the disk store's last committed step"""
    recompute: bool = False
    """keep only each block's input on the device; recompute the block's forward in the backward"""
    lr: float = 1e-3
    seed: int = 0
    warmup_steps: int = 1
    """steps excluded from tokens_per_s (reported as warmup_s)"""
    check_ranks: bool = False
    """data parallel: hash every layer's weights on every rank, every step"""

    def __post_init__(self) -> None:
        for name in ("batch", "seq", "steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.prefetch < 0:
            raise ValueError(f"--prefetch must be >= 0, got {self.prefetch}")
        if not 0.0 <= self.sparsity < 1.0:
            raise ValueError(f"--sparsity must be in [0, 1), got {self.sparsity}")
        if self.device_memory_budget is not None and self.device_memory_budget <= 0:
            raise ValueError("--device-memory-budget must be a positive number of bytes")
        from llmbench.streaming.store import parse_tier

        parse_tier(self.store)
        if self.resume and not self.store.startswith("disk:"):
            raise ValueError("--resume needs a disk store (--store disk:PATH)")


DEFAULTS = {f.name: f.default for f in fields(StreamConfig)}


def resolve_spec(cfg: StreamConfig):
    """The ModelSpec of `--model` with the `--layers/--width/--heads/--vocab` overrides."""
    from llmbench.models import get_model

    if cfg.model == "tiny":
        spec = get_model("gpt2-small").with_(name="tiny", **TINY)
    else:
        spec = get_model(cfg.model)
    changes = {}
    if cfg.layers is not None:
        changes["n_layers"] = cfg.layers
    if cfg.width is not None:
        changes.update(d_model=cfg.width, d_ff=0)
    if cfg.heads is not None:
        changes["n_heads"] = cfg.heads
        changes["n_kv_heads"] = 0
    if cfg.vocab is not None:
        changes["vocab_size"] = cfg.vocab
    if cfg.seq > spec.max_seq_len:
        if spec.position == "learned" and cfg.model != "tiny":
            raise ValueError(f"--seq {cfg.seq} exceeds {spec.name}'s max_seq_len {spec.max_seq_len}")
        changes["max_seq_len"] = cfg.seq
    if spec.head != "lm":
        raise ValueError(f"stream trains causal LMs; {spec.name} has a {spec.head!r} head")
    return spec.with_(**changes) if changes else spec


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

def device_bytes_estimate(spec, numel: dict[str, int], *, batch: int, seq: int, prefetch: int,
                          recompute: bool = False) -> dict:
    """What a streamed step holds on the device at its peak: the ends (embeddings + head) and up
    to prefetch + 1 blocks of fp32 weights, their gradients, and every layer's activations."""
    from llmbench.models.counting import activation_bytes_per_layer

    L = spec.n_layers
    block = max(numel[f"block.{i}"] for i in range(L)) * 4
    ends = numel["ends"] * 4
    weights = ends + min(prefetch + 1, L) * block
    grads = ends + block
    acts = activation_bytes_per_layer(spec, batch, seq, "fp32", "none") * L
    if recompute:  # every block's input, plus one block's activations while it is recomputed
        acts = (activation_bytes_per_layer(spec, batch, seq, "fp32", "full") * L
                + activation_bytes_per_layer(spec, batch, seq, "fp32", "none"))
    acts += 3 * batch * seq * spec.vocab_size * 4  # logits, their softmax and gradient (fp32)
    return {"weights": weights, "gradients": grads, "activations": int(acts),
            "total": int(weights + grads + acts)}


def check_budget(estimate: dict, budget: int | None) -> None:
    if budget is not None and estimate["total"] > budget:
        raise ValueError(f"does not fit: a streamed step needs ~{estimate['total']:,} bytes on the "
                         f"device (weights {estimate['weights']:,}, gradients {estimate['gradients']:,}, "
                         f"activations {estimate['activations']:,}), over --device-memory-budget "
                         f"{budget:,}; lower --batch, --seq or --prefetch")


# ---------------------------------------------------------------- trainers

class ResidentTrainer:
    """The reference: the whole model on the device, torch.optim.AdamW, same init and data."""

    def __init__(self, spec, cfg: StreamConfig, device, init_state: dict):
        from llmbench.measure.modeling import build_model

        self.model = build_model(spec, meta=True).to_empty(device=device)
        self.model.load_state_dict(init_state)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr)
        self.device = device

    def step(self, idx, targets) -> float:
        _, loss = self.model(idx.to(self.device), targets.to(self.device))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return float(loss.detach())


class StreamedTrainer:
    """ParameterStore + StreamingExecutor (+ SwarmComm under torchrun)."""

    def __init__(self, spec, cfg: StreamConfig, device, init_state: dict | None = None, comm=None):
        from llmbench.measure.modeling import build_model
        from llmbench.streaming.executor import StreamingExecutor, group_params
        from llmbench.streaming.store import AdamConfig, ParameterStore

        self.skeleton = build_model(spec, meta=True)
        groups = group_params(self.skeleton)
        self.numel = {g: sum(p.numel() for p in ps.values()) for g, ps in groups.items()}
        self.estimate = device_bytes_estimate(spec, self.numel, batch=cfg.batch, seq=cfg.seq,
                                              prefetch=cfg.prefetch, recompute=cfg.recompute)
        check_budget(self.estimate, cfg.device_memory_budget)
        world = comm.world if comm is not None else 1
        meta = {"model": spec.to_dict(), "batch": cfg.batch, "seq": cfg.seq, "seed": cfg.seed,
                "sparsity": cfg.sparsity, "lr": cfg.lr, "world": world}
        self.store = None
        pin = device.type != "cpu"
        if comm is None or comm.rank == 0:
            if cfg.resume:
                self.store = ParameterStore.open(cfg.store, pin_memory=pin)
                if self.store.meta != meta:
                    raise ValueError(f"--resume: the store at {cfg.store[5:]} was made for another "
                                     "run (model, batch, seq, seed, sparsity, lr or ranks differ)")
            else:
                if init_state is None:
                    init_state = initial_state(spec, cfg.seed)
                tensors = {g: {n: init_state[n] for n in ps} for g, ps in groups.items()}
                masks = None
                if cfg.sparsity > 0:
                    from llmbench.streaming.sparse import magnitude_masks
                    masks = magnitude_masks(tensors, cfg.sparsity)
                self.store = ParameterStore.create(cfg.store, tensors, adam=AdamConfig(lr=cfg.lr),
                                                   masks=masks, meta=meta, pin_memory=pin)
        acts = self.estimate["activations"]
        budget = None if cfg.device_memory_budget is None else cfg.device_memory_budget - acts
        self.ex = StreamingExecutor(self.skeleton, self.store, device=device, prefetch=cfg.prefetch,
                                    comm=comm, budget_bytes=budget, record_digests=cfg.check_ranks,
                                    recompute=cfg.recompute)
        self.device = device

    @property
    def start_step(self) -> int:
        return self.store.step if self.store is not None else 0

    def step(self, idx, targets) -> float:
        return self.ex.train_step(idx.to(self.device), targets.to(self.device))

    def close(self) -> None:
        self.ex.close()


def initial_state(spec, seed: int) -> dict:
    """The model's initial weights (fp32, CPU) for `seed`: one build, shared by both trainers."""
    from llmbench.measure.modeling import build_model

    torch.manual_seed(seed)
    return {k: v.detach() for k, v in build_model(spec).state_dict().items()}


def _timed(fn, device):
    from llmbench.measure import device as dev

    dev.synchronize(device)
    t0 = time.perf_counter()
    out = fn()
    dev.synchronize(device)
    return out, time.perf_counter() - t0


def _throughput(times: list[float], tokens: int, warmup: int) -> tuple[float, float]:
    """tokens/s and step time from the median step after the warm-up (robust to other load)"""
    timed = times[warmup:] if len(times) > warmup else times
    step_s = statistics.median(timed)
    return tokens / step_s, step_s


# ---------------------------------------------------------------- commands

def run_train(cfg: StreamConfig) -> dict:
    from llmbench.measure import device as dev
    from llmbench.models.counting import param_count

    spec = resolve_spec(cfg)
    comm, rank, world = None, 0, int(os.environ.get("WORLD_SIZE", "1"))
    device = dev.resolve(cfg.device)
    if world > 1:
        from llmbench.streaming.comm import SwarmComm

        if device.type != "cpu":
            device = dev.resolve(f"{device.type}:{int(os.environ.get('LOCAL_RANK', '0'))}")
            dev.set_device(device)
        comm = SwarmComm(device)
        rank = comm.rank
    tr = StreamedTrainer(spec, cfg, device, comm=comm)
    try:
        losses, times, digests = _train_loop(tr, spec, cfg, rank, world, comm)
    finally:
        tr.close()
    out = _train_metrics(tr, spec, cfg, losses, times, world, device, param_count(spec))
    if comm is not None and cfg.check_ranks:
        per_rank = comm.gather_objects(digests)
        out["rank_digests"] = per_rank
        out["ranks_identical"] = all(d == per_rank[0] for d in per_rank)
    if comm is not None:
        comm.close()
    out["rank"] = rank
    return out


def _train_loop(tr, spec, cfg, rank, world, comm):
    start = tr.start_step
    if comm is not None:  # every rank starts where the owner's store is
        start = comm.gather_objects(start)[0]
    losses, times, digests = [], [], []
    for step in range(start, cfg.steps):
        idx, tgt = make_batch(spec, cfg.batch, cfg.seq, cfg.seed, step, rank=rank, world=world)
        tr.ex.digests = []
        loss, dt = _timed(lambda: tr.step(idx, tgt), tr.device)
        losses.append(loss)
        times.append(dt)
        digests.append(tr.ex.digests)
    return losses, times, digests


def _train_metrics(tr, spec, cfg, losses, times, world, device, params) -> dict:
    n = max(len(times), 1)
    st = tr.ex.stats
    tokens = cfg.batch * cfg.seq * world
    tps, step_s = _throughput(times, tokens, cfg.warmup_steps) if times else (0.0, 0.0)
    L, numel = spec.n_layers, tr.numel
    block_bytes = max(numel[f"block.{i}"] for i in range(L)) * 4
    # weights in: ends once, blocks forward and backward but the last (kept across the turn);
    # gradients out: every group once
    dense = 4 * (numel["ends"] * 2 + sum(numel[f"block.{i}"] for i in range(L)) * 3
                 - numel[f"block.{L - 1}"])
    streamed = (st["weight_bytes_in"] + st["grad_bytes_out"]) / n
    store = tr.store
    return {
        "model": spec.name, "params": params, "n_layers": L, "d_model": spec.d_model,
        "batch": cfg.batch, "seq": cfg.seq, "world_size": world, "tokens_per_step": tokens,
        "device": str(device), "store": cfg.store, "prefetch": cfg.prefetch, "sparsity": cfg.sparsity,
        "recompute": cfg.recompute,
        "start_step": (store.step - len(losses)) if store is not None else 0,
        "steps": cfg.steps, "tokens_per_s": tps, "step_time_s": step_s,
        "warmup_s": sum(times[:cfg.warmup_steps]) if len(times) > cfg.warmup_steps else 0.0,
        "loss": store.losses if store is not None and store.kind == "disk" else losses,
        "streamed_bytes_per_step": streamed,
        "weight_bytes_in_per_step": st["weight_bytes_in"] / n,
        "grad_bytes_out_per_step": st["grad_bytes_out"] / n,
        "dense_streamed_bytes_per_step": dense, "streamed_fraction_of_dense": streamed / dense,
        "exposed_stream_s_per_step": st["stream_wait_s"] / n,
        "exposed_optimizer_s_per_step": st["optimizer_wait_s"] / n,
        "optimizer_s_per_step": st["optimizer_busy_s"] / n,
        "device_weight_bytes_peak": tr.ex.account.weight_bytes_peak,
        "device_grad_bytes_peak": tr.ex.account.grad_bytes_peak,
        "layer_weight_bytes": block_bytes, "embedding_weight_bytes": numel["ends"] * 4,
        "device_bytes_estimate": tr.estimate["total"],
        "device_memory_budget_bytes": cfg.device_memory_budget,
        "weights_and_adam_bytes": params * 12,
        "store_bytes": store.nbytes if store is not None else 0,
    }


def run_compare(cfg: StreamConfig) -> dict:
    """Resident and streamed training of the same model, same seed and data, in one process; the
    steps alternate (resident, streamed, resident, ...) so both see the same machine load."""
    from llmbench.measure import device as dev

    if cfg.store != "ram" or cfg.resume:
        raise ValueError("stream compare uses a RAM store and no --resume")
    spec = resolve_spec(cfg)
    device = dev.resolve(cfg.device)
    init = initial_state(spec, cfg.seed)
    res = ResidentTrainer(spec, cfg, device, init)
    st = StreamedTrainer(spec, cfg, device, init_state=init)
    lr_, ls_, tr_, ts_ = [], [], [], []
    try:
        for step in range(cfg.steps):
            idx, tgt = make_batch(spec, cfg.batch, cfg.seq, cfg.seed, step)
            loss, dt = _timed(lambda: res.step(idx, tgt), device)
            lr_.append(loss)
            tr_.append(dt)
            loss, dt = _timed(lambda: st.step(idx, tgt), device)
            ls_.append(loss)
            ts_.append(dt)
    finally:
        st.close()
    tokens = cfg.batch * cfg.seq
    r_tps, r_step = _throughput(tr_, tokens, cfg.warmup_steps)
    s_tps, s_step = _throughput(ts_, tokens, cfg.warmup_steps)
    w = cfg.warmup_steps if cfg.steps > cfg.warmup_steps else 0
    # other work on the machine slows steps at random: the ratio is the median over adjacent
    # (resident, streamed) step pairs, robust to load that drifts; tokens/s use median step times
    ratio = statistics.median(a / b for a, b in zip(tr_[w:], ts_[w:]))
    extra_s = statistics.median(b - a for a, b in zip(tr_[w:], ts_[w:]))
    rel = [abs(a - b) / abs(a) for a, b in zip(lr_, ls_)]
    L = spec.n_layers
    return {
        "model": spec.name, "n_layers": L, "d_model": spec.d_model, "batch": cfg.batch,
        "seq": cfg.seq, "steps": cfg.steps, "tokens_per_step": tokens, "device": str(device),
        "prefetch": cfg.prefetch, "recompute": cfg.recompute,
        "resident_tokens_per_s": r_tps, "streamed_tokens_per_s": s_tps, "ratio": ratio,
        # the ratio of the two medians above; `ratio` (median of per-pair ratios) is the robust one,
        # they differ when load changes between steps (few steps on a busy machine)
        "ratio_of_tokens_per_s": s_tps / r_tps,
        "resident_step_s": r_step, "streamed_step_s": s_step, "streamed_extra_s_per_step": extra_s,
        # the fastest step of each: the least disturbed by other load on a shared machine
        "resident_step_min_s": min(tr_[w:]), "streamed_step_min_s": min(ts_[w:]),
        "ratio_of_min_steps": min(tr_[w:]) / min(ts_[w:]),
        "resident_step_times_s": tr_, "streamed_step_times_s": ts_,
        "resident_loss": lr_, "streamed_loss": ls_, "max_rel_loss_diff": max(rel),
        "device_weight_bytes_peak": st.ex.account.weight_bytes_peak,
        "layer_weight_bytes": max(st.numel[f"block.{i}"] for i in range(L)) * 4,
        "embedding_weight_bytes": st.numel["ends"] * 4,
        "exposed_stream_s_per_step": st.ex.stats["stream_wait_s"] / cfg.steps,
        "exposed_optimizer_s_per_step": st.ex.stats["optimizer_wait_s"] / cfg.steps,
    }


def record(db_path: str, suite: str, cfg: StreamConfig, out: dict) -> str:
    """Store a stream result as a `measured` point in the results database (llmbench.results)."""
    from llmbench.measure import device as dev
    from llmbench.results.store import ResultsDB

    device = dev.resolve(out["device"])
    point = {"suite": suite, "model": out["model"], "hardware": dev.profile_name(device),
             "n_layers": out["n_layers"], "d_model": out["d_model"], "batch": cfg.batch,
             "seq": cfg.seq, "precision": "fp32", "mode": "weight_streaming",
             "prefetch": cfg.prefetch, "recompute": cfg.recompute, "sparsity": cfg.sparsity,
             "store": cfg.store.split(":")[0], "world_size": out.get("world_size", 1)}
    metrics = {k: v for k, v in out.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in point}
    metrics["loss"] = out.get("loss") or out.get("streamed_loss")
    with ResultsDB(db_path) as db:
        return db.record(point, metrics=metrics, environment=dev.collect_environment(device))
