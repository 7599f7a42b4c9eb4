"""A small continuous-batching serving engine in PyTorch: the real runtime the serving simulator is
checked against (issue 22, item 5; benchmarks/serve_sim_vs_runtime.py).

    llmbench measure serve --model gpt2-small --n-layers 2 --rate 4 --requests 200
    from llmbench.measure.serve import EngineConfig, ServingEngine
    replay = ServingEngine(model, EngineConfig(max_num_seqs=16)).replay(read_trace("t.csv"))
    summarize(replay.to_records())     # llmbench/queueing/metrics.py: benchmark_serving's keys

What it does, as vLLM does it, small:
- **Paged KV cache.** Each layer's keys and values live in a pool of `kv_blocks` blocks of
  `block_tokens` tokens (Kwon et al. 2023, arXiv:2309.06180); a sequence holds a list of blocks
  taken from one free list and gives them back when it finishes or is preempted.
- **A step** runs the tokens the scheduler picked, flattened into one (1, N) row: embeddings,
  projections, norms and MLP run once over all N. Attention is split by kind: every one-token
  entry (a decode) of the step is batched into one SDPA call, its keys gathered from the block
  tables and padded to the longest context, a key mask hiding the padding (pad + mask); each
  multi-token entry (a prefill or a prefill chunk) attends alone, causally over its cached prefix
  and itself. Prefill and decode mix in one step under chunked prefill.
- **The scheduler** (the simulator's policies): continuous batching with prefill prioritised
  (vLLM V0 default: a step admits waiting prompts whole while `max_num_seqs`,
  `max_batched_tokens` and free blocks allow, else decodes every running sequence), or chunked
  prefill (Sarathi-Serve, arXiv:2403.02310; vLLM `--enable-chunked-prefill`: decodes first, then
  prefill chunks filling the token budget). When a sequence needs a block and none is free, the
  most recently admitted running sequence is preempted by recompute: its blocks are freed and it
  goes back to the front of the queue, to prefill its prompt and the tokens it has made so far.
- **Greedy decoding**, exactly `output_tokens` tokens per request (EOS ignored, as
  `benchmark_serving --ignore-eos`); prompts are seeded random token ids.
- **Time** is the wall clock from the start of the replay: a request is visible to the scheduler
  from its `arrival_s`, and a token's time is the end of the step that made it (read after the
  device synchronises: the sampled ids are copied to the host).
"""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from llmbench.errors import BadInput
from llmbench.measure import device as dev
from llmbench.measure.modeling import Transformer, apply_rotary, attention_mask, build_model, \
    rotary_cos_sin, softcapped_attention
from llmbench.measure.serve_config import EngineConfig
from llmbench.point import hardware_for_device


@dataclass(frozen=True)
class Request:
    """One request of a trace: when it arrives and how many tokens it reads and writes."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """What the runtime saw of one request (times in s from the start of the replay)."""

    request_id: int
    arrival_s: float
    first_token_s: float
    finish_s: float
    prompt_tokens: int
    output_tokens: int
    token_times_s: tuple[float, ...]  # each output token's time
    preemptions: int
    tokens: tuple[int, ...]  # the generated ids (the tests compare them with unbatched decoding)


@dataclass(frozen=True, kw_only=True)
class Replay:
    """A replayed trace: the records in request order and the engine's own counts."""

    records: tuple[RequestRecord, ...]
    kv_blocks: int
    free_blocks_at_end: int  # == kv_blocks: no block leaked
    preemptions: int
    steps: int
    duration_s: float
    kv_cache_utilization: float  # blocks in use / blocks, the mean over steps
    step_log: tuple = ()  # StepRecords when replay(log_steps=True): each step's shape and time

    def to_records(self):
        """The records as the simulator gives them (llmbench/queueing/metrics.py RequestRecords)."""
        from llmbench.queueing.metrics import RequestRecords, itls_from_token_times

        col = lambda name, dtype=np.float64: np.array([getattr(r, name) for r in self.records], dtype)  # noqa: E731
        return RequestRecords(col("arrival_s"), col("first_token_s"), col("finish_s"),
                              col("prompt_tokens", np.int64), col("output_tokens", np.int64),
                              itl_s=itls_from_token_times([r.token_times_s for r in self.records]),
                              preemptions=col("preemptions", np.int64))


