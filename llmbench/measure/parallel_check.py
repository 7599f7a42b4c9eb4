"""Exactness of the parallel layouts: each layout's losses against one process on the same global batch.

    torchrun --standalone --nproc-per-node 2 -m llmbench.measure.parallel_check          # a table
    torchrun --standalone --nproc-per-node 4 -m llmbench.measure.parallel_check --json   # 2-D TP x FSDP

Every rank first trains the tiny model alone (the reference: same seed, same global batch), then
runs each layout of its world size through `run_parallel_train`, and rank 0 reports the largest
relative difference of the per-step losses. In fp32 the layouts differ from the reference only in
the order of floating-point sums (all-reduce, reduce-scatter, split matmuls), so the difference stays
near fp32 rounding; a wrong layout (a missing all-reduce, a misplaced head) is off by far more.
tests/test_measure_parallel.py runs this and checks the tolerance.
"""
from __future__ import annotations

import json
import os
import time

from llmbench.measure.parallel import BatchPlan, ParallelLayout
from llmbench.models import get_model
from llmbench.models.spec import resize

L = ParallelLayout
# name -> (model, layout); "gpt": GELU, learned positions, tied head, biases; "llama": SwiGLU, rotary,
# grouped-query attention (8 heads, 2 key/value heads), RMSNorm, untied head, no biases.
LAYOUTS = {
    2: {"ddp": ("gpt", L(zero=0)), "zero1": ("gpt", L(zero=1)),
        "fsdp_zero2": ("gpt", L(zero=2)), "fsdp_zero3": ("gpt", L(zero=3)),
        "tp2": ("gpt", L(tp=2)), "tp2_llama": ("llama", L(tp=2)),
        "tp2_x_fsdp_1x2": ("llama", L(tp=2, zero=3)),
        "fsdp_full_ac": ("gpt", L(zero=3, recompute="full")),
        "fsdp_selective_ac": ("gpt", L(zero=3, recompute="selective")),
        "tp2_selective_ac": ("llama", L(tp=2, recompute="selective")),
        "ddp_accum2": ("gpt", L(zero=0, grad_accum=2)), "fsdp_accum2": ("gpt", L(zero=3, grad_accum=2)),
        "fsdp_compile": ("gpt", L(zero=3, compile=True, compile_backend="eager"))},
    4: {"tp2_x_fsdp_2x2": ("llama", L(tp=2, zero=3)), "tp2_x_fsdp_zero2": ("gpt", L(tp=2, zero=2)),
        "tp2_x_fsdp_full_ac_accum2": ("llama", L(tp=2, zero=3, recompute="full", grad_accum=2))},
}
RUN = {"batch": 4, "seq": 32, "steps": 4, "warmup_steps": 1, "device": "cpu", "lr": 1e-3}


def tiny_spec(kind: str):
    """2 layers, width 64, vocabulary 256: a GPT-2 or a Llama-3 shape (GQA kept: 8 heads, 2 kv)."""
    if kind == "llama":
        return resize(get_model("llama-3.1-8b"), n_layers=2, d_model=64, n_heads=8, vocab_size=256,
                      max_seq_len=128)
    return resize(get_model("gpt2-small"), n_layers=2, d_model=64, n_heads=4, vocab_size=256)


def reference_losses(spec, run: dict) -> list[float]:
    """One process, no layout, the whole global batch in one micro-batch."""
    from llmbench.measure import device as dev
    from llmbench.measure.parallel_train import TrainRun, measure
    tr = TrainRun(**{k: v for k, v in run.items() if k != "device"})
    return measure(spec, L(), tr, BatchPlan(dp=1, micro_batch=tr.batch, grad_accum=1),
                   dev.resolve(run["device"]))["losses"]


def max_rel_diff(losses: list[float], reference: list[float]) -> float:
    if len(losses) != len(reference):
        return float("inf")
    return max(abs(a - b) / abs(b) for a, b in zip(losses, reference))


def _on_rank0(fn, world: int):
    """fn() on rank 0 alone (the others wait), its value broadcast to every rank."""
    if world == 1:
        return fn()
    import torch.distributed as tdist

    from llmbench.measure.parallel_train import setup
    setup("cpu", L())
    box = [fn() if tdist.get_rank() == 0 else None]
    tdist.broadcast_object_list(box, src=0)
    return box[0]


def check(world: int, run: dict = RUN) -> dict:
    """Every layout of this world size; the same dict on every rank."""
    from llmbench.measure.parallel_train import run_parallel_train
    specs = {kind: tiny_spec(kind) for kind in ("gpt", "llama")}
    refs = _on_rank0(lambda: {kind: reference_losses(spec, run) for kind, spec in specs.items()}, world)
    out = {"world_size": world, "run": run, "reference": refs, "layouts": {}}
    for name, (kind, layout) in LAYOUTS.get(world, {}).items():
        t0 = time.perf_counter()
        r = run_parallel_train(specs[kind], layout, **run)
        m = r["metrics"]
        out["layouts"][name] = {"model": kind, "layout": layout.to_dict(), "status": r["status"],
                                "losses": m.get("losses"), "max_rel_diff": max_rel_diff(m["losses"], refs[kind]),
                                "param_bytes_max_rank": m["param_bytes_max_rank"],
                                "optimizer_state_bytes_max_rank": m["optimizer_state_bytes_max_rank"],
                                "wall_s": time.perf_counter() - t0}
    huge = resize(specs["gpt"], vocab_size=2**40)  # a 256 TiB embedding: the allocator refuses it
    r = run_parallel_train(huge, L(zero=3), **run)
    out["oom"] = {"status": r["status"], "error": r["error"], "peak_mem_bytes": r["metrics"].get("peak_mem_bytes")}
    return out


def table(out: dict) -> str:
    lines = [f"{out['world_size']} processes, batch {out['run']['batch']} x seq {out['run']['seq']}, "
             f"{out['run']['steps'] + out['run']['warmup_steps']} steps, fp32; "
             f"reference losses gpt {', '.join(f'{v:.6f}' for v in out['reference']['gpt'])}",
             f"{'layout':28} {'model':6} {'status':6} {'max rel diff':>12} {'params/rank':>12} {'opt state/rank':>14} {'wall s':>6}"]
    for name, r in out["layouts"].items():
        lines.append(f"{name:28} {r['model']:6} {r['status']:6} {r['max_rel_diff']:12.2e} "
                     f"{r['param_bytes_max_rank']:12,} {r['optimizer_state_bytes_max_rank']:14,} {r['wall_s']:6.2f}")
    lines.append(f"oom: a {2**40:,}-token vocabulary under zero 3 -> {out['oom']['status']} "
                 f"({out['oom']['error'][:70]}...), peak RSS {out['oom']['peak_mem_bytes'] / 2**20:,.0f} MiB")
    return "\n".join(lines)


def main(argv=None) -> int:
    import sys
    argv = sys.argv[1:] if argv is None else argv
    out = check(int(os.environ.get("WORLD_SIZE", "1")))
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(out) if "--json" in argv else table(out), flush=True)
    from llmbench.measure.parallel_train import teardown
    teardown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
