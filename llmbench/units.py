"""One way to print a number with its unit, for every command and the report.

Memory sizes are binary (GiB, MiB: how allocators, `nvidia-smi` and `free` count them); rates are
decimal (GB/s, TFLOP/s: how datasheets state them). Every string names its unit.

    from llmbench.units import fmt_bytes, fmt_time
    fmt_bytes(80 * 2**30)   # '80.0 GiB'
    fmt_time(0.0123)        # '12.300 ms'
"""
from __future__ import annotations

import math


def _bad(x) -> bool:
    return x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x)


def fmt_bytes(x) -> str:
    """Memory size, binary units: '512.0 MiB', '79.6 GiB', '1.2 TiB'."""
    if _bad(x):
        return "-"
    for unit, div in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(x) >= div:
            return f"{x / div:,.1f} {unit}"
    return f"{x:,.0f} B"


def fmt_rate_bytes(x) -> str:
    """Bandwidth, decimal units as datasheets: '2.04 TB/s', '64.0 GB/s'."""
    if _bad(x):
        return "-"
    if abs(x) >= 1e12:
        return f"{x / 1e12:,.2f} TB/s"
    return f"{x / 1e9:,.1f} GB/s"


def fmt_flops(x) -> str:
    """FLOP/s: '312.0 TFLOP/s', '95.3 GFLOP/s'."""
    if _bad(x):
        return "-"
    if abs(x) >= 1e15:
        return f"{x / 1e15:,.2f} PFLOP/s"
    if abs(x) >= 1e12:
        return f"{x / 1e12:,.1f} TFLOP/s"
    return f"{x / 1e9:,.1f} GFLOP/s"


def fmt_time(x) -> str:
    """Duration: '12.300 ms', '1.234 s', '3.21 h', '2.5 days'."""
    if _bad(x):
        return "-"
    if x >= 2 * 86400:
        return f"{x / 86400:,.1f} days"
    if x >= 3600:
        return f"{x / 3600:,.2f} h"
    if x >= 1:
        return f"{x:,.3f} s"
    if x >= 1e-3:
        return f"{x * 1e3:,.3f} ms"
    return f"{x * 1e6:,.1f} us"


def fmt_count(x) -> str:
    """Large counts: '1.56B', '124.4M', '12.0K', '7'."""
    if _bad(x):
        return "-"
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= div:
            return f"{x / div:,.2f}{unit}"
    return f"{x:,.0f}"


def fmt_num(x, digits: int = 4) -> str:
    """A plain number with `digits` significant figures, '-' when missing or not finite."""
    if _bad(x):
        return "-" if x is None else str(x)
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e6):
        return f"{x:.{digits}g}"
    return f"{x:,.{digits}g}" if abs(x) >= 1 else f"{x:.{digits}g}"


def fmt_frac(x) -> str:
    """A fraction as a percentage: '45.2%'."""
    return "-" if _bad(x) else f"{x:.1%}"


def fmt_metric(name: str, x) -> str:
    """A metric by its name's unit (METRICS): bytes, seconds, fractions, TFLOP/s, else a number."""
    if isinstance(x, str):
        return x
    if name.endswith("_bytes"):
        return fmt_bytes(x)
    if name.endswith(("_per_s", "_per_seq")) or name.endswith("_per_s_per_seq"):
        return fmt_num(x)
    if name.endswith("_s") or "_s_p" in name or name.endswith("_s_per_token"):
        return fmt_time(x)
    if name in ("mfu", "frac_of_ceiling", "scaling_efficiency"):
        return fmt_frac(x)
    if name.endswith("tflops"):
        return "-" if _bad(x) else f"{x:,.3g} TFLOP/s"
    return fmt_num(x)


#: short column labels of the metrics (tables are narrow; JSON keeps the full names)
LABELS = {"fwd_time_s": "fwd", "fwd_bwd_time_s": "fwd+bwd", "fwd_tflops": "fwd TFLOP/s",
          "fwd_bwd_tflops": "fwd+bwd TFLOP/s", "ceiling_tflops": "ceiling TFLOP/s",
          "frac_of_ceiling": "of ceiling", "mfu": "MFU", "tokens_per_s": "tokens/s", "step_time_s": "step",
          "achieved_tflops": "TFLOP/s", "peak_mem_bytes": "peak mem", "scaling_efficiency": "scaling eff",
          "prefill_tokens_per_s": "prefill tok/s", "time_to_first_token_s": "TTFT",
          "decode_tokens_per_s": "decode tok/s", "decode_time_s_per_token": "decode/token",
          "latency_s_p50": "p50", "latency_s_p90": "p90", "latency_s_p99": "p99", "samples_per_s": "samples/s",
          "loss_first": "loss first", "loss_last": "loss last", "devices": "devices"}


def label(name: str) -> str:
    """The short column label of a metric or workload field."""
    return LABELS.get(name, name)
