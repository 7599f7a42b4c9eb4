"""Shared by the suites: the datasheet peak MFU is taken against, percentiles, step-time summary.
No torch: it works on the resolved Workload (llmbench.measure.suites.resolve_workload).
"""
from __future__ import annotations

import statistics


def datasheet_peak_flops(w) -> tuple[float | None, str | None]:
    """(dense peak FLOP/s per device of w.precision, catalog name) from the datasheet of
    w.hardware; (None, None) where it has none: a CPU, or an accelerator known only by its
    measured profile (vendor 'local': a measured ceiling is frac_of_ceiling's yard-stick, not MFU's)."""
    from llmbench.hardware import get_hardware

    try:
        hw = get_hardware(w.hardware)
    except ValueError:
        return None, None
    if hw.vendor == "local":
        return None, None
    return hw.peak(w.precision), hw.name


def mfu(w, achieved_flops_per_s_per_device: float) -> float | None:
    """Model FLOPs utilisation against the datasheet peak; None, not a made-up number, without one."""
    peak, _ = datasheet_peak_flops(w)
    return achieved_flops_per_s_per_device / peak if peak else None


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize_times(times: list[float], prefix: str = "step_time_s") -> dict:
    return {prefix: statistics.median(times), f"{prefix}_p10": percentile(times, 10),
            f"{prefix}_p90": percentile(times, 90)}
