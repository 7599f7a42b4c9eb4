"""footprint.STATE against the tensors each torch runtime really allocates, to the byte (CPU, a
tiny GPT-2), and the estimators that ask footprint: one answer per runtime.

Before footprint, the predictor assumed Megatron's 2 / 2 / 12 bytes per parameter (weights /
grads / master + moments) for every runtime; `measure train` holds 4 / 4 / 8, so
test_state_is_what_the_runtime_allocates failed on every bf16 case (runtime "mixed" below shows
it still does: test_megatron_rule_is_not_measure_trains)."""
from __future__ import annotations

import pytest
import torch

from llmbench import footprint
from llmbench.grid import Grid
from llmbench.measure.parallel import ParallelLayout
from llmbench.measure.parallel_check import tiny_spec
from llmbench.measure.parallel_train import run_parallel_train

SPEC = tiny_spec("gpt").with_(n_layers=1)


def _grid(zero=0, batch=2, seq=16, devices=1, recompute="none"):
    from llmbench.point import RECOMPUTE

    return Grid(batch=float(batch), seq=float(seq), devices=float(devices), tp=1.0, pp=1.0,
                micro_batch=float(batch // devices), sparsity=0.0, zero=float(zero),
                recompute=float(RECOMPUTE.index(recompute)), offload=0.0)


def _tensors(spec) -> int:
    from llmbench.measure.modeling import build_model

    return len(list(build_model(spec, meta=True).parameters()))


def _measured(zero: int, precision: str) -> tuple[int, int, int]:
    r = run_parallel_train(SPEC, ParallelLayout(zero=zero), batch=2, seq=16, steps=1, warmup_steps=0,
                           precision=precision, device="cpu")
    assert r["status"] == "ok", r["error"]
    m = r["metrics"]
    return m["param_bytes_max_rank"], m["grad_bytes_max_rank"], m["optimizer_state_bytes_max_rank"]


def _declared(runtime: str, zero: int, precision: str, devices: int = 1) -> tuple[float, float, float]:
    f = footprint.training(SPEC, _grid(zero, devices=devices), precision, runtime, tensors=_tensors(SPEC))
    return f.weights, f.grads, f.master + f.optimizer


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_state_is_what_the_runtime_allocates(zero, precision, one_thread):
    """measure train (DDP / ZeroRedundancyOptimizer / FSDP2, one process): weights, grads and
    optimizer state, kind by kind, equal footprint's "measure" runtime to the byte."""
    assert _measured(zero, precision) == _declared("measure", zero, precision)


def test_megatron_rule_is_not_measure_trains(one_thread):
    """The old assumption (2 / 2 / 12 in bf16) fails against the runtime: the test above can fail."""
    measured, mixed = _measured(0, "bf16"), _declared("mixed", 0, "bf16")
    assert measured[0] == 2 * mixed[0] and measured[1] == 2 * mixed[1]  # 4 bytes where Megatron keeps 2
    assert mixed[2] > measured[2]  # 4 + 8 (master + moments) where the runtime keeps 8


def test_world_of_two_shards_as_declared():
    """FSDP2 at world 2 halves every kind (tiny GPT-2's dims are even: no padding); ZeRO-1 only the
    moments. The bytes of rank 0 of parallel_check's two-process run are checked by
    tests/test_measure_parallel.py; here the declared arithmetic."""
    full = _declared("fsdp2", 3, "fp32")
    half = _declared("fsdp2", 3, "fp32", devices=2)
    n = _tensors(SPEC) * 4.0  # the step counters stay whole on every rank under FSDP2
    assert half[:2] == (full[0] / 2, full[1] / 2) and half[2] - n == (full[2] - n) / 2
    z1 = _declared("autocast", 1, "fp32", devices=2)
    assert z1[:2] == full[:2] and z1[2] == full[2] / 2


def _tensor_bytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if t is not None)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_resident_trainer_allocates_its_state(precision, one_thread):
    """stream compare's ResidentTrainer: its account and its real tensors after one step equal
    footprint's "masters" (16 bytes/param in fp32, 20 in bf16, + AdamW's step counters)."""
    from llmbench.streaming.config import StreamRun, workload_and_options
    from llmbench.streaming.trainers import ResidentTrainer, make_batch

    w, opts = workload_and_options(model="tiny", layers=1, batch=2, seq=8, steps=1, precision=precision)
    cfg, spec = StreamRun.of(w, opts), w.spec()
    tr = ResidentTrainer(spec, cfg, torch.device("cpu"))
    tr.step(*make_batch(spec, 2, 8, 0, step=0))
    f = footprint.training(spec, _grid(batch=2, seq=8), precision, "masters")
    assert tr.state_bytes == f.state_bytes
    n = len(tr.masters)
    real = _tensor_bytes(tr.params) + _tensor_bytes(p.grad for p in tr.params)
    if tr.mixed:
        real += _tensor_bytes(tr.masters) + _tensor_bytes(m.grad for m in tr.masters)
    real += _tensor_bytes(v for s in tr.opt.state.values() for v in s.values() if torch.is_tensor(v))
    assert real == footprint.training(spec, _grid(batch=2, seq=8), precision, "masters", tensors=n).state_bytes


