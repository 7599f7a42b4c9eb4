"""SRAM-resident pipelined inference (seed 004): layers split into stages, one per process, each
holding its layers' weights and its KV cache resident; only activations cross stages.

    python -m torch.distributed.run --nproc-per-node 2 -m llmbench stream infer \\
        --model tiny --batch 4 --prompt-len 16 --gen-len 8 --json
    (one stage: llmbench stream infer --model tiny --json)

The schedule is the wafer pipeline. The batch is cut into M micro-batches (M = stages by default)
and M is the number of batches in flight: stage r works on micro-batch m = (t - r) mod M at step t
of the ring, so after the first M steps every stage computes every step. Stage 0 embeds the prompt
(pass 0) or the token the last stage sampled for that micro-batch in the previous pass, each stage
runs its layers with its own KV cache of that micro-batch and `isend`s the hidden states (b, T, d)
on; the last stage applies the final norm and LM head to the last position, takes the argmax
(greedy) and sends the tokens (b, 1) back to stage 0. Sends are non-blocking (gloo on CPU, NCCL on
GPU); a send is waited for only at the end, so no ring of blocking sends can deadlock.

Measured on the last stage, from a barrier all stages leave together: time to first token of
each micro-batch, decode tokens/s per user ((gen_len - 1) tokens over the time from its first to
its last token) and for the whole batch, the end-to-end latency. Each stage reports its weights
and KV cache bytes as allocated (equal to pipeplan.plan_stages, which also checks a
--stage-memory-budget before anything is allocated), its busy time, and the largest batch x
context its budget allows. `reference_generate` is the single-process greedy decoding with a KV
cache that the pipelined tokens must equal (tests/test_stream_pipeline.py).
"""
from __future__ import annotations

import copy
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn

from llmbench.errors import BadInput
from llmbench.streaming.config import PipelineConfig, spec_of, stream_workload
from llmbench.streaming.executor import DTYPES
from llmbench.streaming.pipeplan import (
    check_fits, head_layers_of, max_batch_x_context, plan_stages, stage_layers)


# ---------------------------------------------------------------- one stage's resident modules

def _materialise(meta: nn.Module, prefix: str, tensors: dict, device, dtype) -> nn.Module:
    m = copy.deepcopy(meta).to_empty(device=device)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if prefix + name in tensors:
                p.copy_(tensors[prefix + name])
    return m.to(dtype)


class Stage:
    """The modules one stage holds resident: embeddings (first), its blocks, head (last)."""

    def __init__(self, spec, cfg: PipelineConfig, rank: int, world: int, device):
        from llmbench.measure.modeling import build_model
        from llmbench.streaming.trainers import init_group

        self.rank, self.world, self.device = rank, world, device
        self.first, self.last = rank == 0, rank == world - 1
        self.layers = stage_layers(spec.n_layers, world, head_layers_of(spec, cfg.balance))[rank]
        dtype = DTYPES[cfg.precision]
        skel = build_model(spec, meta=True)
        ends = init_group(spec, cfg.seed, skel, "ends") if self.first or self.last else {}
        self.embed = _materialise(skel.embedding, "embedding.", ends, device, dtype) if self.first else None
        self.head = _materialise(skel.head_module, "head_module.", ends, device, dtype) if self.last else None
        if self.head is not None and spec.tied_embeddings:
            self.head.lm_head.weight = self.embed.wte.weight if self.embed is not None else \
                nn.Parameter(ends["embedding.wte.weight"].to(device, dtype))
        del ends
        self.blocks = [_materialise(skel.blocks[i], f"blocks.{i}.",
                                    init_group(spec, cfg.seed, skel, f"block.{i}"), device, dtype)
                       for i in self.layers]

    @property
    def weight_bytes(self) -> int:
        params = {id(p): p for mod in [self.embed, self.head, *self.blocks] if mod is not None
                  for p in mod.parameters()}
        return sum(p.numel() * p.element_size() for p in params.values())

    @torch.no_grad()
    def forward(self, x: torch.Tensor, caches, start: int) -> torch.Tensor:
        """tokens (b, T) on the first stage, hidden (b, T, d) on the others -> hidden, or the
        greedy next tokens (b, 1) on the last stage."""
        h = self.embed(x, start=start) if self.first else x  # (b, T, d)
        for block, cache in zip(self.blocks, caches):
            h = block(h, cache)
        if not self.last:
            return h
        return self.head(h[:, -1:, :]).argmax(dim=-1)  # (b, 1)


