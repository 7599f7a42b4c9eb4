"""Vectorised sweep throughput: configurations predicted per second by perfmodel.sweep_train.

    .venv/bin/python benchmarks/predict_sweep.py [--n 1000000]

One numpy pass over a base Workload plus arrays of batch x seq x devices x micro-batch x tp x ZeRO
x recompute (goal: >= 1,000,000 configurations/s), checked against predict_train on random points;
prints the per-point rate of predict_train next to it.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.perfmodel import predict_train, sweep_train
from llmbench.point import RECOMPUTE, Workload


def configurations(n: int, rng) -> dict:
    """n random configurations (Workload field names; recompute as grid codes)."""
    tp = 2 ** rng.integers(0, 3, n)
    devices = tp * 2 ** rng.integers(0, 9, n)
    dp = devices // tp
    micro = 2 ** rng.integers(0, 4, n)
    ga = 2 ** rng.integers(0, 3, n)
    return {"batch": dp * micro * ga, "seq_len": rng.choice([256, 512, 1024, 2048], n), "devices": devices,
            "tp": tp, "micro_batch": micro, "zero": rng.integers(0, 4, n), "recompute": rng.integers(0, 3, n)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--model", default="gpt3-6.7b")
    ap.add_argument("--hardware", default="a100-80gb")
    args = ap.parse_args()
    spec, hw = get_model(args.model), get_hardware(args.hardware)
    base = Workload(model=spec.name, hardware=hw.name, precision="bf16", batch=1, seq_len=1024, devices=1,
                    micro_batch=1, layout={"tp": 1, "pp": 1, "zero": 0, "recompute": "none", "offload": "none",
                                           "mode": "resident"})
    rng = np.random.default_rng(0)
    cfg = configurations(args.n, rng)
    sweep_train(spec, hw, base, **{k: v[:1000] for k, v in cfg.items()})  # warm-up
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = sweep_train(spec, hw, base, **cfg)
        times.append(time.perf_counter() - t0)
    best = min(times)
    idx = rng.integers(0, args.n, 20)
    t0 = time.perf_counter()
    worst = 0.0
    for i in idx:
        w = base.with_(batch=int(cfg["batch"][i]), seq_len=int(cfg["seq_len"][i]), devices=int(cfg["devices"][i]),
                       micro_batch=int(cfg["micro_batch"][i]), tp=int(cfg["tp"][i]), zero=int(cfg["zero"][i]),
                       recompute=RECOMPUTE[int(cfg["recompute"][i])])
        one = predict_train(spec, hw, w)
        worst = max(worst, abs(one.step_time_s / r["step_time_s"][i] - 1))
    loop = (time.perf_counter() - t0) / len(idx)
    n = args.n
    print(f"model {spec.name} on {hw.name}: {n:,} configurations "
          "(batch x seq x devices x micro-batch x tp x ZeRO x recompute)")
    print(f"sweep_train: best of 3 {best:.3f} s (runs {', '.join(f'{t:.3f}' for t in times)}) "
          f"-> {n / best:,.0f} configurations/s (goal >= 1,000,000)")
    print(f"predict_train one by one: {loop * 1e6:,.0f} us/point -> {1 / loop:,.0f} points/s; "
          f"sweep is {loop * n / best:,.0f}x faster")
    print(f"sweep vs predict_train on 20 random points: max relative difference {worst:.2e}")
    print(f"fastest predicted step {np.min(r['step_time_s']):.4f} s, best MFU {np.max(r['mfu']):.1%}, "
          f"{np.mean(r['fits']):.1%} of points fit in memory")


if __name__ == "__main__":
    main()
