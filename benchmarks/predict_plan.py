"""Wall time of `llmbench plan` over >= 10,000 layouts, interpreter start-up included (goal <= 0.3 s).

    .venv/bin/python benchmarks/predict_plan.py [--reps 7]

Side by side in one run, each a fresh process: `python -c pass`, `python -c "import numpy"` (what
any plan pays before searching), and `llmbench plan ... --json` for Llama-2-13B on up to 128
A100-80GB (objective devices: every device count up to 128, 11,754 layouts) and on 64 (objective
time, 1,797 layouts). The machine is shared: the load average is printed; minima (the least
disturbed run) and medians are shown, and the layouts searched are read from the JSON. Bytecode
is cached (in a temporary PYTHONPYCACHEPREFIX, warmed by one run) as an installed package has it,
even where the environment sets PYTHONDONTWRITEBYTECODE.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PLAN = ["-m", "llmbench", "plan", "--model", "llama-2-13b", "--hardware", "a100-80gb", "--batch", "1024",
        "--seq", "4096", "--top", "5", "--json"]
CMDS = {
    "python -c pass": ["-c", "pass"],
    "python -c 'import numpy'": ["-c", "import numpy"],
    "plan --objective devices (<= 128)": PLAN + ["--devices", "128", "--objective", "devices"],
    "plan --objective time (64)": PLAN + ["--devices", "64"],
}


def run(args: list[str], reps: int, env: dict) -> tuple[list[float], str]:
    subprocess.run([sys.executable, *args], check=True, capture_output=True, env=env)  # bytecode warm-up
    ts, out = [], ""
    for _ in range(reps):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True, env=env).stdout
        ts.append(time.perf_counter() - t0)
    return ts, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {a.reps} runs each")
    print(f"{'command':<36} {'min s':>7} {'median s':>9} {'layouts':>9}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="llmbench-pyc-")
    for name, args in CMDS.items():
        ts, out = run(args, a.reps, env)
        n = json.loads(out)["searched"] if out.startswith("{") else ""
        print(f"{name:<36} {min(ts):>7.3f} {statistics.median(ts):>9.3f} {n:>9}")
        if n and n >= 10_000:
            verdict = "met" if min(ts) <= 0.3 else "NOT met"
            print(f"  -> {n:,} layouts in {min(ts):.3f} s wall, start-up included: goal <= 0.3 s {verdict}")
    print(f"(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
