"""Vectorised sweep throughput: configurations predicted per second by perfmodel.sweep_train.

    .venv/bin/python benchmarks/predict_sweep.py [--n 1000000]

One numpy pass over arrays of batch x seq x devices x grad-accum (goal: >= 100,000 configurations/s),
checked against predict_train on a few random points; prints the per-point loop rate next to it.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.perfmodel import predict_train, sweep_train


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--model", default="gpt3-6.7b")
    ap.add_argument("--hardware", default="a100-80gb")
    args = ap.parse_args()
    spec, hw = get_model(args.model), get_hardware(args.hardware)
    rng = np.random.default_rng(0)
    n = args.n
    devices = 2 ** rng.integers(0, 11, n)
    batch = devices * 2 ** rng.integers(0, 6, n)
    seq = rng.choice([256, 512, 1024, 2048], n)
    ga = 2 ** rng.integers(0, 3, n)
    batch = batch * ga
    sweep_train(spec, hw, batch=batch[:1000], seq=seq[:1000], devices=devices[:1000], grad_accum=ga[:1000])  # warm-up
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = sweep_train(spec, hw, batch=batch, seq=seq, devices=devices, grad_accum=ga, recompute="selective", zero=1)
        times.append(time.perf_counter() - t0)
    best = min(times)
    idx = rng.integers(0, n, 20)
    t0 = time.perf_counter()
    worst = 0.0
    for i in idx:
        one = predict_train(spec, hw, batch=int(batch[i]), seq=int(seq[i]), devices=int(devices[i]),
                            grad_accum=int(ga[i]), recompute="selective", zero=1)
        worst = max(worst, abs(one.step_time_s / r["step_time_s"][i] - 1))
    loop = (time.perf_counter() - t0) / len(idx)
    print(f"model {spec.name} on {hw.name}: {n:,} configurations (batch x seq x devices x grad-accum)")
    print(f"sweep_train: best of 3 {best:.3f} s (runs {', '.join(f'{t:.3f}' for t in times)}) "
          f"-> {n / best:,.0f} configurations/s (goal >= 100,000)")
    print(f"predict_train one by one: {loop * 1e6:,.0f} us/point -> {1 / loop:,.0f} points/s; "
          f"sweep is {loop * n / best:,.0f}x faster")
    print(f"sweep vs predict_train on 20 random points: max relative difference {worst:.2e}")
    print(f"fastest predicted step {np.min(r['step_time_s']):.4f} s, best MFU {np.max(r['mfu']):.1%}, "
          f"{np.mean(r['fits']):.1%} of points fit in memory")


if __name__ == "__main__":
    main()
