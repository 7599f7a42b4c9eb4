"""Mixed-precision weight streaming against resident mixed-precision training with the same policy
(bf16/fp16 device copies, fp32 masters and Adam, fp16 through torch.amp.GradScaler), on CPU.

Tolerance. Both runs execute the same kernels on the same operands in the same order: the same
round-to-nearest cast of the fp32 masters, the same bf16/fp16 matmuls per block, the same fp32
AdamW op sequence on the upcast gradients. So we require equality to 1e-6 relative (we measure 0).
A looser bound would be justified only by a different summation order, e.g. another GEMM blocking
on another device: one ulp of the compute precision per weight (2^-8 relative for bf16, 2^-11 for
fp16). The checks that the policy is really applied: the losses differ from fp32 training, and the
link carries 2 bytes per weight. bf16 matmul is slow on this CPU: the model is tiny."""
from __future__ import annotations

import pytest
import torch

from llmbench.streaming.config import workload_and_options as S
from llmbench.streaming.precision import LossScale
from llmbench.streaming.run import run_compare, run_train

TINY = dict(model="tiny", layers=2, batch=2, seq=16)


@pytest.fixture(scope="module")
def fp32():
    return run_train(*S(**TINY, steps=4))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_streaming_equals_resident_mixed_precision(precision, fp32):
    out = run_compare(*S(**TINY, steps=4, precision=precision))
    assert out["max_rel_loss_diff"] <= 1e-6
    assert out["streamed_loss"][-1] < out["streamed_loss"][0]
    assert out["streamed_loss"] != pytest.approx(fp32["loss"], rel=1e-6)  # the policy is applied
    assert out["streamed_bytes_per_step"] == fp32["streamed_bytes_per_step"] / 2
    assert out["device_weight_bytes_peak"] == fp32["device_weight_bytes_peak"] / 2


def test_fp16_overflow_skips_the_same_steps_as_grad_scaler():
    """A loss scale of 2^20 overflows fp16 gradients; growth every 2 good steps brings it back up:
    the skip/grow pattern and the losses must be GradScaler's."""
    out = run_compare(*S(**TINY, steps=8, precision="fp16", loss_scale_init=2.0 ** 20,
                                   loss_scale_growth_interval=2))
    skipped = out["streamed_skipped_steps"]
    assert out["resident_skipped_steps"] == len(skipped) and 0 < len(skipped) < 8
    assert out["max_rel_loss_diff"] <= 1e-6


def test_loss_scale_rule_is_grad_scalers():
    scaler = torch.amp.GradScaler("cpu", init_scale=1000.0, growth_interval=3)
    ours = LossScale(scale=1000.0, growth_interval=3)
    p = torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([p], lr=0.0)
    for found_inf in [0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0]:
        scaler.scale(p.sum()).backward()
        p.grad.fill_(float("inf") if found_inf else 1.0)
        inv = torch.tensor(scaler.get_scale(), dtype=torch.float64).reciprocal().float()
        assert ours.inv_scale == float(inv)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        ours = ours.after(bool(found_inf))
        assert ours.scale == scaler.get_scale()


def test_fp16_scaler_state_survives_resume(tmp_path):
    store = f"disk:{tmp_path}"
    kw = dict(**TINY, precision="fp16", loss_scale_init=2.0 ** 20, loss_scale_growth_interval=2)
    whole = run_train(*S(**kw, steps=6))
    run_train(*S(**kw, steps=3, store=store))
    resumed = run_train(*S(**kw, steps=6, store=store, resume=True))
    assert resumed["loss"] == whole["loss"] and resumed["skipped_steps"] == whole["skipped_steps"]
    assert resumed["loss_scale"] == whole["loss_scale"]
