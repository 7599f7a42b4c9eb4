"""Set-up and loops of `llmbench stream train` and `llmbench stream compare`.

    from llmbench.streaming.config import StreamOptions, stream_workload
    w = stream_workload("gpt2-small", batch=8, seq_len=256)      # a Workload; batch is global
    out = run_compare(w, StreamOptions(device="cpu", steps=20))  # out["ratio"], out["ratio_p10"] ...
    python -m torch.distributed.run --nproc-per-node 2 -m llmbench stream train --model tiny --batch 8

`run_train(Workload, StreamOptions)` and `run_compare(Workload, StreamOptions)` return the result
dicts the CLI prints; `record()` stores one in the results database. The Workload is resolved as
`measure train` resolves it (measure/suites.resolve_workload: hardware, precision, devices = the
torchrun world, micro-batch = global batch / ranks), then takes mode weight_streaming: a stream row
and a `measure train` row of one workload differ in the mode only. `stream compare`'s resident
side is `measure train`'s own step (measure/train.py: build_model, fused AdamW, autocast),
interleaved step by step with the streamed one. The trainers, initial weights and data are in
trainers.py, the options in config.py.
"""
from __future__ import annotations

import os
import statistics
import time

from llmbench.errors import BadInput
from llmbench.footprint import STORE_SLOTS
from llmbench.measure.hostmem import bound_heap, heap_for, peak_rss_bytes
from llmbench.streaming.config import StreamOptions, StreamRun, check_causal_lm
from llmbench.streaming.trainers import StreamedTrainer, check_resident_fits, device_bytes_estimate, make_batch

#: the executor's per-step phase times (s) that `--json` reports, and what each one is
PHASES = {"fetch_s": "loader thread: store -> device copies (overlapped with compute unless exposed)",
          "forward_s": "forward compute on the main thread, waits excluded",
          "backward_s": "backward compute on the main thread, waits and reductions excluded",
          "reduce_s": "data parallel: gradient reductions to rank 0",
          "optimizer_s": "store-side AdamW on its worker thread (overlapped unless exposed)",
          "exposed_stream_wait_s": "compute waiting for a layer's weights",
          "exposed_optimizer_wait_s": "compute waiting for the store-side optimizer"}


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


def resolve(w, opts: StreamOptions):
    """(device, world, rank, Workload as it runs): the process group started by measure's set-up
    (measure/train.setup_distributed: one backend rule), the Workload resolved by measure's rule
    (measure/suites.resolve_workload), mode weight_streaming."""
    from llmbench.measure.options import RunOptions
    from llmbench.measure.suites import resolve_workload
    from llmbench.measure.train import setup_distributed

    if w.suite != "train":
        raise BadInput(f"stream train and compare run the train suite, not {w.suite}")
    if w.layout.mode not in (None, "weight_streaming"):
        raise BadInput(f"stream train runs mode weight_streaming, not {w.layout.mode}")
    device, world, rank = setup_distributed(opts.device)
    resolved = resolve_workload(w.with_(mode=None), device, RunOptions(device=opts.device))
    return device, world, rank, resolved.with_(mode="weight_streaming")


# ---------------------------------------------------------------- commands

def run_train(w, opts: StreamOptions) -> dict:
    from llmbench.models.counting import param_count

    device, world, rank, w = resolve(w, opts)
    cfg = StreamRun.of(w, opts, world)
    spec = w.spec()
    check_causal_lm(spec)
    heap = _host_heap(spec, cfg, device, opts.store.kind)
    comm = None
    if world > 1:
        from llmbench.streaming.comm import SwarmComm

        comm = SwarmComm(device)
    tr = StreamedTrainer(spec, cfg, device, comm=comm)
    try:
        losses, times, digests = _train_loop(tr, spec, cfg, rank, world, comm)
    finally:
        tr.close()
    out = _train_metrics(tr, spec, cfg, losses, times, world, device, param_count(spec))
    out.update(workload=w.to_dict(), host_heap=heap)
    if comm is not None and cfg.check_ranks:
        per_rank = comm.gather_objects(digests)
        out["rank_digests"] = per_rank
        out["ranks_identical"] = all(d == per_rank[0] for d in per_rank)
    if comm is not None:
        comm.close()
    out["rank"] = rank
    return out