# ---------------------------------------------------------------- the ring

class Ring:
    """Stage-to-stage transport: torch.distributed isend/recv, or a local hand-off (one stage)."""

    def __init__(self, stage: Stage):
        self.stage, self.pending, self.local = stage, [], []

    def send(self, t: torch.Tensor, *, to_first: bool = False) -> None:
        if self.stage.world == 1:
            self.local.append(t)
            return
        dst = 0 if to_first else self.stage.rank + 1
        self.pending = [(w, x) for w, x in self.pending if not w.is_completed()]
        self.pending.append((dist.isend(t.contiguous(), dst=dst), t))

    def recv(self, shape, dtype, *, from_last: bool = False) -> torch.Tensor:
        if self.stage.world == 1:
            return self.local.pop(0)
        t = torch.empty(shape, dtype=dtype, device=self.stage.device)
        dist.recv(t, src=self.stage.world - 1 if from_last else self.stage.rank - 1)
        return t

    def drain(self) -> None:
        for w, _ in self.pending:
            w.wait()
        self.pending = []


def _generate(stage: Stage, spec, cfg: PipelineConfig, prompts, caches, M: int, sync) -> dict:
    """One pipelined greedy generation. Returns the tokens (last stage) and the clock readings."""
    from llmbench.measure import device as dev

    b, P, dtype = cfg.batch // M, cfg.prompt_len, DTYPES[cfg.precision]
    for per_mb in caches:
        for c in per_mb:
            c.pos = 0
    ring, busy = Ring(stage), 0.0
    tokens = torch.empty(cfg.batch, cfg.gen_len, dtype=torch.long) if stage.last else None
    first_s, last_s = [0.0] * M, [0.0] * M
    sync()
    t0 = time.perf_counter()
    for j in range(cfg.gen_len):
        T, start = (P, 0) if j == 0 else (1, P + j - 1)
        for m in range(M):
            if stage.first:
                x = prompts[m] if j == 0 else ring.recv((b, 1), torch.long, from_last=True)
            else:
                x = ring.recv((b, T, spec.d_model), dtype)
            t1 = time.perf_counter()
            out = stage.forward(x, caches[m], start)
            dev.synchronize(stage.device)
            busy += time.perf_counter() - t1
            if stage.last:
                tokens[m * b:(m + 1) * b, j] = out[:, 0].cpu()
                last_s[m] = time.perf_counter() - t0
                first_s[m] = last_s[m] if j == 0 else first_s[m]
                if j < cfg.gen_len - 1:
                    ring.send(out, to_first=True)
            else:
                ring.send(out)
    ring.drain()
    return {"tokens": tokens.tolist() if tokens is not None else None, "first_s": first_s, "last_s": last_s, "busy_s": busy,
            "wall_s": time.perf_counter() - t0}


# ---------------------------------------------------------------- the run

def _setup(cfg: PipelineConfig):
    """(rank, world, device): torchrun's environment with its process group started by measure's
    set-up (one backend rule, measure/device.backend), or one stage."""
    from llmbench.measure.train import setup_distributed

    device, world, rank = setup_distributed(cfg.device)
    return rank, world, device


def prompts_of(spec, cfg: PipelineConfig) -> torch.Tensor:
    """The batch's prompts (batch, prompt_len): the training data's token stream, seeded."""
    from llmbench.streaming.trainers import make_batch

    return make_batch(spec, cfg.batch, cfg.prompt_len, cfg.seed, 0)[0]