@dataclass(frozen=True)
class StepRecord:
    """One engine step of a replay, in the step model's arguments (perfmodel/serving.py
    StepModel.time_s), its wall time and the longest decode context (pad + mask attends over it)."""

    start_s: float
    time_s: float
    prefill_tokens: int
    decode_seqs: int
    kv_tokens_read: int  # cached tokens the attention reads: decodes' contexts + chunks' prefixes
    prefill_seqs: int  # prompts whose last token is in the step
    prefill_attn_pairs: float
    max_decode_context: int


def step_record(plan, start_s: float, end_s: float) -> StepRecord:
    """The StepRecord of `plan` (read before the step advances the sequences). A decode is a
    sequence's one last token after it has generated one (as the simulator counts: a 1-token
    prompt chunk is prefill, though the runtime attends to it on the decode path)."""
    is_dec = [n == 1 and s.computed + 1 == len(s.tokens) > s.prompt_len for s, n in plan]
    dec = [s.computed for (s, _), d in zip(plan, is_dec) if d]
    pre = [(s.computed, n, s.computed + n == len(s.tokens)) for (s, n), d in zip(plan, is_dec) if not d]
    return StepRecord(start_s=start_s, time_s=end_s - start_s, prefill_tokens=sum(n for _, n, _ in pre),
                      decode_seqs=len(dec), kv_tokens_read=sum(dec) + sum(c for c, _, _ in pre),
                      prefill_seqs=sum(e for _, _, e in pre),
                      prefill_attn_pairs=float(sum(c * n + n * (n + 1) / 2 for c, n, _ in pre)),
                      max_decode_context=max(dec, default=0))


def requests_of(trace) -> list[Request]:
    """A llmbench/queueing/trace.py Trace (arrays) -> Requests."""
    return [Request(float(a), int(p), int(o)) for a, p, o in
            zip(trace.arrival_s, trace.prompt_tokens, trace.output_tokens)]


# ---------------------------------------------------------------- KV blocks and sequences

class BlockAllocator:
    """The free list of KV blocks (ids 0 .. n_blocks - 1)."""

    def __init__(self, n_blocks: int):
        self.n_blocks = n_blocks
        self.free = list(range(n_blocks - 1, -1, -1))  # pop() hands out 0, 1, 2, ...

    def take(self, n: int) -> list[int] | None:
        if n > len(self.free):
            return None
        return [self.free.pop() for _ in range(n)]

    def give(self, blocks: list[int]) -> None:
        self.free.extend(reversed(blocks))


@dataclass(eq=False)
class _Seq:
    """A request in the engine: its tokens (prompt + made so far), how many have KV in the cache."""

    rid: int
    arrival_s: float
    prompt_len: int
    max_out: int
    tokens: list[int]
    computed: int = 0
    blocks: list[int] = field(default_factory=list)
    token_times_s: list[float] = field(default_factory=list)
    preemptions: int = 0

    @property
    def to_compute(self) -> int:
        return len(self.tokens) - self.computed

    @property
    def done(self) -> bool:
        return len(self.tokens) - self.prompt_len >= self.max_out

    def record(self) -> RequestRecord:
        times = tuple(self.token_times_s)
        return RequestRecord(request_id=self.rid, arrival_s=self.arrival_s, first_token_s=times[0],
                             finish_s=times[-1], prompt_tokens=self.prompt_len,
                             output_tokens=len(times), token_times_s=times,
                             preemptions=self.preemptions, tokens=tuple(self.tokens[self.prompt_len:]))


# ---------------------------------------------------------------- scheduler (no torch)

