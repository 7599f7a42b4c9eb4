"""A data-parallel point: `torchrun --nproc-per-node N` processes each run the suite; rank 0 writes
the result (global tokens/s, scaling efficiency against `baseline_tokens_per_s`) to a JSON file.

    python -m torch.distributed.run --standalone --nproc-per-node 2 \
        -m llmbench.studies.ddp CONFIG_JSON OUT_JSON [SUITE_MODULE]

The study runner launches this for points with devices > 1; torch.distributed does the work
(gloo on CPU, NCCL on CUDA), nothing here replaces it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def launch(config: dict, devices: int, *, suite_module: str | None = None,
           timeout_s: float = 3600.0) -> dict:
    """Run one point on `devices` processes; a result dict like run_suite's."""
    with tempfile.TemporaryDirectory(prefix="llmbench-ddp-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={devices}", "-m", "llmbench.studies.ddp",
               json.dumps(config), str(out)] + ([suite_module] if suite_module else [])
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return _error(f"data-parallel run timed out after {timeout_s:.0f} s")
        if out.exists():
            return json.loads(out.read_text())
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()
        oom = any("out of memory" in line.lower() for line in tail)
        msg = tail[-1] if tail else f"torchrun exited {proc.returncode}"
        return {**_error(f"torchrun exited {proc.returncode}: {msg}"[:500]),
                "status": "oom" if oom else "error"}


def _error(msg: str) -> dict:
    return {"status": "error", "metrics": {}, "error": msg, "environment": {}}


def main(argv: list[str]) -> None:
    from llmbench.studies.runner import load_run_suite

    config, out = json.loads(argv[0]), Path(argv[1])
    run_suite = load_run_suite(argv[2] if len(argv) > 2 else None)
    try:
        res = run_suite("train", config)
    except ValueError as e:
        res = _error(f"ValueError: {e}")
    if int(os.environ.get("RANK", "0")) == 0:
        res.setdefault("environment", {})["world_size"] = int(os.environ.get("WORLD_SIZE", "1"))
        out.write_text(json.dumps(res, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
