"""GEMMs of few rows on this CPU: matrix-vector (M = 1) against packed GEMM (M >= 2) (issue 22).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/cpu_small_m.py [--reps 15] [--json out.json]

Times torch's F.linear (one thread, fp32) of M rows against each weight matrix a step of the
serving benchmark's model runs (GPT-2 small resized to 4 layers of width 256: per layer QKV
256 -> 768, attention out 256 -> 256, MLP up 256 -> 1024 and down 1024 -> 256; the LM head
256 -> 50257, the one matrix larger than this CPU's caches), for M from 1 to 320; median of
--reps after a warm-up. Beside each time: the weight bytes over the time (GB/s: the memory rate if
the weights are read once) and the FLOPs over the time (GFLOP/s).

What it shows, and what perfmodel/serving.py builds on it (GEMM_WEIGHT_PASSES): M = 1 runs a
matrix-vector kernel that streams the weights once; M >= 2 runs a GEMM that first packs panels of
the weight matrix into a contiguous buffer (Goto & van de Geijn, ACM TOMS 2008; Intel, "Introducing
the new packed APIs for GEMM": packing "can be costly, especially for input matrices with one or
more small dimensions"; torch's CPU build calls MKL), so M = 2..8 take about twice the time of
M = 1 on the LM head, then the GEMM turns compute-bound. The fits printed at the end, over the LM
head's rows (bandwidth from M = 1; passes for M >= 2 and the compute rate by least squares on log
time): "sum" t = passes x bytes / bandwidth + FLOPs / rate (nothing overlaps); "max" the larger of
the two (everything overlaps); "pack+max" (passes - 1) x bytes / bandwidth + max(bytes /
bandwidth, FLOPs / rate) (the packing serial, the kernel's own pass overlapping its FLOPs).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

D_MODEL, VOCAB = 256, 50257
#: (name, in features K, out features N) of the matrices one step of the 4-layer model runs
MATRICES = (("qkv", D_MODEL, 3 * D_MODEL), ("attn_out", D_MODEL, D_MODEL), ("mlp_up", D_MODEL, 4 * D_MODEL),
            ("mlp_down", 4 * D_MODEL, D_MODEL), ("lm_head", D_MODEL, VOCAB))
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 320)


def time_linear(m: int, k: int, n: int, reps: int) -> float:
    """Median seconds of F.linear(x (m, k), w (n, k)); inputs made once, two warm-up calls."""
    x, w = torch.randn(m, k), torch.randn(n, k)
    for _ in range(2):
        F.linear(x, w)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        F.linear(x, w)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


#: how the weight passes combine with the FLOPs: w1 = one pass of the weight bytes, f = FLOP time
FORMS = {
    "sum": lambda passes, w1, f: passes * w1 + f,                     # nothing overlaps
    "max": lambda passes, w1, f: np.maximum(passes * w1, f),          # everything overlaps
    "pack+max": lambda passes, w1, f: (passes - 1.0) * w1 + np.maximum(w1, f),  # packing serial
}


def fit(rows: np.ndarray, t: np.ndarray, k: int, n: int, form) -> dict:
    """passes (M >= 2) and compute rate by least squares on log time over a grid; the bandwidth
    from M = 1 (one pass; under "sum" its FLOPs at the fitted rate taken out)."""
    wbytes, flops = 4.0 * k * n, 2.0 * rows * k * n
    one = rows == 1
    best = None
    for passes in np.linspace(1.0, 4.0, 61):
        for rate in np.geomspace(5e9, 2e11, 161):
            t1 = t[one][0] - (flops[one][0] / rate if form is FORMS["sum"] else 0.0)
            if t1 <= 0:
                continue
            pred = form(np.where(one, 1.0, passes), t1, flops / rate)
            err = float((np.log(pred / t) ** 2).sum())
            if best is None or err < best["err"]:
                best = {"err": err, "passes": float(passes), "rate_flops": float(rate),
                        "bandwidth": float(wbytes / t1), "pred": pred}
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", help="also write the table to this JSON file")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; torch {torch.__version__}, "
          f"1 thread, fp32, median of {a.reps}")
    print(f"{'matrix':<9} {'K x N':>12} {'M':>4} {'ms':>9} {'GB/s (w once)':>14} {'GFLOP/s':>8}")
    table = []
    for name, k, n in MATRICES:
        for m in ROWS:
            t = time_linear(m, k, n, a.reps)
            table.append({"matrix": name, "k": k, "n": n, "m": m, "time_s": t})
            print(f"{name:<9} {f'{k} x {n}':>12} {m:>4} {t * 1e3:>9.3f} {4 * k * n / t / 1e9:>14.1f} "
                  f"{2 * m * k * n / t / 1e9:>8.1f}")
    print("\ntime of M rows over the time of 1 row (1 = the weights' one pass):")
    for name, _, _ in MATRICES:
        t_of = {r["m"]: r["time_s"] for r in table if r["matrix"] == name}
        print(f"  {name:<9} " + "  ".join(f"M={m}: {t_of[m] / t_of[1]:.2f}" for m in (2, 4, 8, 16)))
    head = [r for r in table if r["matrix"] == "lm_head"]
    rows, t = np.array([r["m"] for r in head], float), np.array([r["time_s"] for r in head])
    fits = {}
    for label, form in FORMS.items():
        f = fit(rows, t, D_MODEL, VOCAB, form)
        fits[label] = {k: v for k, v in f.items() if k != "pred"}
        err = np.abs(f["pred"] / t - 1.0)
        print(f"\nLM head fit, {label}: passes (M >= 2) {f['passes']:.2f}, bandwidth "
              f"{f['bandwidth'] / 1e9:.1f} GB/s, compute {f['rate_flops'] / 1e9:.1f} GFLOP/s; "
              f"|error| median {np.median(err):.0%}, max {err.max():.0%}")
        print("  " + "  ".join(f"M={int(m)}: {p / x - 1:+.0%}" for m, p, x in zip(rows, f["pred"], t)))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"table": table, "fits": fits}, fh, indent=1)


if __name__ == "__main__":
    main()