@pytest.mark.parametrize("prefetch", [0, 1])
def test_streamed_trainer_holds_its_window_and_store(prefetch, one_thread):
    """StreamedTrainer: the device account's peaks of weights and gradients and the store's bytes
    equal footprint.streamed."""
    from llmbench.streaming.config import StreamRun, workload_and_options
    from llmbench.streaming.trainers import StreamedTrainer, make_batch

    w, opts = workload_and_options(model="tiny", layers=3, batch=2, seq=8, steps=1, prefetch=prefetch,
                                   precision="fp32")
    cfg, spec = StreamRun.of(w, opts), w.spec()
    tr = StreamedTrainer(spec, cfg, torch.device("cpu"))
    try:
        tr.step(*make_batch(spec, 2, 8, 0, step=0))
        f = footprint.streamed(spec, batch=2, seq=8, precision="fp32", prefetch=prefetch)
        acc = tr.ex.account
        assert (acc.weight_bytes_peak, acc.grad_bytes_peak, tr.store.nbytes) == (f.weights, f.grads, f.store)
    finally:
        tr.close()


def test_one_case_per_runtime_and_kinds_sum():
    """GPT-2 XL, batch 8 x 1024, bf16, one device: each runtime's state per parameter as declared."""
    from llmbench.models import get_model
    from llmbench.models.counting import param_count

    spec = get_model("gpt2-xl")
    P = param_count(spec)
    g = _grid(batch=8, seq=1024)
    per = {rt: footprint.training(spec, g, "bf16", rt).state_bytes / P for rt in ("mixed", "autocast", "masters")}
    assert per == {"mixed": 16.0, "autocast": 16.0, "masters": 20.0}
    f = footprint.training(spec, g, "bf16", "autocast")
    assert (f.weights, f.grads, f.master, f.optimizer) == (4 * P, 4 * P, 0.0, 8 * P)
    assert f.peak_bytes == f.state_bytes + f.activations + f.logits
    assert footprint.training(spec, _grid(zero=2, batch=8, seq=1024), "bf16", "fsdp2").buffers == 2 * P


H200_RUNS = __import__("pathlib").Path(__file__).resolve().parents[1] / "docs" / "results" / "gpu-h200-2026-12-04"


@pytest.mark.parametrize("name", ["train_small.json", "train_gpt2-small_64.json", "train_gpt2-medium_64.json",
                                  "train_gpt2xl.json"])
def test_measure_train_peak_on_an_h200_is_the_footprint_with_the_loss_of_the_house_runtime(name):
    """measure train's allocator peak on an H200 (bf16, torch 2.11; docs/results/gpu-h200-2026-12-04)
    within 5% of predict(runtime="measure"): the house runtime's loss holds 2 + 12 bytes per logit
    (footprint.LOSS_GRAD_BYTES), not Megatron's 4, which left GPT-2 small at batch 64 x 256 46% short."""
    import json

    from llmbench.footprint import loss_bytes_per_logit
    from llmbench.perfmodel.predict import predict
    from llmbench.point import Workload

    assert loss_bytes_per_logit("measure", "bf16") == 14.0 and loss_bytes_per_logit("mixed", "bf16") == 4.0
    r = json.loads((H200_RUNS / name).read_text())
    w = Workload.from_dict(r["workload"])
    pred = predict(w, runtime="measure").to_dict()
    peak = (pred.get("metrics") or pred)["peak_mem_bytes"]
    assert peak == pytest.approx(r["metrics"]["peak_mem_bytes"], rel=0.05), (peak, r["metrics"]["peak_mem_bytes"])


def test_fp8_training_keeps_16_bit_state_and_checkpoints_but_serving_keeps_fp8_weights():
    """fp8 training casts GEMM operands only: the state and the layer input a full recompute keeps
    are 16-bit (footprint.stored_precision); a quantised checkpoint served in fp8 holds 1 byte per
    weight."""
    from llmbench.models.presets import get_model

    spec = get_model("llama-3.1-8b")
    g = _grid(zero=3, batch=16, seq=8192, devices=8, recompute="full")
    f8, b16 = (footprint.training(spec, g, p) for p in ("fp8", "bf16"))
    assert f8.weights == b16.weights and f8.grads == b16.grads and f8.optimizer == b16.optimizer
    assert footprint.act_per_seq(spec, 8192, "fp8")[2] == footprint.act_per_seq(spec, 8192, "bf16")[2]
    assert footprint.act_per_seq(spec, 8192, "fp8")[0] < footprint.act_per_seq(spec, 8192, "bf16")[0]
    assert footprint.stored_precision("fp8") == "bf16" and footprint.stored_precision("fp32") == "fp32"
    served = {p: footprint.state_totals(spec, p, "serving")["weights"] for p in ("fp8", "bf16")}
    assert served["fp8"] == served["bf16"] / 2