def run_pipeline(cfg: PipelineConfig) -> dict:
    """Run one pipelined generation on this rank (after `warmup_runs` untimed ones); every rank
    returns the whole result (gathered), with its own "rank"."""
    spec_of(cfg, cfg.prompt_len + cfg.gen_len)  # the model's positions checked (Workload.spec), before allocating
    rank, world, device = _setup(cfg)
    M = cfg.micro_batches or world
    if cfg.batch % M:
        raise BadInput(f"--batch {cfg.batch} must split into {M} micro-batches (one per stage by "
                       "default): use a multiple of it, or --micro-batches")
    context = cfg.prompt_len + cfg.gen_len
    spec = spec_of(cfg, context)
    plans = plan_stages(spec, stages=world, micro_batch=cfg.batch // M, micro_batches=M,
                        context=context, precision=cfg.precision, prompt_len=cfg.prompt_len,
                        balance=cfg.balance)
    check_fits(plans, *_stage_budget(cfg, device, world))  # before anything is allocated
    stage = Stage(spec, cfg, rank, world, device)
    b = cfg.batch // M
    caches = [[_cache(spec, b, context, device, cfg.precision) for _ in stage.layers] for _ in range(M)]
    prompts = [p.to(device) for p in prompts_of(spec, cfg).split(b)] if stage.first else None
    sync = (lambda: dist.barrier()) if world > 1 else (lambda: None)
    for _ in range(cfg.warmup_runs):
        _generate(stage, spec, cfg, prompts, caches, M, sync)
    run = _generate(stage, spec, cfg, prompts, caches, M, sync)
    mine = {"rank": rank, "plan": plans[rank].to_dict(), "weight_bytes": stage.weight_bytes,
            "kv_cache_bytes": sum(c.k.numel() * c.k.element_size() * 2 for mb in caches for c in mb),
            "busy_s": run["busy_s"], "wall_s": run["wall_s"], "memory": _memory(device),
            "layers": [stage.layers.start, stage.layers.stop]}
    everyone = [mine] if world == 1 else _gather(mine)
    last = run if stage.last else None
    if world > 1:
        last = _gather(run if stage.last else None)[-1]
    out = _metrics(spec, cfg, world, M, device, everyone, last, plans)
    out["rank"] = rank
    if world > 1:
        dist.destroy_process_group()
    return out


def _memory(device) -> dict:
    """Peak memory of this stage: the device's allocator peaks, or the process's VmHWM on CPU."""
    from llmbench.measure import device as dev
    from llmbench.measure.hostmem import peak_rss_bytes

    return {"peak_rss_bytes": peak_rss_bytes()} if device.type == "cpu" else dev.memory_stats(device)


def _cache(spec, batch: int, context: int, device, precision: str):
    from llmbench.measure.modeling import KVCache

    return KVCache(batch, context, spec.n_kv_heads, spec.d_head, device=device, dtype=DTYPES[precision])


def _gather(obj) -> list:
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _metrics(spec, cfg: PipelineConfig, world: int, M: int, device, stages: list, last: dict,
             plans) -> dict:
    from llmbench.footprint import kv_bytes_per_token
    from llmbench.models.counting import param_count

    first, done = last["first_s"], last["last_s"]
    decode = cfg.gen_len - 1
    per_user = [decode / (b - a) for a, b in zip(first, done) if b > a]
    budget, source = _stage_budget(cfg, device, world)
    return {
        "model": spec.name, "params": param_count(spec), "n_layers": spec.n_layers,
        "d_model": spec.d_model, "stages": world, "micro_batches": M, "micro_batch": cfg.batch // M,
        "batch": cfg.batch, "prompt_len": cfg.prompt_len, "gen_len": cfg.gen_len,
        "precision": cfg.precision, "device": str(device), "tokens": last["tokens"],
        "time_to_first_token_s": statistics.mean(first), "time_to_first_token_max_s": max(first),
        "decode_tokens_per_s_per_seq": statistics.mean(per_user) if per_user else None,
        "decode_tokens_per_s": cfg.batch * decode / (max(done) - min(first)) if decode else None,
        "tokens_per_s": cfg.batch * cfg.gen_len / last["wall_s"], "latency_s_p50": last["wall_s"],
        "stage_busy_fraction": [s["busy_s"] / s["wall_s"] for s in stages],
        "stage_memory": [{k: s[k] for k in ("rank", "layers", "weight_bytes", "kv_cache_bytes", "memory")}
                         | {"activation_bytes_estimate": s["plan"]["activation_bytes"],
                            "planned_weight_bytes": s["plan"]["weight_bytes"],
                            "planned_kv_cache_bytes": s["plan"]["kv_cache_bytes"]} for s in stages],
        "weight_bytes": sum(s["weight_bytes"] for s in stages),
        "kv_cache_bytes": sum(s["kv_cache_bytes"] for s in stages),
        "kv_cache_bytes_per_token": kv_bytes_per_token(spec, cfg.precision),
        "stage_memory_budget_bytes": budget, "stage_memory_budget_source": source,
        "max_batch_x_context": max_batch_x_context(plans, budget),
        "predicted": predicted(spec, cfg, world, device),
    }


