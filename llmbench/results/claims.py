"""Claims: a sweep marks a point `running` before it measures it, so a crash is never silent and
two runs of one study never measure a point twice (stdlib only).

    from llmbench.results.claims import claim, release
    with ResultsDB("runs.db") as db:
        action, reason, before = claim(db, w, decide, study="gas")   # BEGIN IMMEDIATE
        if action == "run":
            ...measure...; db.record(w, ...)     # replaces the running row
    # on Ctrl-C / SIGTERM before the result: release(db, w, before) puts the old row back

`w` is a llmbench.point.Workload (or a plain dict point): the row is the one `db.record(w)` writes.

A `running` row carries `environment["claim"]` = {pid, host, boot_id, proc_start, started_at}.
When a claim meets a running row whose process is gone (same host and boot; the pid is not alive,
is a zombie, or now belongs to a process started at another time), that row becomes `crashed`
(the kernel OOM killer, a segfault, `kill -9`) inside the same transaction. A running row of
another host is left alone: it cannot be checked from here. Tested in tests/test_robust_sweeps.py.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

from llmbench.results.store import ResultsDB, make_row, now, point_key

RUN, SKIP, LEAVE = "run", "skip", "leave"


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _proc_start(pid: int) -> tuple[bool, int | None]:
    """(alive, start time in clock ticks since boot) from /proc; start None where /proc is absent."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False, None
    except OSError:
        return _pid_exists(pid), None
    fields = text[text.rindex(")") + 2:].split()  # comm may hold spaces and parentheses
    return fields[0] not in ("Z", "X"), int(fields[19])  # state; field 22 of proc(5): starttime


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def identity(pid: int | None = None) -> dict:
    """Who holds a claim: pid, host, boot id and the process start time (pid reuse)."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "host": socket.gethostname(), "boot_id": _boot_id(),
            "proc_start": _proc_start(pid)[1], "started_at": now()}


def holder_alive(holder: dict) -> bool:
    """Whether the process of a claim still runs. Another host: assumed alive (unknowable)."""
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
        return False
    if holder.get("host") != socket.gethostname():
        return True
    if holder.get("boot_id") and _boot_id() and holder["boot_id"] != _boot_id():
        return False  # rebooted since
    if not os.path.isdir("/proc/self"):
        return _pid_exists(holder["pid"])
    alive, start = _proc_start(holder["pid"])
    return alive and (holder.get("proc_start") is None or start == holder["proc_start"])


def describe_holder(holder: dict) -> str:
    return (f"pid {holder.get('pid')} on {holder.get('host')} since "
            f"{str(holder.get('started_at', '?'))[:19]}")


def crashed_row(row: dict) -> dict:
    """The `crashed` row that replaces a running row whose process is gone."""
    holder = row["environment"].get("claim", {})
    return {**row, "status": "crashed",
            "error": f"the process measuring this point died without a result ({describe_holder(holder)}): "
                     "killed (e.g. the OOM killer, kill -9) or crashed; skipped until retried"}


def claim(db: ResultsDB, point, decide, *, study: str | None = None,
          environment: dict | None = None, source: str = "measured"):
    """One transaction: read the point's row (a dead `running` row becomes `crashed` first), ask
    `decide(row) -> (action, reason)`, and for RUN write a `running` row, for SKIP a `skipped` row
    with the reason, for LEAVE nothing. Returns (action, reason, row before)."""
    key = point_key(point, source)
    with db.transaction():
        row = db.get(key)
        if row is not None and row["status"] == "running" \
                and not holder_alive(row["environment"].get("claim")):
            row = crashed_row(row)
            db.put_row(row)
        action, reason = decide(row)
        env = dict(environment or {})
        if action == RUN:
            env["claim"] = identity()
            if row is not None and row["status"] in ("ok", "oom"):
                # kept in the running row, so a crash during a redo does not lose the old result
                env["previous"] = {k: row[k] for k in ("status", "metrics", "error", "created_at")}
            db.put_row(make_row(point, source=source, status="running", environment=env,
                                study=study))
        elif action == SKIP:
            db.put_row(make_row(point, source=source, status="skipped", error=reason,
                                environment=env, study=study))
    return action, reason, row


def release(db: ResultsDB, point, before: dict | None, source: str = "measured") -> bool:
    """Undo this process's claim (interrupted before a result): the row before it comes back, or
    none. A row that is no longer this process's claim is left alone. True if released."""
    key = point_key(point, source)
    me = identity()
    with db.transaction():
        row = db.get(key)
        holder = (row or {}).get("environment", {}).get("claim") or {}
        if row is None or row["status"] != "running" or holder.get("pid") != me["pid"] \
                or holder.get("host") != me["host"]:
            return False
        if before is None:
            db.remove_row(key)
        else:
            db.put_row(before)
    return True
