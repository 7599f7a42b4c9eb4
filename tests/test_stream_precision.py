"""Mixed-precision weight streaming against resident mixed-precision training with the same policy
(bf16/fp16 device copies, fp32 masters and Adam, fp16 through torch.amp.GradScaler), on CPU.

Here the reference is streaming/trainers.ResidentTrainer, which applies the streaming policy
resident; `stream compare` runs measure train's trainer (autocast), checked to bf16 precision.

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


def _against_reference(steps: int, **kw):
    """Streamed and ResidentTrainer (the same mixed-precision policy, resident) step by step:
    (streamed losses, resident losses, streamed trainer's stats, its store's skipped steps, resident skips)."""
    from llmbench.streaming.config import StreamRun
    from llmbench.streaming.trainers import ResidentTrainer, StreamedTrainer, make_batch

    w, opts = S(**TINY, steps=steps, **kw)
    cfg, spec = StreamRun.of(w, opts), w.spec()
    res, st = ResidentTrainer(spec, cfg, torch.device("cpu")), StreamedTrainer(spec, cfg, torch.device("cpu"))
    try:
        pairs = [(st.step(*b), res.step(*b)) for b in (make_batch(spec, 2, 16, 0, i) for i in range(steps))]
        return [p[0] for p in pairs], [p[1] for p in pairs], dict(st.ex.stats), list(st.store.skipped), \
            res.skipped_steps, st.ex.account.weight_bytes_peak
    finally:
        st.close()


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_streaming_equals_resident_mixed_precision(precision, fp32):
    streamed, resident, stats, _, _, peak = _against_reference(4, precision=precision)
    assert streamed == pytest.approx(resident, rel=1e-6, abs=0)
    assert streamed[-1] < streamed[0]
    assert streamed != pytest.approx(fp32["loss"], rel=1e-6)  # the policy is applied
    assert stats["weight_bytes_in"] + stats["grad_bytes_out"] == 4 * fp32["streamed_bytes_per_step"] / 2
    assert peak == fp32["device_weight_bytes_peak"] / 2


def test_compare_in_bf16_is_within_bf16_of_measure_trains_autocast(fp32):
    """`stream compare`'s resident side is measure train's trainer, whose bf16 is autocast over
    fp32 weights (norms and softmax in fp32), not bf16 weights: the losses agree to the compute
    precision (2^-8 relative for bf16), not to the bit; measured 6.6e-5 after 4 steps."""
    out = run_compare(*S(**TINY, steps=3, precision="bf16"))
    assert 0 < out["max_rel_loss_diff"] <= 2.0 ** -8


def test_fp16_overflow_skips_the_same_steps_as_grad_scaler():
    """A loss scale of 2^20 overflows fp16 gradients; growth every 2 good steps brings it back up:
    the skip/grow pattern and the losses must be GradScaler's."""
    streamed, resident, _, skipped, resident_skipped, _ = _against_reference(
        8, precision="fp16", loss_scale_init=2.0 ** 20, loss_scale_growth_interval=2)
    assert resident_skipped == len(skipped) and 0 < len(skipped) < 8
    assert streamed == pytest.approx(resident, rel=1e-6, abs=0)


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
