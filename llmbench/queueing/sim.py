"""A request-level serving simulator: discrete events over engine steps, each step's time from a
per-step cost model. Torch-free (numpy); `llmbench serve` runs it.

    from llmbench.queueing.sim import Scheduler, simulate
    res = simulate(trace, step_model, Scheduler(policy="continuous", max_num_seqs=256))
    summarize(res.records, slo=...)

The step model is anything with `time_s(prefill_tokens, decode_seqs, kv_tokens_read, *,
prefill_seqs, prefill_attn_pairs)` (numpy arrays in, seconds out, element-wise: prompt tokens
processed, sequences decoding one token, cached tokens the attention reads, prompts whose last
token is processed, causal query x key pairs of the prompt chunks) and `kv_capacity_tokens` (KV-cache
tokens one replica holds): `llmbench.perfmodel.serving.step_model` builds it from the model,
hardware, layout and engine.

The engine, as vLLM, Orca and Sarathi-Serve describe theirs:
  - a request waits in a FCFS queue; it is admitted at a step boundary when a sequence slot
    (`max_num_seqs`), the step's token budget (`max_batched_tokens`) and free KV blocks allow;
  - `continuous` (Orca; vLLM without chunked prefill): a step with admissible prompts prefills
    them whole and pauses the decodes (prefill prioritised); otherwise every running sequence
    decodes one token;
  - `chunked` (Sarathi-Serve; vLLM --enable-chunked-prefill, the V1 default; SGLang): every step
    decodes all running sequences and fills the rest of the token budget with prompt chunks, the
    running prompts first, then new ones;
  - `static`: a batch of up to max_num_seqs waiting requests, prompts padded to the longest,
    decoded until its longest output is done; every request returns at the batch's end; the next
    batch starts then (HF `generate` behind a queue);
  - paged KV: a sequence holds ceil(tokens / block_tokens) blocks; when a decode needs a block and
    none is free, the latest admitted sequence is preempted (recompute, vLLM's default): its
    blocks freed, it goes back to the head of the queue and later prefills prompt + generated
    tokens again; a request that could never fit alone is rejected (it counts as failed);
  - replicas behind a router (`round_robin`, `least_outstanding`: fewest unfinished requests);
  - a client concurrency limit (`max_concurrency`: the closed loop of benchmark_serving
    --max-concurrency): a request is sent at its arrival time or when an earlier one finishes;
  - `padded_decode`: a step's decodes attend over the longest one's context (pad + mask, as
    llmbench's own runtime measure/serve.py batches them); off: each over its own (paged attention).
Steps in which nothing but decodes change are taken many at once (the step model is vectorised
over them), so the cost is per event (arrival, finish, block shortage), not per token.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from llmbench.errors import BadInput
from llmbench.queueing.metrics import RequestRecords
from llmbench.queueing.trace import Trace

POLICIES = ("continuous", "chunked", "static")
ROUTERS = ("round_robin", "least_outstanding")
#: the most decode steps taken in one go (bounds the arrays of one run)
MAX_RUN_STEPS = 4096
#: runs of at most this many steps are timed one scalar call a step (cheaper than one array call)
SCALAR_STEPS = 8
_ZEROS = np.zeros(MAX_RUN_STEPS)
_STEP_INDEX = np.arange(MAX_RUN_STEPS, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class Scheduler:
    """The engine's scheduler knobs (vLLM's names where it has one)."""
    policy: str = "chunked"           # continuous | chunked | static
    max_num_seqs: int = 256           # sequences running at once (vLLM --max-num-seqs)
    max_batched_tokens: int = 8192    # tokens one step processes (vLLM --max-num-batched-tokens)
    block_tokens: int = 16            # tokens per paged KV block (vLLM --block-size)
    replicas: int = 1                 # engine replicas behind the router
    router: str = "round_robin"       # round_robin | least_outstanding
    max_concurrency: int | None = None  # requests in flight from the client (closed loop)
    padded_decode: bool = False       # a step's decodes attend over the longest one's context
    """(pad + mask, as measure/serve.py batches them: cached tokens read = decodes x the longest
    context); False: each over its own (paged attention, vLLM and the others)"""

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise BadInput(f"--policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.router not in ROUTERS:
            raise BadInput(f"--router must be one of {', '.join(ROUTERS)}, got {self.router!r}")
        for name in ("max_num_seqs", "max_batched_tokens", "block_tokens", "replicas"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise BadInput(f"--{name.replace('_', '-')} must be an integer >= 1, got {getattr(self, name)}")
        if self.max_concurrency is not None and not self.max_concurrency >= 1:
            raise BadInput(f"--max-concurrency must be an integer >= 1, got {self.max_concurrency}")


def engine_scheduler(engine, **given) -> Scheduler:
    """The scheduler a serving engine runs by default, under the knobs `given` (None: the default):
    chunked prefill at the engine's chunk budget where it chunks, else whole prompts at the
    Scheduler's budget, in the engine's paged blocks, at the release's max_num_seqs where it has
    one (else the Scheduler's default); a knob `given` replaces the engine's, as a flag replaces
    an engine's default. `engine` has chunked_prefill_tokens, block_tokens and max_num_seqs
    (perfmodel's serving.Engine)."""
    chunk = engine.chunked_prefill_tokens
    knobs = {"policy": "chunked" if chunk else "continuous", "block_tokens": engine.block_tokens,
             **({"max_batched_tokens": chunk} if chunk else {}),
             **({"max_num_seqs": engine.max_num_seqs} if engine.max_num_seqs else {})}
    knobs.update({k: v for k, v in given.items() if v is not None})
    return Scheduler(**knobs)


@dataclass(frozen=True)
class SimResult:
    """What the simulator saw: per-request records and the engines' figures."""
    records: RequestRecords
    steps: int                      # engine steps over all replicas
    preemptions: int
    rejected: int                   # requests that could never fit in a replica's KV cache
    kv_cache_utilization: float     # KV blocks in use / blocks, time-averaged over busy replicas
    max_kv_cache_utilization: float
    kv_capacity_tokens: int         # per replica
    extra: dict = field(default_factory=dict)


class _DecodeLines(dict):
    """n -> the decode step of n sequences as exact lines in the cached tokens read, kv:
    (attention's compute c0 + c1 kv, its memory m0 + m1 kv, the rest: the GEMMs, elementwise
    kernels, collectives and overheads), its time max(compute, memory) + the rest, as
    perfmodel/serving.py composes it. Each n is checked against the model's own time_s at
    several kv (both ends, the lines' crossing); a model without parts(), or one that fails the
    check, is called step by step (None). Why: a decode run's steps then cost no model call."""

    KV_FIT = 1e6
    KV_CHECK = (0.0, 3.3e5, 4e7)

    def __init__(self, step):
        super().__init__()
        self.step = step if hasattr(step, "parts") else None

    def __missing__(self, n: int):
        self[n] = self._fit(n) if self.step is not None else None
        return self[n]

    def _parts(self, n: int, kv: float):
        return self.step.parts(0.0, float(n), kv, prefill_seqs=0.0, prefill_attn_pairs=0.0)

    def _fit(self, n: int):
        a, b = self._parts(n, 0.0), self._parts(n, self.KV_FIT)
        if a.other_s is None:
            return None
        rest = float(a.other_s) + float(a.comm_s) + float(a.overhead_s)
        if rest != float(b.other_s) + float(b.comm_s) + float(b.overhead_s):
            return None
        c0, m0 = float(a.attention_compute_s), float(a.attention_memory_s)
        c1 = (float(b.attention_compute_s) - c0) / self.KV_FIT
        m1 = (float(b.attention_memory_s) - m0) / self.KV_FIT
        checks = list(self.KV_CHECK) + ([(c0 - m0) / (m1 - c1)] if m1 != c1 and (c0 - m0) / (m1 - c1) > 0 else [])
        for kv in checks:
            want = float(self.step.time_s(0.0, float(n), kv, prefill_seqs=0.0, prefill_attn_pairs=0.0))
            if not math.isclose(max(c0 + c1 * kv, m0 + m1 * kv) + rest, want, rel_tol=1e-9, abs_tol=1e-15):
                return None
        return c0, c1, m0, m1, rest


class _Requests:
    """Every request's record, as arrays (index = request id); the replicas hold the state of the
    sequences they run in their own compact arrays and write back here on finish or preemption."""

    def __init__(self, trace: Trace):
        n = len(trace)
        self.sent = np.full(n, np.nan)
        self.prompt = trace.prompt_tokens.astype(np.int64)
        self.output = trace.output_tokens.astype(np.int64)
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.gen = np.zeros(n, np.int64)       # tokens generated before a preemption
        self.last = np.full(n, np.nan)         # time of the latest token before a preemption
        self.preempted = np.zeros(n, np.int64)
        self.admitted = np.full(n, np.nan)     # first admission to a replica's running set
        self.replica = np.full(n, -1, np.int64)
        self.itl: list[np.ndarray] = []                      # ITLs, one each
        self.itl_runs: list[tuple[np.ndarray, int]] = []     # (ITLs, how many sequences had each)

    def itls(self) -> np.ndarray:
        """Every ITL, pooled (the order is not kept: the summary's statistics do not need it)."""
        if not self.itl_runs:
            return np.concatenate(self.itl) if self.itl else np.zeros(0)
        gaps = np.concatenate([v for v, _ in self.itl_runs])
        times = np.repeat(np.array([n for _, n in self.itl_runs]), [len(v) for v, _ in self.itl_runs])
        return np.concatenate(self.itl + [np.repeat(gaps, times)])


#: the compact per-sequence arrays of a replica, in admission order
_COLS = ("ids", "ctx", "gen", "out", "blk", "todo", "last")


class _Replica:
    """One engine: its FCFS queue, its running sequences (compact arrays in admission order: ids,
    tokens in the KV cache, generated, to generate, blocks held, tokens to process before the
    next token comes out, time of the latest token), its KV blocks and its clock."""

    def __init__(self, idx: int, reqs: _Requests, step, sched: Scheduler, total_blocks: int):
        self.idx, self.r, self.step, self.s = idx, reqs, step, sched
        self.lines = _DecodeLines(step)
        self.bt = sched.block_tokens
        self.total = self.free = total_blocks
        self.clock = 0.0
        self.waiting: deque = deque()
        for c in _COLS:
            setattr(self, c, np.zeros(0, np.float64 if c == "last" else np.int64))
        self.assigned = 0
        self.finish_times: list[float] = []   # in time order (for the router)
        self.steps = self.preemptions = 0
        self.busy_s = self.block_s = 0.0      # busy time; integral of blocks in use over it
        self.seq_s = 0.0                      # integral of running sequences over time
        self.max_used = 0

    def idle(self) -> bool:
        return not self.waiting and not len(self.ids)

    def add(self, i: int, t_s: float) -> None:
        if self.idle():
            self.clock = max(self.clock, t_s)
        self.r.replica[i] = self.idx
        self.waiting.append(i)
        self.assigned += 1

    def outstanding(self, t_s: float) -> int:
        return self.assigned - bisect_right(self.finish_times, t_s)

    def advance(self, until_s: float, force_cut: bool = False) -> None:
        """Take steps while the clock is before `until_s` (a step begun runs to its end)."""
        while self.clock < until_s and not self.idle():
            self.run(until_s, force_cut)

    def run(self, until_s: float, force_cut: bool = False) -> None:
        """One scheduling decision: a prefill or mixed step, a run of decode steps or a batch."""
        steps = self.steps
        if self.s.policy == "static":
            self._static_batch()
        elif self.s.policy == "continuous":
            n0 = len(self.ids)
            if self._admit(whole=True, budget=self.s.max_batched_tokens, free=self.free):
                take = np.zeros(len(self.ids), np.int64)
                take[n0:] = self.todo[n0:]  # the prompts whole; the decodes wait (Orca, vLLM V0)
                self._step(take)
            else:
                self._make_room()
                self._decode_run(slice(None), until_s, force_cut)
        else:
            self._chunked(until_s, force_cut)
        if self.steps == steps:  # a bug, never a hang
            raise RuntimeError(f"replica {self.idx}: no step possible at t={self.clock:.6g} s")

    # ------------------------------------------------------------ admission, blocks, preemption

    def _admit(self, whole: bool, budget: int, free: int) -> int:
        """Admit waiting requests, FCFS, stopping at the first that does not fit; whole: each
        needs its whole prompt in the budget (the first one may exceed it), else a chunk of it.
        Returns how many joined (at the end of the compact arrays)."""
        r, new = self.r, []
        while self.waiting and len(self.ids) + len(new) < self.s.max_num_seqs and budget > 0:
            i = self.waiting[0]
            todo = int(r.prompt[i] + r.gen[i])
            t = todo if whole else min(todo, budget)
            if whole and new and t > budget:
                break
            need = -(-t // self.bt)
            if need > free:
                break
            free, budget = free - need, budget - t
            new.append(self.waiting.popleft())
        if new:
            ids = np.asarray(new, np.int64)
            r.admitted[ids] = np.fmin(r.admitted[ids], self.clock)
            add = {"ids": ids, "ctx": np.zeros(len(ids), np.int64), "gen": r.gen[ids],
                   "out": r.output[ids], "blk": np.zeros(len(ids), np.int64),
                   "todo": r.prompt[ids] + r.gen[ids], "last": r.last[ids]}
            for c in _COLS:
                setattr(self, c, np.concatenate([getattr(self, c), add[c]]))
        return len(new)

    def _keep(self, mask: np.ndarray) -> None:
        for c in _COLS:
            setattr(self, c, getattr(self, c)[mask])

    def _need(self, extra, sel=slice(None)) -> np.ndarray:
        """New blocks each sequence (of `sel`) needs to hold `extra` more tokens."""
        return -(-(self.ctx[sel] + extra) // self.bt) - self.blk[sel]

    def _make_room(self) -> None:
        """Preempt the latest admitted sequences until every decoding one can write a token."""
        while len(self.ids) > 1 and self.free < len(self.ids):
            dec = (self.todo == 1) & (self.gen > 0)
            if int(self._need(dec.astype(np.int64)).sum()) <= self.free:
                return
            self._preempt_last()

    def _preempt_last(self) -> None:
        """Recompute preemption (vLLM's default): blocks freed, back to the head of the queue,
        later the prompt and the tokens so far prefill again."""
        r, i = self.r, int(self.ids[-1])
        self.free += int(self.blk[-1])
        r.gen[i], r.last[i] = self.gen[-1], self.last[-1]
        r.preempted[i] += 1
        self.preemptions += 1
        self.waiting.appendleft(i)
        self._keep(slice(0, len(self.ids) - 1))

    # ------------------------------------------------------------ steps

    def _chunked(self, until_s: float, force_cut: bool) -> None:
        """Decodes first, then prompt chunks (running prompts, then new ones) in the budget."""
        self._make_room()
        dec = (self.todo == 1) & (self.gen > 0)
        n_dec = int(np.count_nonzero(dec))
        if not self.waiting and n_dec and n_dec == len(self.ids):
            self._decode_run(slice(None), until_s, force_cut)  # nothing to prefill: the fast path
            return
        take = dec.astype(np.int64)
        # a decode needs a new block where its context fills its blocks (blk = ceil(ctx / bt))
        free = self.free - int(np.count_nonzero(dec & (self.ctx % self.bt == 0)))
        budget = self.s.max_batched_tokens - n_dec
        prompt = False
        for j in np.flatnonzero(~dec).tolist():  # prompts under way, FCFS
            t = min(int(self.todo[j]), budget)
            need = -(-(int(self.ctx[j]) + t) // self.bt) - int(self.blk[j])
            if t <= 0 or need > free:
                break
            take[j], free, budget, prompt = t, free - need, budget - t, True
        n0 = len(self.ids)
        if budget > 0 and self._admit(whole=False, budget=budget, free=free):
            chunks = []
            for t in self.todo[n0:].tolist():  # the new prompts' first chunks, in the budget left
                chunks.append(max(min(t, budget), 0))
                budget -= t
            take = np.concatenate([take, np.asarray(chunks, np.int64)])
            prompt = True
        if prompt:  # some prompt tokens: one mixed step
            self._step(take)
        elif n_dec:
            self._decode_run(slice(None) if n_dec == len(dec) else dec, until_s, force_cut)
        else:  # prompts under way hold every block: the latest gives its blocks back
            self._preempt_last()
            self._chunked(until_s, force_cut)

    def _step(self, take: np.ndarray) -> None:
        """One step: each sequence processes `take` tokens (a decode 1, a prompt chunk more)."""
        on = take > 0
        dec = on & (self.todo == 1) & (self.gen > 0)
        kv = self._decode_kv(self.ctx[dec])  # cached tokens read: the decodes' contexts, the chunks' prefixes
        chunks = pairs = ends = 0.0
        for j in np.flatnonzero(on ^ dec).tolist():  # the prompt chunks: a few, in Python
            c, p = float(take[j]), float(self.ctx[j])
            chunks, kv, pairs = chunks + c, kv + p, pairs + c * p + c * (c + 1.0) / 2.0
            ends += c == self.todo[j]  # the prompt's last chunk: its token goes through the head
        # scalars: a step model's scalar path is ~10x cheaper than its array path
        dt = float(self.step.time_s(chunks, float(np.count_nonzero(dec)), kv, prefill_seqs=ends,
                                    prefill_attn_pairs=pairs))
        self.ctx += take
        self.todo -= take
        blk = -(-self.ctx // self.bt)
        self._account(dt, int(blk.sum() - self.blk.sum()))
        self.blk = blk
        self.clock += dt
        self.steps += 1
        out = np.flatnonzero(on & (self.todo == 0))
        gen = self.gen[out]
        first = gen == 0
        self.r.first[self.ids[out[first]]] = self.clock
        later = out[~first]
        if len(later):
            self.r.itl.append(self.clock - self.last[later])
        self.gen[out] = gen + 1
        self.last[out] = self.clock
        self.todo[out] = 1
        if (gen + 1 >= self.out[out]).any():
            self._finish()

    def _decode_run(self, sel, until_s: float, force_cut: bool) -> None:
        """k decode steps of the sequences `sel` at once: k up to the first finish, the first
        block shortage, or the step ending at or after `until_s` when a newcomer could join."""
        ctx, blk = self.ctx[sel], self.blk[sel]
        n, kv0 = len(ctx), self._decode_kv(ctx)
        k_fin = int((self.out[sel] - self.gen[sel]).min())
        k = self._steps_with_blocks(ctx, blk, min(k_fin, MAX_RUN_STEPS))
        cut = force_cut or (not self.waiting and len(self.ids) < self.s.max_num_seqs)
        t = self.clock + np.cumsum(self._decode_times(n, kv0, min(k, self._steps_to(until_s, n, kv0) if cut else k)))
        if cut and t[-1] > until_s:
            k = int(np.searchsorted(t, until_s, side="left")) + 1
            t = t[:k]
        new_ctx = ctx + k
        new_blk = -(-new_ctx // self.bt)
        self._account(float(t[-1] - self.clock), int(new_blk.sum() - blk.sum()))
        self.r.itl.append(t[0] - self.last[sel])
        if k > 1:
            self.r.itl_runs.append((t[1:] - t[:-1], n))
        if isinstance(sel, slice):  # every sequence: new arrays, no copy back
            self.ctx, self.blk = new_ctx, new_blk
            self.gen += k
            self.last = np.full(n, t[-1])
        else:
            self.ctx[sel], self.blk[sel] = new_ctx, new_blk
            self.gen[sel] += k
            self.last[sel] = t[-1]
        self.clock = float(t[-1])
        self.steps += k
        if k == k_fin:
            self._finish()

    def _decode_kv(self, ctx: np.ndarray) -> float:
        """Cached tokens the decodes of contexts `ctx` read in a step (padded: each the longest;
        either way n more at each later step of a run)."""
        if not len(ctx):
            return 0.0
        return float(ctx.max()) * len(ctx) if self.s.padded_decode else float(ctx.sum())

    def _steps_to(self, until_s: float, n: int, kv0: float) -> int:
        """Enough decode steps to end at or after `until_s` (a run cut there needs no more): a
        step is never shorter than the first (time grows with the cached tokens read)."""
        lines = self.lines[n]
        if not lines or not until_s < math.inf:
            return MAX_RUN_STEPS
        c0, c1, m0, m1, rest = lines
        first = max(c0 + c1 * kv0, m0 + m1 * kv0) + rest
        return max(int((until_s - self.clock) / first), 0) + 2 if first > 0 else MAX_RUN_STEPS

    def _decode_times(self, n: int, kv0: float, k: int) -> np.ndarray:
        """Durations of k decode steps of n sequences holding kv0 cached tokens at the first."""
        lines = self.lines[n]
        if lines:
            c0, c1, m0, m1, rest = lines
            kv = kv0 + n * _STEP_INDEX[:k]
            return np.maximum(c0 + c1 * kv, m0 + m1 * kv) + rest
        if k <= SCALAR_STEPS:
            return np.array([float(self.step.time_s(0.0, float(n), kv0 + n * j, prefill_seqs=0.0,
                                                    prefill_attn_pairs=0.0)) for j in range(k)])
        z = _ZEROS[:k]
        return np.asarray(self.step.time_s(z, np.full(k, float(n)), kv0 + n * _STEP_INDEX[:k],
                                           prefill_seqs=z, prefill_attn_pairs=z), dtype=np.float64)

    def _steps_with_blocks(self, ctx, blk, k: int) -> int:
        """The most decode steps (<= k, >= 1: _make_room saw to one) whose blocks are free."""
        held = int(blk.sum())
        fits = lambda j: int((-(-(ctx + j) // self.bt)).sum()) - held <= self.free  # noqa: E731
        if self.free >= len(ctx) * -(-k // self.bt) or fits(k):  # the first test is cheap
            return k
        lo, hi = 1, k
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo

    def _account(self, dt: float, new_blocks: int) -> None:
        """Busy time, and the blocks in use over it (a run: the mean of its two ends)."""
        used0 = self.total - self.free
        self.free -= new_blocks
        used1 = used0 + new_blocks
        self.busy_s += dt
        self.seq_s += dt * len(self.ids)
        self.block_s += dt * (used0 + used1) / 2.0
        self.max_used = max(self.max_used, used1)

    def _finish(self) -> None:
        done = self.gen >= self.out
        if not done.any():
            return
        ids = self.ids[done]
        self.r.finish[ids] = self.clock
        self.free += int(self.blk[done].sum())
        self.finish_times.extend([self.clock] * len(ids))
        self._keep(~done)

    def _static_batch(self) -> None:
        """A batch: prompts padded to the longest, decoded to the longest output, all returned at
        its end (blocks reserved for prompt + output up front: nothing is preempted)."""
        r, out, free = self.r, [], self.free
        while self.waiting and len(out) < self.s.max_num_seqs:
            i = self.waiting[0]
            need = -(-int(r.prompt[i] + r.output[i]) // self.bt)
            if need > free:
                break
            free -= need
            out.append(self.waiting.popleft())
        ids = np.asarray(out, np.int64)
        n, P, O = len(ids), int(r.prompt[ids].max()), int(r.output[ids].max())
        t_pre = float(self.step.time_s(np.array([float(n * P)]), np.zeros(1), np.zeros(1),
                                       prefill_seqs=np.array([float(n)]),
                                       prefill_attn_pairs=np.array([n * P * (P + 1) / 2.0]))[0])
        j = np.arange(O - 1, dtype=np.float64)
        dts = self.step.time_s(np.zeros(O - 1), np.full(O - 1, float(n)), n * (P + j),
                               prefill_seqs=np.zeros(O - 1), prefill_attn_pairs=np.zeros(O - 1))
        t = self.clock + t_pre + np.concatenate([[0.0], np.cumsum(dts)])  # t[m]: token m + 1
        self._account(float(t[-1] - self.clock), self.free - free)
        r.admitted[ids] = self.clock
        r.first[ids] = t[0]
        r.itl.extend(np.diff(t[: int(o)]) for o in r.output[ids])
        r.finish[ids] = t[-1]
        self.clock = float(t[-1])
        self.steps += O
        self.seq_s += (self.clock - t[0] + t_pre) * n
        self.free = self.total
        self.finish_times.extend([self.clock] * n)

def simulate(trace: Trace, step, sched: Scheduler) -> SimResult:
    """Serve `trace` on `sched.replicas` engines whose steps take `step.time_s(...)` seconds."""
    reqs = _Requests(trace)
    total_blocks = int(step.kv_capacity_tokens) // sched.block_tokens
    if total_blocks < 1:
        raise BadInput(f"no room for a KV cache: the weights leave {int(step.kv_capacity_tokens)} tokens "
                       "per replica (more devices per replica, or a lower precision)")
    reps = [_Replica(k, reqs, step, sched, total_blocks) for k in range(sched.replicas)]
    too_long = -(-(reqs.prompt + reqs.output) // sched.block_tokens) > total_blocks
    if sched.router == "round_robin" and sched.max_concurrency is None:
        _independent(reps, reqs, trace.arrival_s, too_long)
    else:
        _lockstep(reps, reqs, trace.arrival_s, too_long, sched)
    res = _result(trace, reqs, reps, int(too_long.sum()), total_blocks * sched.block_tokens)
    return _client_side(res, getattr(getattr(step, "engine", None), "request_overhead_s", 0.0))


def _client_side(res: SimResult, overhead_s: float) -> SimResult:
    """The records as the client sees them: the engine's fixed time per request outside its steps
    (tokenizing, detokenizing the first token, the host round trip: Engine.request_overhead_s)
    delays each request's first token and its finish alike; TPOT and ITL keep the engine's."""
    if not overhead_s:
        return res
    r = res.records
    return replace(res, records=replace(r, first_token_s=r.first_token_s + overhead_s,
                                        finish_s=r.finish_s + overhead_s))


def _independent(reps: list[_Replica], reqs: _Requests, arrival: np.ndarray, too_long: np.ndarray) -> None:
    """Round-robin routing of an open loop: each replica's requests are known up front, so each
    replica runs alone (its runs cut only at its own arrivals)."""
    reqs.sent[:] = arrival
    kept = np.flatnonzero(~too_long)  # rejected (longer than the cache holds): never in flight
    for k, p in enumerate(reps):
        for i in kept[k::len(reps)].tolist():
            t = float(arrival[i])
            p.advance(t)
            p.add(i, t)
        p.advance(math.inf)


def _lockstep(reps: list[_Replica], reqs: _Requests, arrival: np.ndarray, too_long: np.ndarray,
              sched: Scheduler) -> None:
    """Every replica advanced to each send time (the router reads their outstanding requests then;
    the client's concurrency limit waits for finishes)."""
    limit = sched.max_concurrency or math.inf
    t_floor, rr = 0.0, 0
    for i in range(len(arrival)):
        t_floor = max(t_floor, float(arrival[i]))
        for p in reps:  # first: every finish up to the arrival is known before counting those in flight
            p.advance(t_floor)
        while sum(p.outstanding(t_floor) for p in reps) >= limit:
            t_floor = _next_finish(reps, t_floor)
        reqs.sent[i] = t_floor
        if too_long[i]:
            continue
        k = rr % len(reps) if sched.router == "round_robin" else \
            min(range(len(reps)), key=lambda j: (reps[j].outstanding(t_floor), j))
        rr += 1
        reps[k].add(i, t_floor)
    for p in reps:
        p.advance(math.inf)


def _next_finish(reps: list[_Replica], t_s: float) -> float:
    """The first finish after t_s, stepping the replicas (earliest clock first) until no busy one
    is behind it. With one replica exact; with several a finish may be seen one step late."""

    while True:
        after = [p.finish_times[k] for p in reps
                 if (k := bisect_right(p.finish_times, t_s)) < len(p.finish_times)]
        best = min(after, default=math.inf)
        busy = [p for p in reps if not p.idle() and p.clock < best]
        if not busy:
            if best == math.inf:
                raise RuntimeError("closed loop: requests in flight but no replica busy")
            return best
        p = min(busy, key=lambda q: q.clock)
        others = [q.clock for q in busy if q is not p]
        p.run(min(others) if others else math.inf, force_cut=bool(others))


def _result(trace: Trace, reqs: _Requests, reps: list[_Replica], rejected: int,
            capacity_tokens: int) -> SimResult:
    busy = sum(p.busy_s for p in reps)
    util = sum(p.block_s / p.total for p in reps) / busy if busy > 0 else 0.0
    itl = reqs.itls()
    rec = RequestRecords(arrival_s=reqs.sent, first_token_s=reqs.first, finish_s=reqs.finish,
                         prompt_tokens=reqs.prompt, output_tokens=reqs.output, itl_s=itl,
                         preemptions=reqs.preempted, replica=reqs.replica)
    return SimResult(records=rec, steps=sum(p.steps for p in reps),
                     preemptions=sum(p.preemptions for p in reps), rejected=rejected,
                     kv_cache_utilization=util,
                     max_kv_cache_utilization=max(p.max_used / p.total for p in reps),
                     kv_capacity_tokens=capacity_tokens,
                     extra={"running_seq_s": sum(p.seq_s for p in reps),
                            "leaked_blocks": sum(p.total - p.free for p in reps),
                            "busy_s": busy, "admitted_s": reqs.admitted})