class Scheduler:
    """Which sequences run in the next step, and how many of their tokens: a plan
    [(seq, n_tokens)]. Owns the waiting queue, the running list and the block free list."""

    def __init__(self, cfg: EngineConfig, n_blocks: int):
        self.cfg = cfg
        self.alloc = BlockAllocator(n_blocks)
        self.waiting: deque[_Seq] = deque()
        self.running: list[_Seq] = []
        self.preemptions = 0

    def schedule(self) -> list[tuple[_Seq, int]]:
        if self.cfg.chunked_prefill:
            plan, budget = self._running_steps(self.cfg.max_batched_tokens)
            return plan + self._admit(budget, whole=False)
        plan = self._admit(self.cfg.max_batched_tokens, whole=True)
        return plan or self._running_steps(self.cfg.max_batched_tokens)[0]

    def _admit(self, budget: int, *, whole: bool) -> list[tuple[_Seq, int]]:
        """Waiting sequences, in order, while seats, token budget and blocks allow."""
        plan = []
        while self.waiting and len(self.running) < self.cfg.max_num_seqs and budget > 0:
            s = self.waiting[0]
            n = s.to_compute if whole else min(s.to_compute, budget)
            if n > budget or not self._grow(s, s.computed + n):
                break
            self.running.append(self.waiting.popleft())
            plan.append((s, n))
            budget -= n
        return plan

    def _running_steps(self, budget: int) -> tuple[list[tuple[_Seq, int]], int]:
        """Decodes first, then unfinished prefills (chunked), within the budget; a sequence that
        needs a block when none is free preempts the last one in that order (itself, last)."""
        order = deque([s for s in self.running if s.to_compute == 1]
                      + [s for s in self.running if s.to_compute > 1])
        plan = []
        while order and budget > 0:
            s = order.popleft()
            n = min(s.to_compute, budget)
            while not self._grow(s, s.computed + n) and s in self.running:
                self._preempt(order.pop() if order else s)
            if s in self.running:
                plan.append((s, n))
                budget -= n
        return plan, budget

    def _grow(self, s: _Seq, n_tokens: int) -> bool:
        need = math.ceil(n_tokens / self.cfg.block_tokens) - len(s.blocks)
        if need <= 0:
            return True
        got = self.alloc.take(need)
        if got is None:
            return False
        s.blocks.extend(got)
        return True

    def _preempt(self, s: _Seq) -> None:
        """Recompute (vLLM's default for a single sequence): drop its KV, requeue it first."""
        self.release(s)
        s.computed = 0
        s.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(s)

    def release(self, s: _Seq) -> None:
        self.alloc.give(s.blocks)
        s.blocks = []
        self.running.remove(s)


# ---------------------------------------------------------------- one step on the device

@dataclass(frozen=True)
class _StepMeta:
    """Index tensors of one step, shared by every layer (built once per step)."""

    positions: torch.Tensor  # (N,) each token's position in its sequence
    write_blocks: torch.Tensor  # (N,) the block each token's K/V goes to
    write_offsets: torch.Tensor  # (N,) its slot in that block
    dec_idx: torch.Tensor  # (D,) the one-token entries' tokens in the row
    dec_tables: torch.Tensor  # (D, nb) their block tables, padded with block 0
    dec_pos: torch.Tensor  # (D,) their positions
    segments: tuple  # (offset, n, block table (nb,), cached prefix) of each multi-token entry
    last: torch.Tensor  # (P,) each entry's last token in the row (where the next token is read)


