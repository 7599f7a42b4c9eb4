"""The one place that knows the torch device: resolve, synchronise, time, read memory, describe.

    from llmbench.measure import device as dev
    d = dev.resolve("auto")                 # torch.device: cuda > xpu > hpu > mps > cpu
    with dev.Timer(d) as t: work()
    t.elapsed_s                             # device events on accelerators, perf_counter on CPU
    dev.peak_memory_bytes(d)

No other module writes a device type by hand; they ask this one (`is_accelerator`, `backend`,
`supports_dtype`).
"""
from __future__ import annotations

import os
import resource
import socket
import sys
import time

import torch

DEVICE_TYPES = ("cpu", "cuda", "xpu", "hpu", "mps")
_AUTO_ORDER = ("cuda", "xpu", "hpu", "mps")
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
          "bf16": torch.bfloat16}


def _module(kind: str):
    """torch.cuda / torch.xpu / torch.hpu / torch.mps, or None when this torch lacks it."""
    if kind == "hpu":
        try:
            import habana_frameworks.torch.hpu as hpu  # noqa: F401  (Gaudi's torch plug-in)
        except ImportError:
            return getattr(torch, "hpu", None)
    return getattr(torch, kind, None)


def available(kind: str) -> bool:
    if kind == "cpu":
        return True
    mod = _module(kind)
    try:
        return bool(mod is not None and mod.is_available())
    except Exception:  # a half-installed plug-in says no, not a traceback
        return False


def resolve(name: str | torch.device | None = "auto") -> torch.device:
    """'auto' picks the first available accelerator, else the CPU; 'cuda:1' etc. are checked."""
    if isinstance(name, torch.device):
        return name
    name = (name or "auto").strip().lower()
    if name == "auto":
        for kind in _AUTO_ORDER:
            if available(kind):
                return torch.device(kind, 0) if kind != "mps" else torch.device(kind)
        return torch.device("cpu")
    kind = name.split(":")[0]
    if kind not in DEVICE_TYPES:
        raise ValueError(f"unknown device {name!r}; one of auto, {', '.join(DEVICE_TYPES)}")
    if not available(kind):
        raise ValueError(f"device {name!r} is not available here (torch {torch.__version__})")
    dev = torch.device(name)
    if dev.index is None and kind not in ("cpu", "mps"):
        dev = torch.device(kind, 0)
    return dev


def is_accelerator(device: torch.device) -> bool:
    return device.type != "cpu"


def backend(device: torch.device) -> str:
    """torch.distributed backend for this device type."""
    return {"cuda": "nccl", "xpu": "xccl", "hpu": "hccl"}.get(device.type, "gloo")


def synchronize(device: torch.device) -> None:
    if device.type == "cpu":
        return
    mod = _module(device.type)
    if mod is not None and hasattr(mod, "synchronize"):
        mod.synchronize()


def set_device(device: torch.device) -> None:
    mod = _module(device.type)
    if device.index is not None and mod is not None and hasattr(mod, "set_device"):
        mod.set_device(device.index)


def dtype_of(precision: str) -> torch.dtype:
    try:
        return DTYPES[precision]
    except KeyError:
        raise ValueError(f"unknown precision {precision!r}; one of {', '.join(DTYPES)}") from None