def _host_heap(spec, cfg, device, store: str, also: int = 0) -> str:
    """The host heap's policy for a stream run (measure/hostmem): bounded with a disk store (host
    RAM is what that tier saves) or where what the host holds (the RAM store; on a CPU also the
    streamed step and `also`, the resident state of a compare) leaves too little room for what one
    heap keeps; reusing otherwise."""
    if store == "disk":
        bound_heap()
        return "bound"
    est = device_bytes_estimate(spec, batch=cfg.batch, seq=cfg.seq, prefetch=cfg.prefetch,
                                recompute=cfg.recompute, precision=cfg.precision)
    on_host = est["total"] + also if device.type == "cpu" else 0
    return heap_for(est["store"] + on_host)


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
        "batch": cfg.batch * world, "micro_batch": cfg.batch, "seq": cfg.seq, "world_size": world,
        "tokens_per_step": tokens,
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
        "phases_s_per_step": phases(st, n),
        "device_weight_bytes_peak": tr.ex.account.weight_bytes_peak,
        "device_grad_bytes_peak": tr.ex.account.grad_bytes_peak,
        "layer_weight_bytes": block_bytes, "embedding_weight_bytes": numel["ends"] * s,
        "device_bytes_estimate": tr.estimate["total"],
        "device_memory_budget_bytes": cfg.device_memory_budget_bytes,
        "weights_and_adam_bytes": tr.estimate["store"] // STORE_SLOTS,  # one slot: fp32 weights + moments
        "store_bytes": store.nbytes if store is not None else 0,
        "peak_rss_bytes": peak_rss_bytes(),
    }


def phases(stats: dict, steps: int) -> dict:
    """Mean seconds per step of each phase of a streamed step (PHASES), from the executor's stats."""
    keys = {"fetch_s": "fetch_busy_s", "forward_s": "forward_s", "backward_s": "backward_s",
            "reduce_s": "reduce_s", "optimizer_s": "optimizer_busy_s",
            "exposed_stream_wait_s": "stream_wait_s", "exposed_optimizer_wait_s": "optimizer_wait_s"}
    return {k: stats[v] / max(steps, 1) for k, v in keys.items()}


class MeasureResident:
    """`measure train`'s trainer (measure/train.py: build_model, make_adamw, its step with autocast
    and GradScaler) on the streamed run's initial weights (trainers.load_initial) and batches."""

    def __init__(self, spec, w, opts: StreamOptions, device, batches: list):
        import torch

        from llmbench.measure.sparsity import Sparsifier
        from llmbench.measure.train import build_model, make_adamw, step_fn
        from llmbench.streaming.trainers import load_initial

        torch.manual_seed(opts.seed)
        self.model = build_model(spec, device=device)
        load_initial(self.model, spec, opts.seed)
        self.batches, self.device, self.losses = iter(batches), device, []
        opt = make_adamw(self.model.parameters(), lr=opts.lr)
        dense = Sparsifier.for_run(self.model, 0.0, "unstructured", device, w.micro_batch * w.seq_len)
        self.step = step_fn(self.model, self.model, opt, self, dense, w, ddp=False, losses=self.losses)

    def next(self):
        """measure's Batches interface: the next (inputs, targets) on the device"""
        idx, tgt = next(self.batches)
        return idx.to(self.device), tgt.to(self.device)


def _pair(i, streamed, resident, batch, device) -> tuple[float, float, float, float]:
    """(streamed loss, resident loss, streamed s, resident s) of step i; the side that goes first
    alternates, so neither side always runs on caches the other warmed (or on a quieter machine)."""
    first_streamed = i % 2 == 0
    sides = [("s", lambda: streamed.step(*batch)), ("r", resident.step)]
    got = {}
    for name, fn in (sides if first_streamed else sides[::-1]):
        got[name] = _timed(fn, device)
    return got["s"][0], float(resident.losses[-1]), got["s"][1], got["r"][1]


def run_compare(w, opts: StreamOptions) -> dict:
    """Streamed and resident (`measure train`'s trainer) training of one Workload in one process,
    same initial weights and data, step pairs interleaved: `warmup_steps` pairs, then `steps`
    timed ones. The process holds both: the resident state (16 bytes per parameter in fp32) and
    the RAM store (24: two slots of fp32 weights and moments), plus activations."""
    if opts.store.kind != "ram" or opts.resume:
        raise BadInput("stream compare uses a RAM store and no --resume")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise BadInput("stream compare runs in one process (its resident side is measure train's, unsharded)")
    if w.sparsity:
        raise BadInput("stream compare runs dense weights (stream train measures --sparsity)")
    device, _, _, w = resolve(w, opts)
    cfg = StreamRun.of(w, opts, 1)
    spec = w.spec()
    check_causal_lm(spec)
    need = check_resident_fits(spec, cfg, device)  # before allocating: the resident side is the larger
    heap = _host_heap(spec, cfg, device, "ram", also=need["state"])  # the sides' steps alternate
    n = opts.warmup_steps + opts.steps
    batches = [make_batch(spec, cfg.batch, cfg.seq, cfg.seed, step) for step in range(n)]
    resident = MeasureResident(spec, w.with_(mode="resident"), opts, device, batches)
    st = StreamedTrainer(spec, cfg, device)
    try:
        pairs = [_pair(i, st, resident, b, device) for i, b in zip(range(opts.warmup_steps), batches)]
        st.ex.reset_stats()
        pairs += [_pair(i, st, resident, b, device) for i, b in enumerate(batches) if i >= opts.warmup_steps]
    finally:
        st.close()
    out = _compare_metrics(spec, w, opts, st, pairs)
    out.update(store_bytes=st.store.nbytes, peak_rss_bytes=peak_rss_bytes(), workload=w.to_dict(),
               streamed_skipped_steps=st.store.skipped, host_heap=heap)
    return out


