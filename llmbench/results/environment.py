"""Where and how a result was produced: versions, CPU, threads, git commit, date, command line.

    python -c "from llmbench.results.environment import base_environment; print(base_environment())"

No torch import here: the torch version and device come from the suite's own environment (the
measure engine), merged over this one by the study runner.
"""
from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """HEAD of the checkout llmbench runs from, or None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def base_environment() -> dict:
    from llmbench import __version__

    env = {"llmbench_version": __version__, "python": platform.python_version(),
           "platform": platform.platform(), "cpu_model": cpu_model(),
           "cpu_count": os.cpu_count(), "git_commit": git_commit(),
           "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join(sys.argv)}
    torch = sys.modules.get("torch")  # only if a suite already imported it
    if torch is not None:
        env["torch_version"] = getattr(torch, "__version__", None)
        env["torch_threads"] = torch.get_num_threads()
    return env
