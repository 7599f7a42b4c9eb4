"""Wall time of `llmbench --help` and of one `llmbench predict` call, interpreter start-up
included (goals: --help <= 0.15 s, issue 9; one predict <= 0.10 s, issue 23).

    .venv/bin/python benchmarks/predict_speed.py [--reps 7] [--against ../main]

Side by side in one run: `python -c pass` (the interpreter alone), `llmbench --help` (the whole
argparse front end: every area's register()), `predict train --json` with every layout knob given
(one prediction on Python floats: no numpy), the same with the layout left to the planner (numpy
imported: see benchmarks/predict_plan.py), `predict infer --json` (the serving layout is chosen on
floats), the human output, and issue 9's command (`predict train --model gpt2-xl --hardware
h100-sxm --batch 64 --seq 1024`: planned on one device, on floats). Other engineers may share this
machine: the load average is printed; minima and medians of the wall time are shown (the minimum
is the least disturbed run), and the median CPU time (user + sys of the child), which other
processes' load barely changes: on an idle machine the wall time is about the CPU time plus a few
ms. Bytecode is cached (a temporary PYTHONPYCACHEPREFIX, warmed by one run) as an installed
package has it.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CMDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "llmbench --help": ["llmbench", "--help"],
    "predict train --json": ["llmbench", "predict", "train", "--model", "gpt3-6.7b", "--hardware", "a100-80gb",
                             "--batch", "128", "--seq", "2048", "--devices", "64", "--tp", "2", "--pp", "1",
                             "--recompute", "selective", "--zero", "1", "--offload", "none", "--mode", "resident",
                             "--micro-batch", "4", "--json"],
    "predict train (planned)": ["llmbench", "predict", "train", "--model", "gpt3-6.7b", "--hardware", "a100-80gb",
                                "--batch", "128", "--seq", "2048", "--devices", "64", "--json"],
    "predict train (cs2)": ["llmbench", "predict", "train", "--model", "gpt3-20b", "--hardware", "cs2",
                            "--batch", "256", "--seq", "2048", "--json"],
    "predict infer --json": ["llmbench", "predict", "infer", "--model", "llama-3.1-70b", "--hardware", "h100-sxm",
                             "--batch", "8", "--prompt-len", "1024", "--gen-len", "256", "--json"],
    "predict train (table)": ["llmbench", "predict", "train", "--model", "gpt2-xl", "--hardware", "a100-40gb",
                              "--batch", "64", "--seq", "1024", "--devices", "8", "--recompute", "full",
                              "--tp", "1", "--pp", "1", "--zero", "0", "--offload", "none", "--mode", "resident",
                              "--grad-accum", "1"],
    "predict train (issue 9)": ["llmbench", "predict", "train", "--model", "gpt2-xl", "--hardware", "h100-sxm",
                                "--batch", "64", "--seq", "1024"],
}
#: command -> goal in seconds (median wall time, start-up included)
GOALS = {"llmbench --help": 0.15, "predict train --json": 0.10, "predict infer --json": 0.10,
         "predict train (issue 9)": 0.10}


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s) of one run of `cmd`."""
    c0, t0 = children_cpu_s(), time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0, children_cpu_s() - c0


def envs(against: str | None) -> dict[str, dict]:
    """The environments timed: the llmbench importable here ("this"), and with --against DIR the one
    in DIR ("against"); each with its own bytecode cache, warmed as an installed package has it."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = {"this": {**base, "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="llmbench-pyc-")}}
    if against:
        out["against"] = {**base, "PYTHONPATH": os.path.abspath(against),
                          "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="llmbench-pyc-")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--against", metavar="DIR", help="also time the llmbench of checkout DIR, runs interleaved "
                    "with this one's (a before/after under the same load)")
    args = ap.parse_args()
    exe = shutil.which("llmbench", path=os.path.dirname(sys.executable)) or "llmbench"
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {args.reps} runs each")
    print(f"{'command':<34} {'min s':>7} {'median s':>9} {'max s':>7} {'CPU s':>7}")
    res, cpu, where = {}, {}, envs(args.against)
    for name, cmd in CMDS.items():
        cmd = [exe if c == "llmbench" else c for c in cmd]
        runs = {}
        for tree, env in where.items():
            subprocess.run(cmd, check=True, capture_output=True, env=env)  # bytecode warm-up
        for _ in range(args.reps):
            for tree, env in where.items():
                runs.setdefault(tree, []).append(timed(cmd, env))
        for tree, rs in runs.items():
            label = name if tree == "this" else f"  {name[:20]} (--against)"
            ts = res[label] = [w for w, _ in rs]
            cpu[label] = statistics.median(c for _, c in rs)
            print(f"{label:<34} {min(ts):>7.3f} {statistics.median(ts):>9.3f} {max(ts):>7.3f} {cpu[label]:>7.3f}")
    py = min(res["python -c pass"])
    for name, goal in GOALS.items():
        t, med = min(res[name]), statistics.median(res[name])
        verdict = "met" if med <= goal else "met by the minimum" if t <= goal else "NOT met"
        print(f"{name}: {t:.3f} s min, {med:.3f} s median, {cpu[name]:.3f} s CPU ({t - py:.3f} s above the bare "
              f"interpreter); goal <= {goal:.3f} s -> {verdict}")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
