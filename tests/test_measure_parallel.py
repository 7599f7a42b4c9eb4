"""Parallel layouts (llmbench/measure/parallel.py, parallel_train.py): the rules, and exactness.

Exactness: a layout changes where the work runs, not what is computed, so in fp32 the per-step
losses of DDP, ZeRO-1, FSDP2 (both reshard settings), TP, TP x FSDP, checkpointing and
micro-batching equal one process on the same global batch up to the order of floating-point sums.
Measured on the tiny models of parallel_check: at most 1.3e-7 (2 processes) and 1.7e-7 (4)
relative over 5 steps; a broken layout (TP without the qkv row reorder, replicas reading the same
rows) is off by 1.3e-3 to 9.9e-3. TOL sits between, 100x from each.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from llmbench.errors import BadInput
from llmbench.measure.modeling import build_model, count_params
from llmbench.measure.parallel import ParallelLayout as L
from llmbench.measure.parallel import check_layout, plan_batch, rank_major_rows
from llmbench.measure.parallel_check import RUN, max_rel_diff, reference_losses, tiny_spec
from llmbench.measure.parallel_train import TrainRun, run_parallel_train

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-5


def torchrun_check(nproc: int, timeout: int) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "-m", "llmbench.measure.parallel_check", "--json"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    if p.returncode != 0 and "terminate called without an active exception" in p.stderr:
        # a rank's native threads aborting as the process exits (seen once in ~10 loaded runs of
        # the 4-process check, 2026-12-06): the run is repeated once; any other failure stands
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- rules

@pytest.mark.parametrize("kwargs, needle", [
    ({"zero": 4}, "--zero"), ({"tp": 0}, "--tp"), ({"recompute": "half"}, "--recompute"),
    ({"grad_accum": 0}, "--grad-accum"), ({"micro_batch": 0}, "--micro-batch")])
def test_layout_fields_are_checked(kwargs, needle):
    with pytest.raises(BadInput, match=needle):
        L(**kwargs)


def test_batch_plan_fills_the_knob_left_out():
    assert plan_batch(L(), 2, 8).__dict__ == {"dp": 2, "micro_batch": 4, "grad_accum": 1}
    assert plan_batch(L(micro_batch=2), 4, 16).__dict__ == {"dp": 4, "micro_batch": 2, "grad_accum": 2}
    assert plan_batch(L(tp=2, grad_accum=2), 4, 8).__dict__ == {"dp": 2, "micro_batch": 2, "grad_accum": 2}
    for layout, world, batch, needle in ((L(tp=3), 2, 4, "--tp 3 does not divide the 2 processes"),
                                         (L(), 2, 5, "--batch 5"),
                                         (L(micro_batch=2, grad_accum=2), 2, 6, "--batch 6")):
        with pytest.raises(BadInput, match=needle):
            plan_batch(layout, world, batch)


def test_layout_must_fit_the_model_and_torch():
    gpt = tiny_spec("gpt")  # 4 heads, d_ff 256
    with pytest.raises(BadInput, match="n_heads"):
        check_layout(gpt, L(tp=8), plan_batch(L(tp=8), 8, 4))
    with pytest.raises(BadInput, match="n_kv_heads"):  # llama: 8 heads, 2 key/value heads
        check_layout(tiny_spec("llama"), L(tp=4), plan_batch(L(tp=4), 4, 4))
    with pytest.raises(BadInput, match="--zero 2 or 3"):
        check_layout(gpt, L(tp=2), plan_batch(L(tp=2), 4, 4))
    with pytest.raises(BadInput, match="--precision"):
        TrainRun(batch=4, seq=32, precision="fp16")
    with pytest.raises(BadInput, match="--seq 4096"):
        run_parallel_train(gpt, L(), batch=4, seq=4096, device="cpu")


def test_rank_major_rows_gives_each_rank_its_heads():
    # q has rows 0-3, k rows 4-5, v rows 6-7; rank 0 must get q 0-1, k 4, v 6
    assert rank_major_rows((4, 2, 2), 2).tolist() == [0, 1, 4, 6, 2, 3, 5, 7]
    assert rank_major_rows((2, 2), 1).tolist() == [0, 1, 2, 3]


# ---------------------------------------------------------------- one process

@pytest.mark.parametrize("kind, layouts", [
    ("gpt", (L(recompute="full"), L(recompute="selective"), L(micro_batch=2, grad_accum=2))),
    ("llama", (L(recompute="selective"),))])  # llama: RMSNorm's in-place add_ under selective
def test_checkpointing_and_accumulation_equal_the_plain_step(kind, layouts, one_thread):
    spec = tiny_spec(kind)
    ref = reference_losses(spec, RUN)  # batch 4 in one micro-batch
    assert len(ref) == 5 and ref[0] != ref[-1]
    for layout in layouts:
        r = run_parallel_train(spec, layout, **RUN)
        assert r["status"] == "ok" and max_rel_diff(r["metrics"]["losses"], ref) <= TOL, layout


def test_metrics_flops_and_memory(one_thread):
    from llmbench.models.counting import training_flops
    spec = tiny_spec("gpt")
    r = run_parallel_train(spec, L(micro_batch=2, recompute="full"), **RUN)
    m = r["metrics"]
    assert (m["dp"], m["micro_batch"], m["grad_accum"], m["steps"]) == (1, 2, 2, RUN["steps"])
    assert m["flops_per_step"] == 2 * training_flops(spec, 2, RUN["seq"])["model"]
    assert m["hardware_flops_per_step"] == 2 * training_flops(spec, 2, RUN["seq"], recompute="full")["hardware"]
    assert m["tokens_per_s"] == pytest.approx(RUN["batch"] * RUN["seq"] / m["step_time_s"])
    n_params = count_params(build_model(spec))
    assert m["param_bytes_max_rank"] == 4 * n_params and m["optimizer_state_bytes_max_rank"] >= 8 * n_params
    assert m["peak_mem_kind"] == "rss_high_water_mark" and m["peak_mem_bytes"] > m["param_bytes_max_rank"]
    assert len(m["memory_per_rank"]) == 1


def test_out_of_memory_is_a_result(one_thread):
    huge = tiny_spec("gpt").with_(vocab_size=2**40)  # a 256 TiB embedding: the allocator refuses it
    r = run_parallel_train(huge, L(), **RUN)
    assert r["status"] == "oom" and "allocate" in r["error"]
    assert r["metrics"]["peak_mem_bytes"] > 0 and "step_time_s" not in r["metrics"]


def test_measure_train_runs_a_sharded_recomputed_layout(cli, tmp_path, one_thread):
    """`llmbench measure train` with FSDP2 (zero 3) and selective recompute in one process: the
    result carries the layout as run, METRICS names only, the memory split per kind."""
    from llmbench.point import check_metrics
    model = tmp_path / "tiny.json"
    model.write_text(json.dumps({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4,
                                 "vocab_size": 256, "n_positions": 128}))
    code, out, err = cli("measure", "train", "--model", str(model), "--zero", "3", "--recompute", "selective",
                         "--batch", "4", "--micro-batch", "2", "--seq", "32", "--steps", "2", "--device", "cpu",
                         "--json", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    r = json.loads(out)
    assert r["status"] == "ok" and not check_metrics(r["metrics"], "measure train")
    w = r["workload"]
    assert (w["layout"]["zero"], w["layout"]["recompute"], w["micro_batch"], w["grad_accum"]) == (3, "selective", 2, 2)
    m = r["metrics"]
    assert m["weights_bytes"] > 0 and m["optimizer_bytes"] >= 2 * m["weights_bytes"] and m["executed_tflops"] > m["achieved_tflops"]
    pred = r["prediction"]  # the model's weights + grads + AdamW state beside the measured bytes
    assert pred["state_bytes_measured"] == m["weights_bytes"] + m["grads_bytes"] + m["optimizer_bytes"]
    assert pred["state_bytes_error"] == pytest.approx(pred["state_bytes_predicted"] / pred["state_bytes_measured"] - 1)
    code, out, err = cli("measure", "train", "--model", str(model), "--tp", "5", "--device", "cpu", "--no-record")
    assert code == 2 and "--tp 5" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- several processes

def test_two_processes_every_layout_equals_one_process():
    """DDP, ZeRO-1, FSDP2 (reshard on/off), TP, TP x FSDP (1 x 2 mesh), full and selective
    checkpointing, gradient accumulation, compile: 2 gloo processes against one."""
    out = torchrun_check(2, timeout=240)
    runs = out["layouts"]
    assert len(runs) == 13
    for name, r in runs.items():
        assert r["status"] == "ok" and r["max_rel_diff"] <= TOL, (name, r["max_rel_diff"])
    # sharding is real: FSDP2 holds half the parameters, ZeRO-1 half the optimizer state of DDP
    assert runs["fsdp_zero3"]["param_bytes_max_rank"] * 2 == pytest.approx(runs["ddp"]["param_bytes_max_rank"], rel=1e-3)
    assert runs["zero1"]["optimizer_state_bytes_max_rank"] * 2 == pytest.approx(
        runs["ddp"]["optimizer_state_bytes_max_rank"], rel=1e-2)
    assert out["oom"]["status"] == "oom"  # every rank returns it; the next layout would run
    _declared_state_is_allocated(runs)


def _declared_state_is_allocated(runs):
    """The largest rank's parameter and optimizer bytes at world 2 are footprint's, to the byte,
    for DDP and FSDP2 (the tiny model's dims are even: FSDP2 pads nothing); ZeroRedundancyOptimizer
    assigns whole parameters to ranks, so its largest rank holds a little more than half."""
    from llmbench import footprint
    from llmbench.grid import Grid

    spec = tiny_spec("gpt")
    n = len(list(build_model(spec, meta=True).parameters()))

    def declared(zero):
        g = Grid(batch=4.0, seq=32.0, devices=2.0, tp=1.0, pp=1.0, micro_batch=2.0, sparsity=0.0,
                 zero=float(zero), recompute=0.0, offload=0.0)
        return footprint.training(spec, g, "fp32", "measure", tensors=n)

    for name, zero in (("ddp", 0), ("fsdp_zero2", 2), ("fsdp_zero3", 3)):
        f, r = declared(zero), runs[name]
        assert (r["param_bytes_max_rank"], r["optimizer_state_bytes_max_rank"]) == (f.weights, f.master + f.optimizer), name
    z1 = declared(1)
    assert runs["zero1"]["param_bytes_max_rank"] == z1.weights
    assert runs["zero1"]["optimizer_state_bytes_max_rank"] == pytest.approx(z1.optimizer, rel=1e-2)


@pytest.mark.slow
def test_four_processes_tp_x_fsdp_2d_mesh():
    out = torchrun_check(4, timeout=240)
    assert set(out["layouts"]) == {"tp2_x_fsdp_2x2", "tp2_x_fsdp_zero2", "tp2_x_fsdp_full_ac_accum2"}
    for name, r in out["layouts"].items():
        assert r["status"] == "ok" and r["max_rel_diff"] <= TOL, (name, r["max_rel_diff"])