def set_precision(device: torch.device, precision: str) -> None:
    """tf32 is fp32 tensors with TF32 tensor-core matmuls (Ampere and later); fp32 turns it off."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")


def supports_dtype(device: torch.device, precision: str) -> tuple[bool, str]:
    """Whether a precision makes sense here; (False, reason) otherwise."""
    dtype_of(precision)
    if device.type == "cpu" and precision == "tf32":
        return False, "tf32 is a tensor-core mode; the CPU has none"
    if device.type == "cuda" and precision == "bf16" and not torch.cuda.is_bf16_supported():
        return False, f"{device_name(device)} has no bf16"
    if device.type == "cuda" and precision == "tf32" and torch.cuda.get_device_capability(device)[0] < 8:
        return False, f"{device_name(device)} has no tf32 (needs compute capability 8.0)"
    return True, ""


def compute_capability(device: torch.device) -> tuple[int, int] | None:
    """(major, minor) of an NVIDIA GPU; None elsewhere."""
    if device.type != "cuda":
        return None
    return tuple(torch.cuda.get_device_capability(device))


def supports_semi_structured(device: torch.device) -> tuple[bool, str]:
    """NVIDIA 2:4 sparse tensor cores (torch.sparse.to_sparse_semi_structured): Ampere and later."""
    cap = compute_capability(device)
    if cap is None:
        return False, f"semi-structured 2:4 kernels need CUDA; this run is on {device.type}"
    if cap[0] < 8:
        return False, "2:4 sparse tensor cores need compute capability >= 8.0"
    return True, ""


class Timer:
    """Wall time of a region, synchronised: CUDA/XPU events on accelerators that have them,
    perf_counter around a synchronise elsewhere."""

    def __init__(self, device: torch.device):
        self.device = device
        self.elapsed_s = float("nan")
        mod = _module(device.type) if device.type != "cpu" else None
        self._events = mod is not None and hasattr(mod, "Event") and device.type in ("cuda", "xpu")
        self._mod = mod

    def __enter__(self) -> "Timer":
        if self._events:
            self._start = self._mod.Event(enable_timing=True)
            self._end = self._mod.Event(enable_timing=True)
            self._start.record()
        else:
            synchronize(self.device)
            self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if self._events:
            self._end.record()
            self._end.synchronize()
            self.elapsed_s = self._start.elapsed_time(self._end) / 1e3
        else:
            synchronize(self.device)
            self.elapsed_s = time.perf_counter() - self._t0


def time_fn(fn, device: torch.device, *, repeats: int, warmup: int = 1,
            before=None) -> tuple[list[float], float]:
    """Run fn `warmup` times (timed together, reported) then `repeats` times, each timed alone;
    `before()`, if given, runs untimed before each timed repetition (ceilings flush the cache)."""
    with Timer(device) as w:
        for _ in range(warmup):
            fn()
    times = []
    for _ in range(repeats):
        if before is not None:
            before()
        with Timer(device) as t:
            fn()
        times.append(t.elapsed_s)
    return times, w.elapsed_s


def reset_peak_memory(device: torch.device) -> None:
    mod = _module(device.type)
    if device.type != "cpu" and mod is not None and hasattr(mod, "reset_peak_memory_stats"):
        mod.reset_peak_memory_stats(device)


def peak_memory_bytes(device: torch.device) -> int:
    """Peak allocated bytes on an accelerator; peak resident set size of this process on the CPU
    (getrusage ru_maxrss: KiB on Linux, bytes on macOS)."""
    mod = _module(device.type)
    if device.type != "cpu" and mod is not None and hasattr(mod, "max_memory_allocated"):
        return int(mod.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def memory_stats(device: torch.device) -> dict:
    mod = _module(device.type)
    if device.type != "cpu" and mod is not None and hasattr(mod, "max_memory_reserved"):
        return {"peak_allocated_bytes": int(mod.max_memory_allocated(device)),
                "peak_reserved_bytes": int(mod.max_memory_reserved(device))}
    return {"peak_rss_bytes": peak_memory_bytes(device)}


def total_memory_bytes(device: torch.device) -> int | None:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    if device.type == "cpu":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def empty_cache(device: torch.device) -> None:
    mod = _module(device.type)
    if device.type != "cpu" and mod is not None and hasattr(mod, "empty_cache"):
        mod.empty_cache()


def is_oom(exc: BaseException) -> bool:
    """An out-of-memory error from any backend (CUDA raises torch.OutOfMemoryError; the CPU
    allocator a RuntimeError naming the failed allocation)."""
    if isinstance(exc, getattr(torch, "OutOfMemoryError", ())) or isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "failed to allocate" in text
                                              or "can't allocate memory" in text)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    mod = _module(device.type)
    if device.type != "cpu" and mod is not None and hasattr(mod, "get_device_name"):
        try:
            return str(mod.get_device_name(device))
        except Exception:
            pass
    if device.type == "cpu":
        from llmbench.results.environment import cpu_model
        return cpu_model()
    return device.type


def profile_name(device: torch.device) -> str:
    """Name of the local measured hardware profile: 'cpu', or the accelerator's name as a slug
    ('nvidia-h200'), never its datasheet entry (llmbench.point.device_slug says why)."""
    from llmbench.point import device_slug

    return device_slug(device.type, device_name(device))


def collect_environment(device: torch.device) -> dict:
    """Where and how a result was produced (merged over results.environment.base_environment)."""
    from llmbench.results.environment import base_environment

    env = base_environment()
    env.update({
        "torch_version": torch.__version__, "torch_threads": torch.get_num_threads(),
        "device": str(device), "device_type": device.type, "device_name": device_name(device),
        "hostname": socket.gethostname(),
    })
    if device.type == "cuda":
        env["cuda_version"] = torch.version.cuda
        env["device_capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
    if os.environ.get("WORLD_SIZE"):
        env["world_size"] = int(os.environ["WORLD_SIZE"])
    return env
