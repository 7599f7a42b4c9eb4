"""Requests to serve, as arrays: when each arrives, how long its prompt is, how many tokens it gets.
Torch-free (numpy); read by the simulator (`llmbench serve`) and the real runtime (`measure serve`).

    from llmbench.queueing.trace import synthetic, parse_length, read_trace
    t = synthetic(1000, rate_per_s=8, prompt=parse_length("lognormal:1024,512"),
                  output=parse_length("256"), seed=0)
    t = read_trace("llmbench/serve/data/synthetic_mixed.csv")

Arrivals follow vLLM's `benchmark_serving` (vllm/benchmarks/serve.py `get_request`): intervals
drawn from a gamma distribution of shape `burstiness` and mean 1/rate (burstiness 1 is a Poisson
process, < 1 burstier, > 1 more even); an infinite rate sends everything at t = 0, which with a
concurrency limit (`--max-concurrency C`, applied by whoever replays the trace) is the closed loop.

Trace files: CSV or JSONL (one object a line), rows in any order (sorted by arrival on reading),
arrival times rebased to start at 0, in one of these column layouts:
  - llmbench:  arrival_s, prompt_tokens, output_tokens
  - Azure LLM inference trace 2023/2024 (github.com/Azure/AzurePublicDataset,
    AzureLLMInferenceTrace_{code,conv}.csv): TIMESTAMP (a date-time), ContextTokens, GeneratedTokens
  - BurstGPT (github.com/HPMLL/BurstGPT, BurstGPT_*.csv): Timestamp (s), Request tokens,
    Response tokens; rows with 0 response tokens are failed requests there, skipped and counted.
A bad row is one line naming the file and the row (BadInput: exit 2 at the CLI); more than
MAX_REQUESTS requests are refused unless the reader is told to keep the first K.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from llmbench._files import regular_file
from llmbench.errors import BadInput
from llmbench.queueing import MAX_REQUESTS  # noqa: F401  (re-exported: tests patch it here)

#: the longest prompt or output a row may state (tokens); longer is a broken file, not a request
MAX_TOKENS = 10_000_000

#: layout name -> (arrival column, prompt column, output column)
LAYOUTS = {
    "llmbench": ("arrival_s", "prompt_tokens", "output_tokens"),
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
}


@dataclass(frozen=True)
class Trace:
    """Requests as arrays, sorted by arrival."""
    arrival_s: np.ndarray        # (n,) float64, seconds from the first request, non-decreasing
    prompt_tokens: np.ndarray    # (n,) int64 >= 1
    output_tokens: np.ndarray    # (n,) int64 >= 1: tokens generated, the first one included
    source: str = "synthetic"    # where it came from: a file, or the generator's options
    skipped: int = 0             # rows of the file not kept (failed requests in public traces)

    def __post_init__(self):
        n = len(self.arrival_s)
        if not (len(self.prompt_tokens) == len(self.output_tokens) == n):
            raise ValueError("a trace's three arrays must have one length")
        if n > MAX_REQUESTS:
            raise BadInput(f"{self.source}: {n:,} requests; at most {MAX_REQUESTS:,} (keep fewer "
                           "with --requests K)")

    def __len__(self) -> int:
        return len(self.arrival_s)

    def head(self, k: int) -> "Trace":
        """The first k requests."""
        return Trace(self.arrival_s[:k], self.prompt_tokens[:k], self.output_tokens[:k],
                     self.source, self.skipped)

    def describe(self) -> dict:
        """A few figures saying what the trace is."""
        n = len(self)
        span = float(self.arrival_s[-1]) if n else 0.0
        return {"requests": n, "source": self.source, "span_s": span,
                "mean_rate_per_s": (n - 1) / span if span > 0 else math.inf,
                "mean_prompt_tokens": float(self.prompt_tokens.mean()) if n else 0.0,
                "mean_output_tokens": float(self.output_tokens.mean()) if n else 0.0,
                "skipped_rows": self.skipped}

    def write_csv(self, path) -> None:
        """The trace in the llmbench layout (read back by read_trace)."""
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(LAYOUTS["llmbench"])
            for a, p, o in zip(self.arrival_s.tolist(), self.prompt_tokens.tolist(),
                               self.output_tokens.tolist()):
                w.writerow((f"{a:.6f}", p, o))


# ---------------------------------------------------------------- length distributions

@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts: fixed, lognormal (mean and sd of the tokens themselves),
    uniform over [low, high], or resampled from the values of a file."""
    kind: str                    # fixed | lognormal | uniform | samples
    params: tuple = ()           # fixed: (n,); lognormal: (mean, sd); uniform: (low, high)
    values: np.ndarray | None = field(default=None, compare=False)  # samples: the values drawn from

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n token counts (int64, each in [1, MAX_TOKENS])."""
        if self.kind == "fixed":
            out = np.full(n, self.params[0], dtype=np.float64)
        elif self.kind == "lognormal":
            mean, sd = self.params
            sigma2 = math.log1p((sd / mean) ** 2)  # moments of a lognormal -> its log's mu, sigma
            out = rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), n)
        elif self.kind == "uniform":
            out = rng.integers(self.params[0], self.params[1] + 1, n).astype(np.float64)
        else:
            out = rng.choice(self.values, n).astype(np.float64)
        return np.clip(np.rint(out), 1, MAX_TOKENS).astype(np.int64)

    def label(self) -> str:
        if self.kind == "samples":
            return f"file:{self.params[0]}"
        return ":".join([self.kind] * (self.kind != "fixed") + [",".join(f"{p:g}" for p in self.params)])


def parse_length(text: str, name: str = "--prompt-len", column: str = "prompt_tokens") -> LengthDist:
    """'1024' (fixed), 'lognormal:MEAN,SD', 'uniform:LOW,HIGH', or 'file:PATH' (the `column` of a
    trace file, or a file of one integer a line) -> LengthDist; bad text is a BadInput naming `name`."""
    text = str(text).strip()
    kind, _, rest = text.partition(":")
    if not rest:
        return LengthDist("fixed", (_positive_int(text, name),))
    if kind == "file":
        return LengthDist("samples", (rest,), _length_samples(rest, name, column))
    if kind not in ("lognormal", "uniform"):
        raise BadInput(f"{name}: {text!r} is not N, lognormal:MEAN,SD, uniform:LOW,HIGH or file:PATH")
    parts = rest.split(",")
    if len(parts) != 2:
        raise BadInput(f"{name}: {kind} takes two numbers, got {rest!r}")
    a, b = (_positive_float(p, name) for p in parts)
    if kind == "uniform" and (a != int(a) or b != int(b) or a > b):
        raise BadInput(f"{name}: uniform:LOW,HIGH needs integers LOW <= HIGH, got {rest!r}")
    return LengthDist(kind, (a, b))


def _positive_float(text: str, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise BadInput(f"{name}: {text!r} is not a number") from None
    if not (math.isfinite(v) and 0 < v <= MAX_TOKENS):
        raise BadInput(f"{name}: {text!r} must be a number in (0, {MAX_TOKENS:,}]")
    return v


def _positive_int(text: str, name: str) -> int:
    v = _positive_float(text, name)
    if v != int(v):
        raise BadInput(f"{name}: {text!r} must be a whole number of tokens")
    return int(v)


def _length_samples(path: str, name: str, column: str) -> np.ndarray:
    p, _ = regular_file(path, f"{name} file")  # a directory or a device is named as one
    with p.open(errors="replace") as f:
        first = f.readline().strip()
    if first and not first.lstrip("+").isdigit():  # a header or a JSON line: a trace file
        t = read_trace(p)
        return t.prompt_tokens if column == "prompt_tokens" else t.output_tokens
    vals = [_positive_int(line, f"{name} ({path} line {i})")
            for i, line in enumerate(p.read_text().splitlines(), 1) if line.strip()]
    if not vals:
        raise BadInput(f"{name}: {path} holds no lengths")
    return np.asarray(vals, dtype=np.int64)


# ---------------------------------------------------------------- generated traces

def arrivals(n: int, rate_per_s: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """n arrival times (s): gamma intervals of shape `burstiness`, mean 1/rate, the first at 0
    (vLLM benchmark_serving's generator); an infinite rate sends all at 0."""
    if not rate_per_s > 0:
        raise BadInput(f"--rate must be > 0 requests/s, got {rate_per_s}")
    if not (burstiness > 0 and math.isfinite(burstiness)):
        raise BadInput(f"--burstiness must be a finite number > 0, got {burstiness}")
    if math.isinf(rate_per_s):
        return np.zeros(n)
    gaps = rng.gamma(burstiness, 1.0 / (rate_per_s * burstiness), n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def synthetic(n: int, *, rate_per_s: float, prompt: LengthDist, output: LengthDist,
              burstiness: float = 1.0, seed: int = 0) -> Trace:
    """n requests at `rate_per_s` (math.inf: all at once, for a closed loop), lengths drawn from
    `prompt` and `output`; the same seed gives the same trace."""
    if not 1 <= n <= MAX_REQUESTS:
        raise BadInput(f"--requests must be in [1, {MAX_REQUESTS:,}], got {n:,}")
    rng = np.random.default_rng(seed)
    a = arrivals(n, rate_per_s, burstiness, rng)
    src = (f"synthetic rate={rate_per_s:g}/s burstiness={burstiness:g} prompt={prompt.label()} "
           f"output={output.label()} seed={seed}")
    return Trace(a, prompt.sample(n, rng), output.sample(n, rng), src)


# ---------------------------------------------------------------- trace files

def read_trace(path, max_requests: int | None = None) -> Trace:
    """A trace file (CSV or JSONL, any layout in LAYOUTS) -> Trace. `max_requests` keeps the first
    K rows read; without it a file of more than MAX_REQUESTS requests is refused."""
    p, _ = regular_file(path, "trace file")  # `--trace DIR` is a directory, not a missing file
    limit = MAX_REQUESTS if max_requests is None else max_requests
    rows = _rows_jsonl(p) if p.suffix.lower() in (".jsonl", ".json", ".ndjson") else _rows_csv(p)
    arr, pro, out, skipped = [], [], [], 0
    for lineno, layout, rec in rows:
        a, pr, o = _parse_row(p, lineno, layout, rec)
        if o == 0:  # a failed request in a public trace (see module docstring)
            skipped += 1
            continue
        if len(arr) == limit:
            if max_requests is None:
                raise BadInput(f"{p}: more than {MAX_REQUESTS:,} requests; keep fewer with "
                               "--requests K")
            break
        arr.append(a), pro.append(pr), out.append(o)
    if not arr:
        raise BadInput(f"{p}: no requests in the file")
    a = np.asarray(arr, dtype=np.float64)
    order = np.argsort(a, kind="stable")
    a = a[order] - a[order[0]]
    return Trace(a, np.asarray(pro, np.int64)[order], np.asarray(out, np.int64)[order], str(p),
                 skipped)


def _layout(p: Path, columns) -> str:
    have = set(columns or ())
    for name, cols in LAYOUTS.items():
        if set(cols) <= have:
            return name
    want = "; ".join(", ".join(c) for c in LAYOUTS.values())
    raise BadInput(f"{p}: columns {sorted(have)} are none of the known layouts ({want})")


def _rows_csv(p: Path):
    with p.open(newline="", encoding="utf-8") as f:
        r = csv.DictReader(f)
        try:
            layout = _layout(p, [c.strip() for c in (r.fieldnames or [])])
            r.fieldnames = [c.strip() for c in r.fieldnames]
            for rec in r:
                yield r.line_num, layout, rec
        except (csv.Error, UnicodeDecodeError) as e:
            raise BadInput(f"{p}: row {r.line_num}: not readable as CSV ({e})") from None


def _rows_jsonl(p: Path):
    layout = None
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise BadInput(f"{p}: line {lineno}: not a JSON object ({e})") from None
            if not isinstance(rec, dict):
                raise BadInput(f"{p}: line {lineno}: not a JSON object")
            layout = layout or _layout(p, rec.keys())
            yield lineno, layout, rec


def _parse_row(p: Path, lineno: int, layout: str, rec: dict) -> tuple[float, int, int]:
    ca, cp, co = LAYOUTS[layout]
    where = f"{p}: row {lineno}"
    a = _arrival(rec.get(ca), layout, f"{where}: {ca}")
    pr = _tokens(rec.get(cp), f"{where}: {cp}", zero_ok=False)
    o = _tokens(rec.get(co), f"{where}: {co}", zero_ok=layout != "llmbench")
    return a, pr, o


def _arrival(v, layout: str, where: str) -> float:
    if v is None or (isinstance(v, str) and not v.strip()):
        raise BadInput(f"{where}: missing")
    if layout == "azure" and isinstance(v, str):
        try:
            return datetime.fromisoformat(v.strip()).timestamp()
        except ValueError:
            raise BadInput(f"{where}: {v!r} is not a date-time") from None
    try:
        a = float(v)
    except (TypeError, ValueError):
        raise BadInput(f"{where}: {v!r} is not a number of seconds") from None
    if not (math.isfinite(a) and a >= 0):
        raise BadInput(f"{where}: {v!r} must be a finite time >= 0")
    return a


def _tokens(v, where: str, zero_ok: bool) -> int:
    if isinstance(v, bool):
        raise BadInput(f"{where}: {v!r} is not a token count")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise BadInput(f"{where}: {v!r} is not a token count") from None
    low = 0 if zero_ok else 1
    if not (math.isfinite(f) and f == int(f) and low <= f <= MAX_TOKENS):
        raise BadInput(f"{where}: {v!r} must be a whole number in [{low}, {MAX_TOKENS:,}]")
    return int(f)
