"""Shared by the suites: the model a config names, datasheet peaks (for MFU), percentiles."""
from __future__ import annotations

import statistics

import torch

from llmbench.measure import device as dev
from llmbench.models import get_model
from llmbench.models.spec import ModelSpec

SIZE_KEYS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "max_seq_len")


def model_from_config(config: dict) -> ModelSpec:
    """`model` (preset name or HF config path) plus optional size overrides (`n_layers`, ...)."""
    if "model" not in config:
        raise ValueError("config needs 'model' (a preset name, see 'llmbench models list')")
    spec = config["model"] if isinstance(config["model"], ModelSpec) else get_model(config["model"])
    changes = {k: config[k] for k in SIZE_KEYS if config.get(k) is not None}
    extra = {k: config[k] for k in ("head",) if config.get(k) is not None}
    if changes:
        from llmbench.measure.modeling import resize
        spec = resize(spec, **changes)
    if extra:
        spec = spec.with_(**extra)
    return spec


def datasheet_hardware(device: torch.device, override: str | None = None):
    """The catalog HardwareSpec whose datasheet peak MFU is taken against; None when unknown (a
    CPU has no datasheet here: the cpu profile holds measured ceilings, not a datasheet)."""
    from llmbench.hardware import get_hardware
    if override:
        return get_hardware(override)
    if not dev.is_accelerator(device):
        return None
    from llmbench.hardware.spec import catalog_name_for_device

    entry = catalog_name_for_device(dev.device_name(device))
    if entry is None:
        return None
    try:
        return get_hardware(entry)
    except ValueError:
        return None


def datasheet_peak_flops(device: torch.device, precision: str, override: str | None = None):
    hw = datasheet_hardware(device, override)
    return (hw.peak(precision) if hw is not None else None), (hw.name if hw is not None else None)


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