def _step_meta(plan, block_tokens: int, device) -> _StepMeta:
    pos, blk, off, dec, dec_tables, dec_pos, segs, last = [], [], [], [], [], [], [], []
    width = max(len(s.blocks) for s, n in plan if n == 1) if any(n == 1 for _, n in plan) else 0
    o = 0
    for s, n in plan:
        p = list(range(s.computed, s.computed + n))
        pos += p
        blk += [s.blocks[i // block_tokens] for i in p]
        off += [i % block_tokens for i in p]
        if n == 1:
            dec.append(o)
            dec_tables.append(s.blocks + [0] * (width - len(s.blocks)))
            dec_pos.append(s.computed)
        else:
            segs.append((o, n, torch.tensor(s.blocks, device=device), s.computed))
        last.append(o + n - 1)
        o += n
    t = lambda x: torch.tensor(x, dtype=torch.long, device=device)  # noqa: E731
    return _StepMeta(t(pos), t(blk), t(off), t(dec), t(dec_tables).view(len(dec), width), t(dec_pos),
                     tuple(segs), t(last))


class _LayerKV:
    """One layer's view of a step for Attention.forward (modeling.py's `ragged` hook): writes the
    new K/V into the block pool, then attends per kind of entry."""

    ragged = True

    def __init__(self, meta: _StepMeta, k_pool: torch.Tensor, v_pool: torch.Tensor, scratch: dict):
        self.meta, self.k_pool, self.v_pool = meta, k_pool, v_pool  # pools: (blocks, bt, hk, hd)
        self.scratch = scratch  # gather buffers reused by every layer and step (see _gather)

    def attend(self, q, k, v, attn) -> torch.Tensor:
        """q (1, h, N, hd), k and v (1, hk, N, hd) -> (1, N, h hd)."""
        m = self.meta
        if attn.n_rot:
            cos, sin = rotary_cos_sin(attn.n_rot, m.positions, q.dtype)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        self.k_pool[m.write_blocks, m.write_offsets] = k[0].transpose(0, 1)  # (N, hk, hd)
        self.v_pool[m.write_blocks, m.write_offsets] = v[0].transpose(0, 1)
        y = torch.empty_like(q)  # (1, h, N, hd)
        if m.dec_idx.numel():
            y[0, :, m.dec_idx] = self._decode(q[0, :, m.dec_idx], attn)
        for o, n, table, cached in m.segments:
            own = (k[:, :, o:o + n], v[:, :, o:o + n])  # a fresh prompt attends to these alone
            y[:, :, o:o + n] = self._prefill(q[:, :, o:o + n], table, cached, own, attn)
        N = q.shape[2]
        return y.transpose(1, 2).reshape(1, N, -1)

    def _gather(self, which: str, tables: torch.Tensor) -> torch.Tensor:
        """(B, nb) block tables -> (B, hk, nb bt, hd) keys ("k") or values ("v") in position
        order: one index_select of whole blocks into a reused buffer (a fresh buffer each call
        page-faults: it cost as much as the copy on this CPU), the rest views."""
        pool = self.k_pool if which == "k" else self.v_pool
        n_blocks, bt, hk, hd = pool.shape
        B, nb = tables.shape
        size = B * nb * bt * hk * hd
        buf = self.scratch.get(which)
        if buf is None or buf.numel() < size:
            buf = self.scratch[which] = pool.new_empty(max(size, 2 * (0 if buf is None else buf.numel())))
        x = buf[:size].view(B * nb, bt, hk, hd)
        torch.index_select(pool, 0, tables.reshape(-1), out=x)
        return x.view(B, nb * bt, hk, hd).transpose(1, 2)

    def _decode(self, q, attn) -> torch.Tensor:
        """q (h, D, hd) of D one-token entries -> (h, D, hd): pad + mask over their contexts."""
        m = self.meta
        k, v = self._gather("k", m.dec_tables), self._gather("v", m.dec_tables)
        j = torch.arange(k.shape[2], device=q.device)  # (S,) key positions
        mask = j <= m.dec_pos[:, None]  # (D, S): its own context only, the padding hidden
        if attn.window:
            mask &= m.dec_pos[:, None] - j < attn.window
        y = _sdpa(q.transpose(0, 1).unsqueeze(2), k, v, mask[:, None, None, :], attn)  # (D, h, 1, hd)
        return y.squeeze(2).transpose(0, 1)

    def _prefill(self, q, table, cached: int, own, attn) -> torch.Tensor:
        """q (1, h, n, hd) of one chunk after `cached` cached tokens -> (1, h, n, hd); `own`:
        the chunk's own k and v, all the keys a fresh prompt has."""
        n = q.shape[2]
        if cached == 0:
            k, v = own
        else:
            k = self._gather("k", table[None])[:, :, :cached + n]  # (1, hk, cached + n, hd)
            v = self._gather("v", table[None])[:, :, :cached + n]
        if cached == 0 and not attn.window and not attn.softcap:
            return _sdpa(q, k, v, None, attn, causal=True)
        return _sdpa(q, k, v, attention_mask(n, cached, attn.window, q.device), attn)


def _sdpa(q, k, v, mask, attn, causal: bool = False) -> torch.Tensor:
    if attn.softcap:
        return softcapped_attention(q, k, v, mask, attn.softcap)
    kwargs = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, **kwargs)


def check_servable(spec) -> None:
    if spec.head != "lm" or not spec.causal or spec.is_mla:
        raise BadInput(f"model {spec.name!r}: serving needs a causal LM without latent attention (MLA)")


class StepRunner:
    """The model and its KV block pool; `step(plan)` runs one engine step and returns each
    entry's next token (greedy), read at the entry's last token."""

    def __init__(self, model: Transformer, n_blocks: int, block_tokens: int):
        spec = model.spec
        check_servable(spec)
        p = next(model.parameters())
        shape = (n_blocks, block_tokens, spec.n_kv_heads, spec.d_head)  # a block: bt tokens' K (or V)
        self.model, self.block_tokens, self.device = model.eval(), block_tokens, p.device
        self.k = [torch.zeros(shape, device=p.device, dtype=p.dtype) for _ in range(spec.n_layers)]
        self.v = [torch.zeros(shape, device=p.device, dtype=p.dtype) for _ in range(spec.n_layers)]
        self.scratch: dict = {}

    @torch.inference_mode()
    def step(self, plan: list[tuple[_Seq, int]]) -> list[int]:
        meta = _step_meta(plan, self.block_tokens, self.device)
        ids = [t for s, n in plan for t in s.tokens[s.computed:s.computed + n]]
        x = self.model.embed(torch.tensor([ids], device=self.device), start=meta.positions)  # (1, N, C)
        for block, k, v in zip(self.model.blocks, self.k, self.v):
            x = block(x, _LayerKV(meta, k, v, self.scratch))
        logits = self.model.head(x[:, meta.last])  # (1, P, V): the head only where a token is read
        return logits[0].argmax(-1).tolist()  # copies to the host: the device has finished


# ---------------------------------------------------------------- the engine: replay a trace

class WallClock:
    """Seconds since the replay began; sleeping waits for real."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def sleep_until(self, t_s: float) -> None:
        time.sleep(max(0.0, t_s - self.now()))


def check_requests(spec, cfg: EngineConfig, requests) -> int:
    """Requests this engine cannot serve as BadInput, before anything runs; else the KV pool's
    block count (cfg.kv_blocks, or max_num_seqs of the longest request)."""
    if not requests:
        raise BadInput("no requests to serve")
    longest = max(r.prompt_tokens + r.output_tokens for r in requests)
    for r in requests:
        if r.prompt_tokens < 1 or r.output_tokens < 1 or not math.isfinite(r.arrival_s) or r.arrival_s < 0:
            raise BadInput(f"request {r}: needs prompt and output tokens >= 1 and a finite arrival >= 0")
    if longest > spec.max_seq_len:
        raise BadInput(f"a request of {longest} tokens exceeds {spec.name}'s max_seq_len {spec.max_seq_len}")
    if not cfg.chunked_prefill and longest > cfg.max_batched_tokens:
        raise BadInput(f"max_batched_tokens {cfg.max_batched_tokens} < the longest request ({longest} "
                     "tokens): without chunked prefill a prompt (recomputed with its output) runs whole")
    per_seq = math.ceil(longest / cfg.block_tokens)
    n_blocks = cfg.kv_blocks or cfg.max_num_seqs * per_seq
    if n_blocks < per_seq:
        raise BadInput(f"kv_blocks {n_blocks} cannot hold the longest request ({per_seq} blocks of "
                     f"{cfg.block_tokens} tokens)")
    return n_blocks


class _NoClock:
    """Time stands still (the warm-up; tests that compare tokens, not times)."""

    def now(self) -> float:
        return 0.0

    def sleep_until(self, t_s: float) -> None:
        pass


class ServingEngine:
    """Continuous batching over a StepRunner: `replay(requests)` -> a Replay (one RequestRecord
    per request, in request order). `max_concurrency`: a closed loop (as benchmark_serving --max-concurrency):
    a request becomes visible at its arrival time or when fewer than that many are outstanding,
    whichever is later."""

    def __init__(self, model: Transformer, cfg: EngineConfig = EngineConfig(), *, seed: int = 0):
        self.model, self.cfg, self.seed = model, cfg, seed

    def check(self, requests) -> int:
        """Bad requests as BadInput before anything runs; the pool's block count."""
        return check_requests(self.model.spec, self.cfg, requests)

    def replay(self, requests, *, clock=None, max_concurrency: int | None = None, log_steps: bool = False) -> Replay:
        """Serve `requests` (Requests, or a Trace) as they arrive; `clock`: WallClock by default;
        `log_steps`: keep a StepRecord of every step (Replay.step_log; nothing is done when off)."""
        if hasattr(requests, "prompt_tokens"):
            requests = requests_of(requests)
        n_blocks = self.check(requests)
        runner = StepRunner(self.model, n_blocks, self.cfg.block_tokens)
        sched = Scheduler(self.cfg, n_blocks)
        seqs = self._sequences(requests)
        pending = deque(sorted(seqs, key=lambda s: (s.arrival_s, s.rid)))
        clock = clock or WallClock()
        done: list[_Seq] = []
        last_s, steps, used, log = -math.inf, 0, 0, []
        while len(done) < len(seqs):
            now_s = clock.now()
            self._arrive(pending, sched, now_s, max_concurrency, last_s)
            last_s = now_s
            if not sched.waiting and not sched.running:
                clock.sleep_until(pending[0].arrival_s)
                continue
            plan = sched.schedule()
            used += n_blocks - len(sched.alloc.free)
            t0 = clock.now() if log_steps else 0.0
            next_ids = runner.step(plan)
            steps += 1
            t1 = clock.now()
            if log_steps:
                log.append(step_record(plan, t0, t1))
            done += self._advance(plan, next_ids, sched, t1)
        return Replay(records=tuple(s.record() for s in sorted(done, key=lambda s: s.rid)),
                      kv_blocks=n_blocks, free_blocks_at_end=len(sched.alloc.free),
                      preemptions=sched.preemptions, steps=steps, duration_s=clock.now(),
                      kv_cache_utilization=used / (steps * n_blocks), step_log=tuple(log))

    def warm_up(self) -> None:
        """Two short requests through every code path (prefill, batched decode), untimed: the first
        calls of a kernel allocate and pick algorithms (a served engine is warm before traffic)."""
        self.replay([Request(0.0, 8, 4), Request(0.0, 5, 4)], clock=_NoClock())

    def _sequences(self, requests) -> list[_Seq]:
        """Seeded random prompts (request i's ids depend on the seed and i only)."""
        vocab = self.model.spec.vocab_size
        out = []
        for i, r in enumerate(requests):
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
            ids = torch.randint(0, vocab, (r.prompt_tokens,), generator=g).tolist()
            out.append(_Seq(i, float(r.arrival_s), r.prompt_tokens, r.output_tokens, ids))
        return out

    @staticmethod
    def _arrive(pending: deque, sched: Scheduler, now_s: float, limit: int | None, last_s: float) -> None:
        """Arrived requests join the queue. Closed loop: a request that had arrived by the last
        look (last_s) but found no seat arrives now, when it gets one (benchmark_serving starts
        its clock after taking the semaphore)."""
        outstanding = len(sched.waiting) + len(sched.running)
        while pending and pending[0].arrival_s <= now_s and (limit is None or outstanding < limit):
            s = pending.popleft()
            if s.arrival_s <= last_s:
                s.arrival_s = now_s
            sched.waiting.append(s)
            outstanding += 1

    @staticmethod
    def _advance(plan, next_ids: list[int], sched: Scheduler, now_s: float) -> list[_Seq]:
        """Each entry's KV is now cached; an entry that reached its last token emits the next one;
        a finished sequence gives its blocks back."""
        finished = []
        for (s, n), tok in zip(plan, next_ids):
            s.computed += n
            if s.computed < len(s.tokens):
                continue  # a prefill chunk that is not the prompt's last
            s.tokens.append(tok)
            s.token_times_s.append(now_s)
            if s.done:
                sched.release(s)
                finished.append(s)
        return finished


def measure_serve(spec, trace, cfg: EngineConfig = EngineConfig(), *, device: str = "auto",
                  precision: str | None = None, seed: int = 0,
                  max_concurrency: int | None = None, threads: int | None = None) -> tuple[Replay, dict]:
    """Build `spec` on the device (seeded weights), warm the engine, replay `trace` (a Trace or
    Requests) in wall-clock time: (the replay, what ran where)."""
    check_servable(spec)
    d = dev.resolve(device)
    if threads:
        torch.set_num_threads(threads)
    precision = precision or ("fp32" if d.type == "cpu" else "bf16")
    ok, why = dev.supports_dtype(d, precision)
    if not ok:
        raise BadInput(f"--precision {precision}: {why}")
    dev.set_precision(d, precision)
    torch.manual_seed(seed)
    model = build_model(spec, device=d, dtype=dev.dtype_of(precision)).eval()
    engine = ServingEngine(model, cfg, seed=seed)
    requests = requests_of(trace) if hasattr(trace, "prompt_tokens") else list(trace)
    engine.check(requests)
    engine.warm_up()
    replay = engine.replay(requests, max_concurrency=max_concurrency)
    name = dev.device_name(d)
    info = {"device": name, "device_type": d.type, "hardware": hardware_for_device(d.type, name),
            "precision": precision, "torch": torch.__version__, "threads": torch.get_num_threads(), "steps": replay.steps,
            "kv_blocks": replay.kv_blocks, "block_tokens": cfg.block_tokens}
    return replay, info


def time_static_steps(runner: StepRunner, shapes, *, repeats: int = 3, stat: str = "median") -> list[float]:
    """Wall time (s) of each engine step `shapes` names: (decode sequences, cached tokens each,
    prompt tokens, prompts): that many decodes over that context plus that many fresh prompts. The
    calibration sweep the simulator's step model is fitted on, timed by this runtime. The shapes
    are timed in turn, round after round (a serving engine rarely runs one shape twice in a row:
    new shapes cost allocations and kernel choices), after one untimed round. stat: the median of
    the `repeats` timings (the typical step) or their mean (with the tail of slow steps a replay
    pays, which TPOT and throughput average in)."""
    if stat not in ("median", "mean"):
        raise ValueError(f"stat must be 'median' or 'mean', got {stat!r}")
    plans = [_static_plan(runner.block_tokens, *shape) for shape in shapes]
    times = [[] for _ in plans]
    for round_ in range(repeats + 1):
        for plan, ts in zip(plans, times):
            t0 = time.perf_counter()
            runner.step(plan)
            if round_:
                ts.append(time.perf_counter() - t0)
    return [float(np.median(ts) if stat == "median" else np.mean(ts)) for ts in times]


def _static_plan(bt: int, decode_seqs: int, context_tokens: int, prompt_tokens: int, prompts: int):
    """Sequences with blocks 0, 1, 2, ... (a runner of `static_step_blocks` blocks holds them)."""
    blocks = iter(range(static_step_blocks(decode_seqs, context_tokens, prompt_tokens, bt, prompts)))
    plan = []
    for i in range(decode_seqs):
        s = _Seq(i, 0.0, context_tokens, 1, [1] * (context_tokens + 1), computed=context_tokens)
        s.blocks = [next(blocks) for _ in range(math.ceil((context_tokens + 1) / bt))]
        plan.append((s, 1))
    for i in range(prompts if prompt_tokens else 0):
        s = _Seq(decode_seqs + i, 0.0, prompt_tokens, 1, [1] * prompt_tokens)
        s.blocks = [next(blocks) for _ in range(math.ceil(prompt_tokens / bt))]
        plan.append((s, prompt_tokens))
    return plan


def static_step_blocks(decode_seqs: int, context_tokens: int, prompt_tokens: int, block_tokens: int,
                       prompts: int = 1) -> int:
    return (decode_seqs * math.ceil((context_tokens + 1) / block_tokens)
            + prompts * math.ceil(prompt_tokens / block_tokens))
