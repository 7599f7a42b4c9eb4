"""Wall time of one `llmbench predict` call, interpreter start-up included (goal <= 0.3 s).

    .venv/bin/python benchmarks/predict_speed.py [--reps 7]

Side by side in one run: `python -c pass`, `llmbench version` (the typer app's start-up: typer and
every area's register()), `llmbench predict train --json`, `predict infer --json`, and the human
output (predict and project skip typer: llmbench/entry.py). Other engineers share this machine: the load average is printed; medians and minima shown.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

CMDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "llmbench version": ["llmbench", "version"],
    "predict train --json": ["llmbench", "predict", "train", "--model", "gpt3-6.7b", "--hardware", "a100-80gb",
                             "--batch", "128", "--seq", "2048", "--devices", "64", "--tp", "2",
                             "--recompute", "selective", "--zero", "1", "--json"],
    "predict train (cs2)": ["llmbench", "predict", "train", "--model", "gpt3-20b", "--hardware", "cs2",
                            "--batch", "256", "--seq", "2048", "--json"],
    "predict infer --json": ["llmbench", "predict", "infer", "--model", "llama-3.1-70b", "--hardware", "h100-sxm",
                             "--batch", "8", "--prompt-len", "1024", "--gen-len", "256", "--json"],
    "predict train (table)": ["llmbench", "predict", "train", "--model", "gpt2-xl", "--hardware", "a100-40gb",
                              "--batch", "64", "--seq", "1024", "--devices", "8", "--recompute", "full"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    exe = shutil.which("llmbench", path=os.path.dirname(sys.executable)) or "llmbench"
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {args.reps} runs each")
    print(f"{'command':<24} {'min s':>7} {'median s':>9} {'max s':>7}")
    res = {}
    for name, cmd in CMDS.items():
        cmd = [exe if c == "llmbench" else c for c in cmd]
        ts = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            ts.append(time.perf_counter() - t0)
        res[name] = ts
        print(f"{name:<24} {min(ts):>7.3f} {statistics.median(ts):>9.3f} {max(ts):>7.3f}")
    # predict/project go through llmbench.entry's typer-free fast path; `llmbench version` shows
    # what the typer app's start-up alone costs on this machine
    base = statistics.median(res["llmbench version"])
    pred = statistics.median(res["predict train --json"])
    print(f"typer app start-up (llmbench version): {base:.3f} s median; one prediction: {pred:.3f} s median")
    print(f"goal: whole call <= 0.300 s -> {'met' if pred <= 0.3 else 'NOT met'} in this run "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