def _stage_budget(cfg: PipelineConfig, device, world: int) -> tuple[int, str]:
    """--stage-memory-budget, else this machine: its RAM shared by the stages (CPU), or one
    device's memory (GPU)."""
    from llmbench.measure import device as dev

    if cfg.stage_memory_budget_bytes is not None:
        return cfg.stage_memory_budget_bytes, "--stage-memory-budget"
    total = dev.total_memory_bytes(device) or 0
    if device.type == "cpu":
        return total // world, f"RAM / {world} stages"
    return total, "device memory"


def workload_of(cfg: PipelineConfig, world: int, device):
    """The run as a Workload (llmbench.point): infer on this machine's hardware, `world` devices,
    mode sram_pipeline; measured and predicted results of the run share it."""
    from llmbench.measure import device as dev
    from llmbench.point import Layout, hardware_for_device

    return stream_workload(cfg.model, layers=cfg.layers, width=cfg.width, heads=cfg.heads, vocab=cfg.vocab,
                           suite="infer", hardware=hardware_for_device(device.type, dev.device_name(device)),
                           precision=cfg.precision, devices=world, batch=cfg.batch, seq_len=cfg.prompt_len,
                           gen_len=cfg.gen_len, layout=Layout(mode="sram_pipeline"))


def predicted(spec, cfg: PipelineConfig, world: int, device) -> dict | None:
    """perfmodel's prediction of the same Workload (`predict infer --mode sram_pipeline` on this
    machine's hardware); {"error": ...} where the model cannot predict it."""
    from llmbench.perfmodel.predict import predict

    w = workload_of(cfg, world, device)
    try:
        return predict(w).to_dict()
    except (ValueError, KeyError, FileNotFoundError) as e:
        return {"error": str(e)}


def reference_generate(cfg: PipelineConfig) -> list[list[int]]:
    """Single-process greedy decoding with a KV cache, the same weights and prompts (the whole
    batch at once, the LM head on the last position)."""
    from llmbench.measure.modeling import build_model
    from llmbench.streaming.trainers import load_initial

    context = cfg.prompt_len + cfg.gen_len
    spec = spec_of(cfg, context)
    model = build_model(spec, meta=True).to_empty(device="cpu")
    load_initial(model, spec, cfg.seed)
    model.to(DTYPES[cfg.precision])
    caches = model.new_caches(cfg.batch, context)
    x, start, out = prompts_of(spec, cfg), 0, []
    with torch.no_grad():
        for _ in range(cfg.gen_len):
            h = model.embed(x, start=start)  # (B, T, d)
            for block, cache in zip(model.blocks, caches):
                h = block(h, cache)
            start += x.shape[1]
            x = model.head(h[:, -1:, :]).argmax(dim=-1)  # (B, 1)
            out.append(x)
    return torch.cat(out, dim=1).tolist()


def record(db_path: str, cfg: PipelineConfig, out: dict) -> list[str]:
    """Store the measured run and perfmodel's prediction of the same Workload (sources `measured`
    and `predicted`, one workload id) in the results database; returns their keys."""
    from llmbench.measure import device as dev
    from llmbench.point import METRICS
    from llmbench.results.store import ResultsDB

    device = dev.resolve(out["device"])
    w = workload_of(cfg, out["stages"], device)
    measured = {k: v for k, v in out.items() if k in METRICS}
    info = {k: v for k, v in out.items() if k not in METRICS and k not in ("tokens", "predicted")}
    keys = []
    with ResultsDB(db_path) as db:
        keys.append(db.record(w, metrics=measured,
                              environment={**dev.collect_environment(device), "info": info}))
        pred = out.get("predicted") or {}
        if "error" not in pred:
            keys.append(db.record(w, source="predicted",
                                  metrics={k: v for k, v in pred.items() if k in METRICS},
                                  environment={"tool": "llmbench.perfmodel", "beside": "measured"}))
    return keys