def _spread(values: list[float]) -> dict:
    """median, p10, p90 and the interquartile range of a list"""
    if len(values) < 2:
        v = values[0] if values else float("nan")
        return {"median": v, "p10": v, "p90": v, "iqr": 0.0}
    q = statistics.quantiles(values, n=20, method="inclusive")  # q[1] p10, q[4] p25, q[14] p75, q[17] p90
    return {"median": statistics.median(values), "p10": q[1], "p90": q[17], "iqr": q[14] - q[4]}


def _compare_metrics(spec, w, opts, st, pairs) -> dict:
    ls_ = [p[0] for p in pairs]
    lr_ = [p[1] for p in pairs]
    timed = pairs[opts.warmup_steps:]
    ts_, tr_ = [p[2] for p in timed], [p[3] for p in timed]
    tokens = w.batch * w.seq_len
    ratio = _spread([r / s for s, r in zip(ts_, tr_)])  # resident time / streamed time, per pair
    r_step, s_step = statistics.median(tr_), statistics.median(ts_)
    rel = [abs(a - b) / abs(a) for a, b in zip(lr_, ls_)]
    L = spec.n_layers
    return {
        "model": spec.name, "n_layers": L, "d_model": spec.d_model, "batch": w.batch,
        "seq": w.seq_len, "steps": opts.steps, "pairs": len(timed), "warmup_steps": opts.warmup_steps,
        "tokens_per_step": tokens, "device": str(st.device), "prefetch": opts.prefetch,
        "recompute": w.layout.recompute == "full", "precision": w.precision,
        "resident_tokens_per_s": tokens / r_step, "streamed_tokens_per_s": tokens / s_step,
        "ratio": ratio["median"], "ratio_p10": ratio["p10"], "ratio_p90": ratio["p90"], "ratio_iqr": ratio["iqr"],
        "ratio_of_tokens_per_s": r_step / s_step,
        "resident_step_s": r_step, "streamed_step_s": s_step,
        "streamed_extra_s_per_step": statistics.median(s - r for s, r in zip(ts_, tr_)),
        "resident_step_times_s": tr_, "streamed_step_times_s": ts_,
        "resident_loss": lr_, "streamed_loss": ls_, "max_rel_loss_diff": max(rel),
        "phases_s_per_step": phases(st.ex.stats, len(timed)),
        "device_weight_bytes_peak": st.ex.account.weight_bytes_peak,
        "layer_weight_bytes": max(st.numel[f"block.{i}"] for i in range(L)) * st.ex.elsize,
        "embedding_weight_bytes": st.numel["ends"] * st.ex.elsize,
        "streamed_bytes_per_step": (st.ex.stats["weight_bytes_in"] + st.ex.stats["grad_bytes_out"]) / len(timed),
        "exposed_stream_s_per_step": st.ex.stats["stream_wait_s"] / len(timed),
        "exposed_optimizer_s_per_step": st.ex.stats["optimizer_wait_s"] / len(timed),
        "params": sum(st.numel.values()),
    }


def _metrics(out: dict, prefix: str = "") -> dict:
    """The METRICS of one trainer's side of a run (`prefix` streamed_/resident_ in a compare)."""
    loss = out.get(prefix + "loss") or []
    step = out.get(prefix + "step_time_s", out.get(prefix + "step_s"))
    m = {"tokens_per_s": out.get(prefix + "tokens_per_s"), "step_time_s": step,
         "loss_first": loss[0] if loss else None, "loss_last": loss[-1] if loss else None}
    if not prefix:
        m["warmup_s"] = out.get("warmup_s")
    return {k: v for k, v in m.items() if v is not None}


def record(db_path: str, out: dict, *, study: str | None = None) -> list[str]:
    """Store a `stream train` run (one row, mode weight_streaming) or a `stream compare` (two rows:
    the streamed run and its resident side, mode resident: the very Workload `measure train`
    records) as `measured` results in the results database; everything that is not a METRIC goes
    to environment["info"]. Tagged with the command, so neither replaces `measure train`'s row of
    the same Workload nor the other command's (`results list --workload-of KEY` shows them all).
    Returns the keys."""
    from llmbench.measure import device as dev
    from llmbench.point import METRICS, Workload
    from llmbench.results.store import ResultsDB

    env = {**dev.collect_environment(dev.resolve(out["device"])),
           "info": {k: v for k, v in out.items() if k not in METRICS and k != "workload"}}
    w = Workload.from_dict(out["workload"])
    sides = ([(w, "streamed_"), (w.with_(mode="resident"), "resident_")] if "resident_loss" in out
             else [(w, "")])
    tag = "stream compare" if len(sides) == 2 else "stream train"
    with ResultsDB(db_path) as db:
        return [db.record(wk, metrics=_metrics(out, prefix), environment=env, study=study, tag=tag)
                for wk, prefix in sides]
