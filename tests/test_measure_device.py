"""The device helper: CPU for real, and the accelerator branches with a fake backend module."""
import time
import types

import pytest
import torch

from llmbench.measure import device as dev


def test_resolve_cpu_and_auto_here():
    assert dev.resolve("cpu") == torch.device("cpu")
    assert dev.resolve("auto").type in dev.DEVICE_TYPES
    with pytest.raises(ValueError, match="unknown device"):
        dev.resolve("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="not available"):
            dev.resolve("cuda")


def test_cpu_timer_peak_memory_and_environment():
    cpu = torch.device("cpu")
    with dev.Timer(cpu) as t:
        time.sleep(0.02)
    assert 0.015 < t.elapsed_s < 1.0
    assert dev.peak_memory_bytes(cpu) > 10 * 2**20  # this process's RSS: torch alone is more
    env = dev.collect_environment(cpu)
    for key in ("torch_version", "device_name", "cpu_model", "torch_threads", "git_commit", "date",
                "command", "hostname"):
        assert key in env
    assert dev.profile_name(cpu) == "cpu"
    assert dev.backend(cpu) == "gloo"


def test_precisions_on_cpu():
    cpu = torch.device("cpu")
    assert dev.supports_dtype(cpu, "fp32") == (True, "")
    assert dev.supports_dtype(cpu, "tf32")[0] is False
    assert dev.dtype_of("bf16") is torch.bfloat16
    with pytest.raises(ValueError, match="unknown precision"):
        dev.dtype_of("fp64")


def test_is_oom_recognises_backends():
    assert dev.is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert dev.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried 1e12"))
    assert not dev.is_oom(RuntimeError("shape mismatch"))


class FakeEvent:
    clock = 0.0

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        FakeEvent.clock += 0.25
        self.t = FakeEvent.clock

    def synchronize(self):
        pass

    def elapsed_time(self, other):  # milliseconds, as CUDA events report
        return (other.t - self.t) * 1e3


@pytest.fixture
def fake_cuda(monkeypatch):
    calls = []
    fake = types.SimpleNamespace(
        is_available=lambda: True, synchronize=lambda: calls.append("sync"), Event=FakeEvent,
        max_memory_allocated=lambda d: 123, max_memory_reserved=lambda d: 456,
        reset_peak_memory_stats=lambda d: calls.append("reset"), empty_cache=lambda: calls.append("empty"),
        set_device=lambda i: calls.append(("set", i)), get_device_name=lambda d: "NVIDIA H200")
    real = dev._module
    monkeypatch.setattr(dev, "_module", lambda kind: fake if kind == "cuda" else real(kind))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    return calls


def test_accelerator_branches_with_fake_cuda(fake_cuda):
    d = dev.resolve("cuda")
    assert d == torch.device("cuda", 0)
    assert dev.resolve("auto") == torch.device("cuda", 0)
    assert dev.is_accelerator(d) and dev.backend(d) == "nccl"
    with dev.Timer(d) as t:  # device events, not perf_counter
        pass
    assert t.elapsed_s == pytest.approx(0.25)
    dev.synchronize(d)
    dev.reset_peak_memory(d)
    dev.set_device(d)
    assert dev.peak_memory_bytes(d) == 123
    assert dev.memory_stats(d) == {"peak_allocated_bytes": 123, "peak_reserved_bytes": 456}
    assert "sync" in fake_cuda and "reset" in fake_cuda and ("set", 0) in fake_cuda
    assert dev.device_name(d) == "NVIDIA H200"
    assert dev.profile_name(d) == "nvidia-h200"
    assert dev.supports_dtype(d, "tf32") == (True, "")
    assert dev.supports_dtype(d, "bf16") == (True, "")


def test_workload_resolved_on_a_fake_h200(fake_cuda, monkeypatch):
    """Hardware from the device (its datasheet entry), precision from the hardware, MFU's peak."""
    from llmbench.measure.common import datasheet_peak_flops
    from llmbench.measure.suites import resolve_workload
    from llmbench.point import Workload

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    w = resolve_workload(Workload(model="gpt2-small", suite="train", batch=8, micro_batch=4),
                         torch.device("cuda", 0))
    assert (w.hardware, w.precision, w.devices, w.micro_batch, w.grad_accum) == ("h200-sxm", "bf16", 1, 4, 2)
    assert datasheet_peak_flops(w) == (pytest.approx(989.4e12), "h200-sxm")
    assert dev.profile_name(torch.device("cuda", 0)) == "nvidia-h200"  # measured profile: not the datasheet
    cpu = resolve_workload(Workload(model="gpt2-small", suite="block"), torch.device("cpu"))
    assert (cpu.hardware, cpu.precision) == ("cpu", "fp32") and datasheet_peak_flops(cpu) == (None, None)


def test_time_fn_runs_the_hook_untimed_before_each_repeat():
    cpu, calls = torch.device("cpu"), []
    times, warm = dev.time_fn(lambda: calls.append("fn"), cpu, repeats=2, warmup=1,
                              before=lambda: calls.append("flush"))
    assert calls == ["fn", "flush", "fn", "flush", "fn"] and len(times) == 2 and warm >= 0


def test_old_gpu_has_no_tf32(fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (7, 0))
    ok, why = dev.supports_dtype(torch.device("cuda", 0), "tf32")
    assert not ok and "8.0" in why


def test_semi_structured_support_branches(fake_cuda, monkeypatch):
    assert dev.supports_semi_structured(torch.device("cpu"))[0] is False
    assert dev.supports_semi_structured(torch.device("cuda", 0)) == (True, "")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (7, 5))
    ok, why = dev.supports_semi_structured(torch.device("cuda", 0))
    assert not ok and "8.0" in why
