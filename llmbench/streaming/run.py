"""Set-up and loops of `llmbench stream train` and `llmbench stream compare`.

    llmbench stream train --model tiny --batch 8 --seq 64 --steps 20 --store disk:/tmp/st --json
    llmbench stream compare --model tiny --layers 4 --width 256 --batch 8 --seq 256 --steps 6 --json
    python -m torch.distributed.run --nproc-per-node 2 -m llmbench stream train --model tiny ...

`run_train(StreamConfig)` and `run_compare(StreamConfig)` return the result dicts the CLI prints;
`record()` stores one in the results database. The trainers, the initial weights and the data are
in trainers.py, the configuration in config.py.
"""
from __future__ import annotations

import gc
import os
import statistics
import time

from llmbench.errors import BadInput
from llmbench.footprint import STORE_SLOTS
from llmbench.streaming.config import StreamConfig, resolve_spec  # noqa: F401  (re-exported)
from llmbench.streaming.memory import bound_heap, peak_rss_bytes, release_freed_memory
from llmbench.streaming.trainers import ResidentTrainer, StreamedTrainer, make_batch


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
    bound_heap()
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
    L, numel, s = spec.n_layers, tr.numel, tr.ex.elsize
    block_bytes = max(numel[f"block.{i}"] for i in range(L)) * s
    # fp32 dense: weights in: ends once, blocks forward and backward but the last (kept across
    # the turn); gradients out: every group once
    dense = 4 * (numel["ends"] * 2 + sum(numel[f"block.{i}"] for i in range(L)) * 3
                 - numel[f"block.{L - 1}"])
    streamed = (st["weight_bytes_in"] + st["grad_bytes_out"]) / n
    store = tr.store
    return {
        "model": spec.name, "params": params, "n_layers": L, "d_model": spec.d_model,
        "batch": cfg.batch, "seq": cfg.seq, "world_size": world, "tokens_per_step": tokens,
        "device": str(device), "store": str(cfg.store), "prefetch": cfg.prefetch,
        "sparsity": cfg.sparsity, "recompute": cfg.recompute, "precision": cfg.precision,
        "start_step": (store.step - len(losses)) if store is not None else 0,
        "steps": cfg.steps, "tokens_per_s": tps, "step_time_s": step_s, "step_times_s": times,
        "warmup_s": sum(times[:cfg.warmup_steps]) if len(times) > cfg.warmup_steps else 0.0,
        "loss": store.losses if store is not None and store.kind == "disk" else losses,
        "skipped_steps": store.skipped if store is not None else [],
        "loss_scale": store.loss_scale.scale if store is not None and store.loss_scale else None,
        "streamed_bytes_per_step": streamed,
        "weight_bytes_in_per_step": st["weight_bytes_in"] / n,
        "grad_bytes_out_per_step": st["grad_bytes_out"] / n,
        "dense_streamed_bytes_per_step": dense, "streamed_fraction_of_dense": streamed / dense,
        "exposed_stream_s_per_step": st["stream_wait_s"] / n,
        "exposed_optimizer_s_per_step": st["optimizer_wait_s"] / n,
        "optimizer_s_per_step": st["optimizer_busy_s"] / n,
        "device_weight_bytes_peak": tr.ex.account.weight_bytes_peak,
        "device_grad_bytes_peak": tr.ex.account.grad_bytes_peak,
        "layer_weight_bytes": block_bytes, "embedding_weight_bytes": numel["ends"] * s,
        "device_bytes_estimate": tr.estimate["total"],
        "device_memory_budget_bytes": cfg.device_memory_budget_bytes,
        "weights_and_adam_bytes": tr.estimate["store"] // STORE_SLOTS,  # one slot: fp32 weights + moments
        "store_bytes": store.nbytes if store is not None else 0,
        "peak_rss_bytes": peak_rss_bytes(),
    }


def run_compare(cfg: StreamConfig) -> dict:
    """Resident and streamed training of the same model, same initial weights and data, one after
    the other in one process: the resident trainer is freed before the streamed one is built, so
    the process never holds two copies of the optimizer state. At its peak it holds the larger
    of the resident state (16 bytes per parameter in fp32: weights, gradients, two Adam moments;
    20 in bf16/fp16 with fp32 masters) and the RAM store (24 bytes per parameter: two slots of
    fp32 weights and moments), plus one phase's activations and streamed layers."""
    from llmbench.measure import device as dev

    if cfg.store.kind != "ram" or cfg.resume:
        raise BadInput("stream compare uses a RAM store and no --resume")
    spec = resolve_spec(cfg)
    device = dev.resolve(cfg.device)
    bound_heap()
    batches = [make_batch(spec, cfg.batch, cfg.seq, cfg.seed, step) for step in range(cfg.steps)]
    res = ResidentTrainer(spec, cfg, device)
    resident_state = res.state_bytes
    lr_, tr_ = _steps(res, batches, device)
    skipped_resident = res.skipped_steps
    del res
    gc.collect()
    release_freed_memory()
    rss_resident = peak_rss_bytes()
    st = StreamedTrainer(spec, cfg, device)
    try:
        ls_, ts_ = _steps(st, batches, device)
    finally:
        st.close()
    out = _compare_metrics(spec, cfg, device, st, (lr_, tr_), (ls_, ts_))
    out.update(resident_state_bytes=resident_state, store_bytes=st.store.nbytes,
               peak_rss_after_resident_bytes=rss_resident, peak_rss_bytes=peak_rss_bytes(),
               resident_skipped_steps=skipped_resident, streamed_skipped_steps=st.store.skipped)
    return out


