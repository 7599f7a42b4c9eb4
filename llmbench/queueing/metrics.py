"""Serving metrics from per-request records, in vLLM `benchmark_serving`'s result keys, so a user
diffs them with theirs directly. Torch-free (numpy); the simulator and the real runtime
(`measure serve`) both report through `summarize`.

    from llmbench.queueing.metrics import RequestRecords, Slo, summarize
    s = summarize(records, slo=Slo(ttft_ms=500, tpot_ms=50))
    s["request_throughput"], s["p99_tpot_ms"], s["request_goodput"]

Definitions as vLLM's `calculate_metrics` (vllm/benchmarks/serve.py, 2024-2025):
  - TTFT = first token time - send time; E2EL = finish - send;
  - TPOT = (E2EL - TTFT) / (output tokens - 1), per request with more than one output token
    (a one-token request counts TPOT 0 toward goodput, and is left out of the TPOT statistics);
  - ITL = every gap between successive tokens of a request, all requests pooled;
  - duration = last finish - first send; throughputs are per second of that duration;
  - request_goodput = requests meeting every SLO given / duration (None when no SLO is given);
  - percentiles by numpy's default (linear) interpolation; std is the population std (ddof 0).
Beside vLLM's keys: failed (requests that did not finish), kv_cache_utilization and preemptions
(engine figures, from whoever produced the records; vLLM reports them as server metrics).
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass

import numpy as np

from llmbench.errors import BadInput

METRICS = ("ttft", "tpot", "itl", "e2el")
#: the percentiles reported by default besides the median (vLLM's --metric-percentiles)
PERCENTILES = (90, 99)


@dataclass(frozen=True, kw_only=True)
class Slo:
    """Service-level objectives, each met by a request at or under it (vLLM --goodput KEY:VALUE)."""
    ttft_ms: float | None = None     # time to first token [ms]
    tpot_ms: float | None = None     # time per output token after the first [ms]
    e2el_ms: float | None = None     # end-to-end latency [ms]

    def __post_init__(self):
        for name in ("ttft_ms", "tpot_ms", "e2el_ms"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise BadInput(f"--slo-{name.replace('_', '-')} must be a number > 0, got {v}")

    def given(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))


@dataclass(frozen=True)
class RequestRecords:
    """What happened to each request (n requests; times in seconds on one clock)."""
    arrival_s: np.ndarray          # (n,) when the request was sent
    first_token_s: np.ndarray      # (n,) when its first token came back; NaN if it never did
    finish_s: np.ndarray           # (n,) when its last token came back; NaN if it did not finish
    prompt_tokens: np.ndarray      # (n,) int
    output_tokens: np.ndarray      # (n,) int: tokens generated, the first included
    itl_s: np.ndarray | None = None        # (sum of output_tokens - 1 over finished,) pooled ITLs
    preemptions: np.ndarray | None = None  # (n,) int: times each request was preempted
    replica: np.ndarray | None = None      # (n,) int: which replica served it

    def __post_init__(self):
        n = len(self.arrival_s)
        for name in ("first_token_s", "finish_s", "prompt_tokens", "output_tokens"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"RequestRecords.{name} has {len(getattr(self, name))} entries, "
                                 f"arrival_s has {n}")

    def __len__(self) -> int:
        return len(self.arrival_s)

    def completed(self) -> np.ndarray:
        """(n,) bool: finished with a first token."""
        return np.isfinite(self.finish_s) & np.isfinite(self.first_token_s)

    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    def e2el_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    def tpot_s(self) -> np.ndarray:
        """(n,) per-request TPOT; 0 for one-token requests (vLLM's goodput convention)."""
        decode = self.finish_s - self.first_token_s
        steps = np.maximum(self.output_tokens - 1, 1)
        return np.where(self.output_tokens > 1, decode / steps, 0.0)


def itls_from_token_times(token_times_s) -> np.ndarray:
    """Pooled ITLs from each request's token times (a list of 1-D arrays), as vLLM pools them."""
    gaps = [np.diff(np.asarray(t, dtype=np.float64)) for t in token_times_s if len(t) > 1]
    return np.concatenate(gaps) if gaps else np.zeros(0)


def stats_ms(name: str, values_s: np.ndarray, percentiles=PERCENTILES) -> dict:
    """mean/median/std/pNN of one metric in ms, under vLLM's keys; None for an empty set."""
    v = np.asarray(values_s, dtype=np.float64) * 1000.0
    empty = v.size == 0
    out = {f"mean_{name}_ms": None if empty else float(v.mean()),
           f"median_{name}_ms": None if empty else float(np.median(v)),
           f"std_{name}_ms": None if empty else float(v.std())}
    for p in percentiles:
        word = str(int(p)) if int(p) == p else str(p)
        out[f"p{word}_{name}_ms"] = None if empty else float(np.percentile(v, p))
    return out


def good(records: RequestRecords, slo: Slo) -> np.ndarray:
    """(n,) bool: completed and meeting every SLO given."""
    ok = records.completed()
    for limit_ms, values_s in ((slo.ttft_ms, records.ttft_s()), (slo.tpot_ms, records.tpot_s()),
                               (slo.e2el_ms, records.e2el_s())):
        if limit_ms is not None:
            ok &= values_s * 1000.0 <= limit_ms
    return ok


def summarize(records: RequestRecords, *, slo: Slo | None = None, percentiles=PERCENTILES,
              kv_cache_utilization: float | None = None, preemptions: int | None = None) -> dict:
    """The benchmark_serving summary of `records` (keys in its order, then the engine's figures)."""
    done = records.completed()
    n_done = int(done.sum())
    total_in = int(records.prompt_tokens[done].sum())
    total_out = int(records.output_tokens[done].sum())
    duration = float(np.max(records.finish_s[done]) - np.min(records.arrival_s)) if n_done else 0.0
    per_s = (lambda x: x / duration) if duration > 0 else (lambda x: None)
    out = {"completed": n_done, "failed": len(records) - n_done, "total_input_tokens": total_in,
           "total_output_tokens": total_out, "duration": duration,
           "request_throughput": per_s(n_done),
           "request_goodput": per_s(int(good(records, slo).sum())) if slo and slo.given() else None,
           "output_throughput": per_s(total_out), "total_token_throughput": per_s(total_in + total_out)}
    multi = done & (records.output_tokens > 1)
    itl = records.itl_s if records.itl_s is not None else np.zeros(0)
    for name, vals in (("ttft", records.ttft_s()[done]), ("tpot", records.tpot_s()[multi]),
                       ("itl", itl), ("e2el", records.e2el_s()[done])):
        out.update(stats_ms(name, vals, percentiles))
    if preemptions is None and records.preemptions is not None:
        preemptions = int(np.sum(records.preemptions))
    out["kv_cache_utilization"] = kv_cache_utilization
    out["preemptions"] = preemptions
    return out


COLUMNS = ("request_id", "arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens",
           "ttft_ms", "tpot_ms", "e2el_ms", "preemptions", "replica")


def write_records_csv(records: RequestRecords, path) -> None:
    """One row per request (`--out requests.csv`); empty cells for what did not happen."""
    n = len(records)
    zeros = np.zeros(n, dtype=np.int64)
    cols = (np.arange(n), records.arrival_s, records.first_token_s, records.finish_s,
            records.prompt_tokens, records.output_tokens, records.ttft_s() * 1e3,
            records.tpot_s() * 1e3, records.e2el_s() * 1e3,
            zeros if records.preemptions is None else records.preemptions,
            zeros if records.replica is None else records.replica)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for row in zip(*(c.tolist() for c in cols)):
            w.writerow([_cell(v) for v in row])


def _cell(v) -> str:
    if isinstance(v, float):
        return "" if not math.isfinite(v) else f"{v:.6f}"
    return str(v)
