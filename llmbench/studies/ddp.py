"""How a study point is measured: `run_workload` of the measure suites (or of a test's fake
module), and, for a data-parallel point, `torchrun --nproc-per-node N` processes that each run it;
rank 0 writes the result (global tokens/s, scaling efficiency against its one-process baseline)
to a JSON file.

    python -m torch.distributed.run --standalone --nproc-per-node 2 \
        -m llmbench.studies.ddp JOB_JSON OUT_JSON [SUITE_MODULE]

JOB_JSON is {"workload": Workload.to_dict(), "run": RunOptions fields}. The study runner launches
this for points with devices > 1; torch.distributed does the work (gloo on CPU, NCCL on CUDA),
nothing here replaces it. No torch at import time.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from llmbench.errors import BadInput

SUITE_MODULE = "llmbench.measure.suites"
SUITE_ENV = "LLMBENCH_SUITE_MODULE"


def load_run_workload(module: str | None = None):
    """`run_workload(w, run)` of the measure suites, or of the module given (tests: a fake)."""
    name = module or os.environ.get(SUITE_ENV) or SUITE_MODULE
    try:
        mod = importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise BadInput(f"cannot import the suite module {name!r} ({e.msg})") from None
    if not hasattr(mod, "run_workload"):
        raise BadInput(f"suite module {name!r} has no run_workload(workload, run)")
    return mod.run_workload


def launch(w, run, *, suite_module: str | None = None, timeout_s: float = 3600.0) -> tuple:
    """Run one point on `w.devices` processes: (the workload as measured, result dict)."""
    job = json.dumps({"workload": w.to_dict(), "run": asdict(run)})
    with tempfile.TemporaryDirectory(prefix="llmbench-ddp-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={w.devices}", "-m", "llmbench.studies.ddp",
               job, str(out)] + ([suite_module] if suite_module else [])
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return w, _error(f"data-parallel run timed out after {timeout_s:.0f} s")
        if out.exists():
            res = json.loads(out.read_text())
            measured = res.pop("workload", None)
            return (type(w).from_dict(measured) if measured else w), res
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()
        oom = any("out of memory" in line.lower() for line in tail)
        msg = tail[-1] if tail else f"torchrun exited {proc.returncode}"
        return w, {**_error(f"torchrun exited {proc.returncode}: {msg}"[:500]),
                   "status": "oom" if oom else "error"}


def _error(msg: str) -> dict:
    return {"status": "error", "metrics": {}, "error": msg, "environment": {}}


def main(argv: list[str]) -> None:
    from llmbench.measure.options import RunOptions
    from llmbench.point import Workload

    job, out = json.loads(argv[0]), Path(argv[1])
    run_workload = load_run_workload(argv[2] if len(argv) > 2 else None)
    w, run = Workload.from_dict(job["workload"]), RunOptions(**job["run"])
    try:
        w, res = run_workload(w, run)
    except ValueError as e:
        res = _error(f"ValueError: {e}")
    if int(os.environ.get("RANK", "0")) == 0:
        res.setdefault("environment", {})["world_size"] = int(os.environ.get("WORLD_SIZE", "1"))
        out.write_text(json.dumps({**res, "workload": w.to_dict()}, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
