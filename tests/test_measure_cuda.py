"""CUDA-only checks (skipped without a GPU); scripts/gpu_checks.sh runs them on the device machine."""
import pytest
import torch

from llmbench.measure import device as dev

pytestmark = [pytest.mark.requires_cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_cuda_device_timer_and_memory():
    d = dev.resolve("auto")
    assert d.type == "cuda" and dev.backend(d) == "nccl"
    a = torch.randn(4096, 4096, device=d)
    dev.reset_peak_memory(d)
    with dev.Timer(d) as t:
        a @ a
    assert 0 < t.elapsed_s < 5
    assert dev.peak_memory_bytes(d) >= a.numel() * 4
    assert set(dev.memory_stats(d)) == {"peak_allocated_bytes", "peak_reserved_bytes"}


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_cuda_flops_equal_counting(precision):
    from llmbench.measure.flops import count_flops
    from llmbench.measure.modeling import build_model
    from llmbench.models.spec import resize
    from llmbench.models import get_model
    from llmbench.models.counting import model_ops
    spec = resize(get_model("gpt-j-6b"), n_layers=2, d_model=256, n_heads=4, vocab_size=512)
    model = build_model(spec, device="cuda", dtype=dev.dtype_of(precision))
    idx = torch.randint(0, 512, (2, 128), device="cuda")
    want = sum(o.matmul_flops for o in model_ops(spec, 2, 128, precision))
    assert count_flops(lambda: model(idx)) == want


def test_cuda_suites_run():
    from llmbench.measure.options import RunOptions
    from llmbench.measure.suites import run_workload
    from llmbench.point import Workload, check_metrics
    tiny = {"n_layers": 2, "d_model": 256, "n_heads": 4}
    run = RunOptions(device="cuda", steps=3)
    w, b = run_workload(Workload(suite="block", model="gpt2-xl", resize=tiny, batch=4, seq_len=256,
                                 precision="bf16"), run)
    assert b["status"] == "ok", b["error"]
    assert (b["metrics"]["mfu"] is None) == (b["info"]["datasheet"] is None)
    w, t = run_workload(Workload(suite="train", model="gpt2-small", resize=tiny, batch=4, seq_len=128), run)
    assert t["status"] == "ok", t["error"]
    assert w.precision == "bf16" or not torch.cuda.is_bf16_supported()  # the hardware's precision
    w, i = run_workload(Workload(suite="infer", model="gpt2-small", resize=tiny, batch=2, seq_len=64, gen_len=8,
                                 precision="bf16"), run)
    assert i["status"] == "ok" and i["metrics"]["decode_tokens_per_s"] > 0
    for r in (b, t, i):
        assert check_metrics(r["metrics"], "cuda") == []
