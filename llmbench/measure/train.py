"""Pre-training throughput: AdamW steps on synthetic tokens, the shipped corpus or genome.

    llmbench measure train --model gpt2-small --batch 4 --seq 256 --steps 10
    torchrun --nproc-per-node 2 -m llmbench measure train --model gpt2-small --batch 8 --baseline

`w.batch` is the global batch: each of the `w.devices` processes runs `w.micro_batch` sequences
per micro-step, `w.grad_accum` micro-steps per optimizer step (llmbench.point.Workload.micro_steps).
Warm-up steps are excluded from the figures and reported (`warmup_s`). FLOPs per step are
`counting.training_flops(spec, micro_batch, seq)["model"]` x grad_accum per process (the MFU
numerator, no recompute). Under torchrun (WORLD_SIZE > 1) the model is wrapped in DDP (gloo on
CPU, NCCL on CUDA): tokens/s is global, step time is the slowest rank's, and
`scaling_efficiency` = global tokens/s / (world x one-process tokens/s).
"""
from __future__ import annotations

import contextlib
import os

import torch


from llmbench.measure import device as dev
from llmbench.measure.common import datasheet_peak_flops, mfu, summarize_times
from llmbench.measure.modeling import build_model
from llmbench.measure.options import DATA
from llmbench.measure.sparsity import Sparsifier
from llmbench.models.counting import training_flops


class Batches:
    """Random (B, T+1) windows of a token stream, or uniform random tokens (synthetic).

    n_classes > 0 (a sequence-classification head): targets are one random class id per sequence,
    (B,), the shape of an SST-2 fine-tuning batch; the inputs are the first T tokens."""

    def __init__(self, kind: str, vocab_size: int, batch: int, seq: int, device, seed: int = 0,
                 n_classes: int = 0):
        if kind not in DATA:
            raise ValueError(f"data must be one of {', '.join(DATA)}, got {kind!r}")
        self.kind, self.B, self.T, self.device = kind, batch, seq, device
        self.n_classes = n_classes
        self.gen = torch.Generator().manual_seed(seed)
        self.vocab_size = vocab_size
        self.stream = None
        if kind == "corpus":
            from llmbench.data.text import corpus_tokens, load_tokenizer
            tok = load_tokenizer()
            self.stream = torch.tensor(corpus_tokens(tok), dtype=torch.long)
            self.needs_vocab = tok.vocab_size
        elif kind == "genome":
            from llmbench.data.genome import genome_tokens
            self.stream = torch.tensor(genome_tokens(), dtype=torch.long)
            self.needs_vocab = int(self.stream.max()) + 1
        if self.stream is not None:
            if self.needs_vocab > vocab_size:
                raise ValueError(f"data {kind!r} needs vocab_size >= {self.needs_vocab}, model has {vocab_size}")
            if len(self.stream) <= seq + 1:
                raise ValueError(f"data {kind!r} has {len(self.stream)} tokens, fewer than seq+1={seq + 1}")

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.stream is None:
            xy = torch.randint(0, self.vocab_size, (self.B, self.T + 1), generator=self.gen)
        else:
            starts = torch.randint(0, len(self.stream) - self.T - 1, (self.B,), generator=self.gen)
            xy = torch.stack([self.stream[s:s + self.T + 1] for s in starts.tolist()])
        xy = xy.to(self.device, non_blocking=True)
        if self.n_classes:
            labels = torch.randint(0, self.n_classes, (self.B,), generator=self.gen)
            return xy[:, :-1], labels.to(self.device)  # (B, T) inputs, (B,) class ids
        return xy[:, :-1], xy[:, 1:]  # (B, T) inputs, (B, T) next-token targets


def make_adamw(params, *, lr: float) -> torch.optim.AdamW:
    """AdamW (betas 0.9/0.95, weight decay 0.1, as GPT-3) with the fused kernel: on CUDA and, since
    torch 2.4, on the CPU, where it is about 4x faster than the foreach one
    (benchmarks/measure_adamw.py); foreach where fused is not supported."""
    params = list(params)
    try:
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.1, foreach=True)


def _autocast(device: torch.device, precision: str):
    if precision in ("fp16", "bf16"):
        return torch.autocast(device.type, dtype=dev.dtype_of(precision))
    return contextlib.nullcontext()


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def setup_distributed(device_name: str) -> tuple[torch.device, int, int]:
    """(device, world, rank) of this process: under torchrun (WORLD_SIZE > 1) its local rank's
    accelerator, with the process group initialised; else `device_name` resolved, 1, 0."""
    import torch.distributed as tdist
    device = dev.resolve(device_name)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return device, 1, 0
    if dev.is_accelerator(device):
        device = torch.device(device.type, int(os.environ.get("LOCAL_RANK", "0")))
        dev.set_device(device)
    if not tdist.is_initialized():
        tdist.init_process_group(dev.backend(device))
    return device, world, _rank()


