"""Rebuild the shipped synthetic trace (run by a maintainer; nothing here runs at run time).

    python -m llmbench.serve.data.make_trace      # writes synthetic_mixed.csv

Two populations, so the trace is mixed the way production traffic is (the Azure LLM inference
trace's `conv` and `code` halves differ the same way: short chat prompts, long code/document ones):
80% chat, 20% long documents; the lengths of each drawn from a lognormal with the stated mean and
sd; arrivals a Poisson process at RATE_PER_S. One seed: the file is the same on every machine
with the same numpy bit generator (PCG64).
"""
from __future__ import annotations

import numpy as np

from llmbench.serve.data import SYNTHETIC_MIXED
from llmbench.queueing.trace import LengthDist, Trace, arrivals

N_REQUESTS = 1000
RATE_PER_S = 4.0
SEED = 2026
#: (share, prompt mean/sd tokens, output mean/sd tokens)
POPULATIONS = ((0.8, (600, 400), (200, 120)), (0.2, (3000, 1000), (80, 40)))


def mixed(n: int = N_REQUESTS, rate_per_s: float = RATE_PER_S, seed: int = SEED) -> Trace:
    rng = np.random.default_rng(seed)
    a = arrivals(n, rate_per_s, 1.0, rng)
    which = rng.choice(len(POPULATIONS), n, p=[s for s, _, _ in POPULATIONS])
    prompt = np.zeros(n, np.int64)
    output = np.zeros(n, np.int64)
    for k, (_, pm, om) in enumerate(POPULATIONS):
        idx = np.flatnonzero(which == k)
        prompt[idx] = LengthDist("lognormal", pm).sample(len(idx), rng)
        output[idx] = LengthDist("lognormal", om).sample(len(idx), rng)
    return Trace(a, prompt, output, f"make_trace.py seed={seed}")


if __name__ == "__main__":
    t = mixed()
    t.write_csv(SYNTHETIC_MIXED)
    print(f"wrote {SYNTHETIC_MIXED}: {t.describe()}")
