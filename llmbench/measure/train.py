"""Pre-training throughput: AdamW steps on synthetic tokens or the shipped corpus.

    llmbench measure train --model gpt2-small --batch 4 --seq 256 --steps 10
    torchrun --nproc-per-node 2 -m llmbench measure train --model gpt2-small ... --baseline

Warm-up steps are excluded from the figures and reported (`warmup_s`). FLOPs per step are
`counting.training_flops(spec, batch, seq)["model"]` x grad_accum (the MFU numerator, no
recompute). Under torchrun (WORLD_SIZE > 1) the model is wrapped in DDP (gloo on CPU, NCCL on
CUDA): tokens/s is global, step time is the slowest rank's, and `scaling_efficiency` =
global tokens/s / (world x one-process tokens/s).
"""
from __future__ import annotations

import contextlib
import os
import time

import torch

from llmbench.measure import device as dev
from llmbench.measure.common import (datasheet_peak_flops, model_from_config, summarize_times)
from llmbench.measure.modeling import build_model
from llmbench.measure.sparsity import Sparsifier
from llmbench.models.counting import training_flops

DEFAULTS = {"batch": 4, "seq": 256, "grad_accum": 1, "steps": 10, "warmup_steps": 2,
            "precision": "fp32", "device": "auto", "sparsity": 0.0, "sparsity_pattern": "unstructured",
            "compile": False, "data": "synthetic", "lr": 3e-4, "hardware": None, "seed": 0,
            "baseline": False, "baseline_tokens_per_s": None}
DATA = ("synthetic", "corpus", "genome")


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


def _dist_info():
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return world, int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))


def setup_distributed(device_name: str) -> tuple[torch.device, int, int]:
    """Initialise torch.distributed from torchrun's environment; (device, world, rank)."""
    import torch.distributed as tdist
    world, rank, local = _dist_info()
    device = dev.resolve(device_name)
    if dev.is_accelerator(device):
        device = torch.device(device.type, local)
        dev.set_device(device)
    if world > 1 and not tdist.is_initialized():
        tdist.init_process_group(dev.backend(device))
    return device, world, rank


def train_loop(spec, cfg: dict, device: torch.device, *, ddp: bool) -> dict:
    """Build, warm up, time `steps` optimizer steps; per-rank figures."""
    precision, B, T, G = cfg["precision"], int(cfg["batch"]), int(cfg["seq"]), int(cfg["grad_accum"])
    torch.manual_seed(cfg["seed"])
    model = build_model(spec, device=device)  # fp32 master weights; autocast for fp16/bf16
    sparsifier = Sparsifier.from_config(model, cfg, device)
    net = model
    if ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(model, device_ids=[device.index] if dev.is_accelerator(device) else None)
    fwd = torch.compile(net) if cfg["compile"] else net
    opt = make_adamw(model.parameters(), lr=cfg["lr"])
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    data = Batches(cfg["data"], spec.vocab_size, B, T, device, seed=cfg["seed"] + _dist_info()[1],
                   n_classes=spec.n_classes if spec.head == "cls" else 0)
    losses = []

    def step():
        opt.zero_grad(set_to_none=True)
        for micro in range(G):
            x, y = data.next()
            sync = contextlib.nullcontext() if (not ddp or micro == G - 1) else net.no_sync()
            with sync:
                with _autocast(device, precision):
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

    dev.reset_peak_memory(device)
    warm, times = dev.time_fn(step, device, repeats=0, warmup=cfg["warmup_steps"])[1], []
    for _ in range(int(cfg["steps"])):
        with dev.Timer(device) as t:
            step()
        times.append(t.elapsed_s)
    out = {"times": times, "warmup_s": warm, "peak_mem_bytes": dev.peak_memory_bytes(device),
           "loss_first": float(losses[0]) * G, "loss_last": float(losses[-1]) * G,
           "sparsity": sparsifier.report()}
    return out


def run_train(config: dict) -> dict:
    cfg = {**DEFAULTS, **config}
    spec = model_from_config(cfg)
    if int(cfg["steps"]) < 1 or int(cfg["grad_accum"]) < 1:
        raise ValueError("steps and grad_accum must be at least 1")
    if int(cfg["seq"]) > spec.max_seq_len:
        raise ValueError(f"seq {cfg['seq']} exceeds {spec.name}'s max_seq_len {spec.max_seq_len}")
    device, world, rank = setup_distributed(cfg["device"])
    ok, why = dev.supports_dtype(device, cfg["precision"])
    if not ok:
        raise ValueError(why)
    dev.set_precision(device, cfg["precision"])
    baseline = cfg["baseline_tokens_per_s"]
    if cfg["baseline"] and world > 1:
        baseline = _baseline_on_rank0(spec, cfg, device, rank)
    r = train_loop(spec, cfg, device, ddp=world > 1)
    return summarize(spec, cfg, device, r, world, baseline)


def _baseline_on_rank0(spec, cfg, device, rank) -> float:
    """One process alone (rank 0, no DDP) while the other ranks wait; tokens/s broadcast to all."""
    import torch.distributed as tdist
    value = torch.zeros(1, dtype=torch.float64, device=device)
    if rank == 0:
        r = train_loop(spec, cfg, device, ddp=False)
        step_s = sorted(r["times"])[len(r["times"]) // 2]
        value[0] = int(cfg["batch"]) * int(cfg["seq"]) * int(cfg["grad_accum"]) / step_s
    tdist.broadcast(value, src=0)
    return float(value[0])


def summarize(spec, cfg, device, r: dict, world: int, baseline: float | None) -> dict:
    B, T, G = int(cfg["batch"]), int(cfg["seq"]), int(cfg["grad_accum"])
    times = r["times"]
    if world > 1:  # the step time of the job is the slowest rank's
        import torch.distributed as tdist
        t = torch.tensor(times, dtype=torch.float64, device=device)
        tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
        times = t.tolist()
    m = summarize_times(times)
    step_s = m["step_time_s"]
    flops_step = training_flops(spec, B, T)["model"] * G  # per rank
    tokens = B * T * G * world
    peak, hw = datasheet_peak_flops(device, cfg["precision"], cfg["hardware"])
    achieved = flops_step * world / step_s
    m.update({
        "tokens_per_s": tokens / step_s, "samples_per_s": B * G * world / step_s,
        "achieved_tflops": achieved / 1e12,
        "mfu": achieved / world / peak if peak else None, "datasheet": hw,
        "peak_mem_bytes": r["peak_mem_bytes"], "warmup_s": r["warmup_s"],
        "flops_per_step": flops_step * world, "tokens_per_step": tokens, "world_size": world,
        "loss_first": r["loss_first"], "loss_last": r["loss_last"], "steps": len(times),
    })
    if baseline:
        m["baseline_tokens_per_s"] = baseline
        m["scaling_efficiency"] = m["tokens_per_s"] / (world * baseline)
    if r["sparsity"]:
        m.update(r["sparsity"])
    m["timestamp"] = time.time()
    return m