def _steps(trainer, batches, device) -> tuple[list[float], list[float]]:
    losses, times = [], []
    for idx, tgt in batches:
        loss, dt = _timed(lambda: trainer.step(idx, tgt), device)
        losses.append(loss)
        times.append(dt)
    return losses, times


def _compare_metrics(spec, cfg, device, st, resident, streamed) -> dict:
    (lr_, tr_), (ls_, ts_) = resident, streamed
    tokens = cfg.batch * cfg.seq
    r_tps, r_step = _throughput(tr_, tokens, cfg.warmup_steps)
    s_tps, s_step = _throughput(ts_, tokens, cfg.warmup_steps)
    w = cfg.warmup_steps if cfg.steps > cfg.warmup_steps else 0
    # other work on the machine slows steps at random: the ratio is the median over step pairs
    # (resident step i, streamed step i), robust to a few slow steps; tokens/s use median step times
    ratio = statistics.median(a / b for a, b in zip(tr_[w:], ts_[w:]))
    extra_s = statistics.median(b - a for a, b in zip(tr_[w:], ts_[w:]))
    rel = [abs(a - b) / abs(a) for a, b in zip(lr_, ls_)]
    L = spec.n_layers
    return {
        "model": spec.name, "n_layers": L, "d_model": spec.d_model, "batch": cfg.batch,
        "seq": cfg.seq, "steps": cfg.steps, "tokens_per_step": tokens, "device": str(device),
        "prefetch": cfg.prefetch, "recompute": cfg.recompute, "precision": cfg.precision,
        "resident_tokens_per_s": r_tps, "streamed_tokens_per_s": s_tps, "ratio": ratio,
        # the ratio of the two medians above; `ratio` (median of per-pair ratios) is the robust one
        "ratio_of_tokens_per_s": s_tps / r_tps,
        "resident_step_s": r_step, "streamed_step_s": s_step, "streamed_extra_s_per_step": extra_s,
        # the fastest step of each: the least disturbed by other load on a shared machine
        "resident_step_min_s": min(tr_[w:]), "streamed_step_min_s": min(ts_[w:]),
        "ratio_of_min_steps": min(tr_[w:]) / min(ts_[w:]),
        "resident_step_times_s": tr_, "streamed_step_times_s": ts_,
        "resident_loss": lr_, "streamed_loss": ls_, "max_rel_loss_diff": max(rel),
        "device_weight_bytes_peak": st.ex.account.weight_bytes_peak,
        "layer_weight_bytes": max(st.numel[f"block.{i}"] for i in range(L)) * st.ex.elsize,
        "embedding_weight_bytes": st.numel["ends"] * st.ex.elsize,
        "streamed_bytes_per_step": (st.ex.stats["weight_bytes_in"] + st.ex.stats["grad_bytes_out"]) / cfg.steps,
        "exposed_stream_s_per_step": st.ex.stats["stream_wait_s"] / cfg.steps,
        "exposed_optimizer_s_per_step": st.ex.stats["optimizer_wait_s"] / cfg.steps,
        "params": sum(st.numel.values()),
    }


def workload_of(cfg: StreamConfig, out: dict, *, streamed: bool = True):
    """The run as a Workload (llmbench.point): train on this machine's hardware, global batch over
    the ranks, mode weight_streaming (streamed) or the plain resident layout (the compare's baseline)."""
    from llmbench.measure import device as dev
    from llmbench.point import Layout, Workload, hardware_for_device
    from llmbench.streaming.config import workload_model

    device = dev.resolve(out["device"])
    model, resize = workload_model(cfg)
    world = int(out.get("world_size", 1))
    layout = Layout(mode="weight_streaming" if streamed else None,
                    recompute="full" if cfg.recompute else None)
    return Workload(suite="train", model=model, resize=resize,
                    hardware=hardware_for_device(device.type, dev.device_name(device)),
                    precision=cfg.precision, devices=world, batch=cfg.batch * world,
                    seq_len=cfg.seq, sparsity=cfg.sparsity, layout=layout)


def _metrics(out: dict, prefix: str = "") -> dict:
    """The METRICS of one trainer's side of a run (`prefix` streamed_/resident_ in a compare)."""
    loss = out.get(prefix + "loss") or []
    step = out.get(prefix + "step_time_s", out.get(prefix + "step_s"))
    m = {"tokens_per_s": out.get(prefix + "tokens_per_s"), "step_time_s": step,
         "loss_first": loss[0] if loss else None, "loss_last": loss[-1] if loss else None}
    if not prefix:
        m["warmup_s"] = out.get("warmup_s")
    return {k: v for k, v in m.items() if v is not None}


def record(db_path: str, cfg: StreamConfig, out: dict, *, study: str | None = None) -> list[str]:
    """Store a `stream train` run (one row, mode weight_streaming) or a `stream compare` (two rows:
    the streamed run and its resident baseline, each its own Workload) as `measured` results in the
    results database; everything that is not a METRIC goes to environment["info"]. Returns the keys."""
    from llmbench.measure import device as dev
    from llmbench.point import METRICS
    from llmbench.results.store import ResultsDB

    env = {**dev.collect_environment(dev.resolve(out["device"])),
           "info": {k: v for k, v in out.items() if k not in METRICS}}
    sides = ([(True, "streamed_"), (False, "resident_")] if "resident_loss" in out else [(True, "")])
    with ResultsDB(db_path) as db:
        return [db.record(workload_of(cfg, out, streamed=s), metrics=_metrics(out, prefix),
                          environment=env, study=study) for s, prefix in sides]