def step_fn(net, fwd, opt, data, sparsifier, w, *, ddp: bool, losses: list):
    """One optimizer step of w.grad_accum micro-steps (DDP syncs gradients on the last only).
    Public: `stream compare`'s resident side runs this same step (streaming/run.MeasureResident)."""
    G = w.grad_accum
    scaler = torch.amp.GradScaler(data.device.type) if w.precision == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        for micro in range(G):
            x, y = data.next()
            sync = contextlib.nullcontext() if (not ddp or micro == G - 1) else net.no_sync()
            with sync:
                with _autocast(data.device, w.precision):
                    _, loss = fwd(x, y)
                loss = loss / G
                (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sparsifier.apply()
        losses.append(loss.detach())
    return step


def train_loop(spec, w, run, device: torch.device, *, ddp: bool) -> dict:
    """Build, warm up, time `run.steps` optimizer steps; this process's figures."""
    torch.manual_seed(run.seed)
    model = build_model(spec, device=device)  # fp32 master weights; autocast for fp16/bf16
    sparsifier = Sparsifier.for_run(model, w.sparsity, run.sparsity_pattern, device,
                                    w.micro_batch * w.seq_len)
    net = model
    if ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model, device_ids=[device.index] if dev.is_accelerator(device) else None)
    fwd = torch.compile(net) if run.compile else net
    opt = make_adamw(model.parameters(), lr=run.lr)
    data = Batches(run.data, spec.vocab_size, w.micro_batch, w.seq_len, device, seed=run.seed + _rank(),
                   n_classes=spec.n_classes if spec.head == "cls" else 0)
    losses = []
    step = step_fn(net, fwd, opt, data, sparsifier, w, ddp=ddp, losses=losses)
    dev.reset_peak_memory(device)
    times, warm = dev.time_fn(step, device, repeats=run.steps, warmup=run.warmup_steps)
    timed = losses[run.warmup_steps:]
    return {"times": times, "warmup_s": warm, "peak_mem_bytes": dev.peak_memory_bytes(device),
            "loss_first": float(timed[0]) * w.grad_accum, "loss_last": float(timed[-1]) * w.grad_accum,
            "sparsity": sparsifier.report()}


def run_train(w, run, device: torch.device) -> tuple[dict, dict]:
    """Train w.spec() on w.devices processes (the torchrun world) with plain data parallelism:
    (metrics, info). A layout that shards, splits or recomputes runs through measure/parallel_train.py
    (suites.py chooses)."""
    spec = w.spec()
    dev.set_precision(device, w.precision)
    baseline = run.baseline_tokens_per_s
    if run.baseline and w.devices > 1:
        baseline = _baseline_on_rank0(spec, w, run, device)
    r = train_loop(spec, w, run, device, ddp=w.devices > 1)
    return summarize(spec, w, r, device, baseline)


def _baseline_on_rank0(spec, w, run, device) -> float:
    """One process alone (rank 0, no DDP) while the other ranks wait; tokens/s broadcast to all."""
    import torch.distributed as tdist
    value = torch.zeros(1, dtype=torch.float64, device=device)
    if _rank() == 0:
        r = train_loop(spec, w, run, device, ddp=False)
        step_s = sorted(r["times"])[len(r["times"]) // 2]
        value[0] = w.micro_batch * w.grad_accum * w.seq_len / step_s
    tdist.broadcast(value, src=0)
    return float(value[0])


def summarize(spec, w, r: dict, device, baseline: float | None) -> tuple[dict, dict]:
    """Global metrics from this process's figures: (metrics, info)."""
    times = r["times"]
    if w.devices > 1:  # the step time of the job is the slowest rank's
        import torch.distributed as tdist
        t = torch.tensor(times, dtype=torch.float64, device=device)
        tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
        times = t.tolist()
    m = summarize_times(times)
    step_s = m["step_time_s"]
    flops_per_process = training_flops(spec, w.micro_batch, w.seq_len)["model"] * w.grad_accum
    tokens = w.batch * w.seq_len  # global: micro_batch x grad_accum x devices sequences
    m.update({"tokens_per_s": tokens / step_s, "samples_per_s": w.batch / step_s,
              "achieved_tflops": flops_per_process / step_s / 1e12,
              "mfu": mfu(w, flops_per_process / step_s), "peak_mem_bytes": r["peak_mem_bytes"],
              "warmup_s": r["warmup_s"], "loss_first": r["loss_first"], "loss_last": r["loss_last"]})
    if baseline:
        m["baseline_tokens_per_s"] = baseline
        m["scaling_efficiency"] = m["tokens_per_s"] / (w.devices * baseline)
    info = {"datasheet": datasheet_peak_flops(w)[1], "flops_per_step": flops_per_process * w.devices,
            "tokens_per_step": tokens, "world_size": w.devices, "steps": len(times)}
    if r["sparsity"]:
        info["sparsity"] = r["sparsity"]
    return m, info
