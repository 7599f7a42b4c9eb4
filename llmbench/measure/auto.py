"""`measure train --layout auto`: the planner's fastest layout that fits these devices, measured.

    torchrun --nproc-per-node 2 -m llmbench measure train --model gpt2-small --n-layers 2 \
        --batch 4 --seq 64 --steps 2 --layout auto

`choose_layout(w, run)` asks the layout planner (perfmodel/plan.py, objective time) for the
layouts of this training Workload on the torchrun world (WORLD_SIZE processes), with each device's
memory: the accelerator's total memory (CUDA), on the CPU the host RAM shared by the processes of
this node (LOCAL_WORLD_SIZE), or the catalog entry's when --hardware names one. The search covers
what `measure train` runs: tp over the divisors of the world, ZeRO 0-3 (DDP, ZeroRedundancyOptimizer,
FSDP2 without / with reshard after forward), recompute none | selective | full, micro-batch x
grad-accum; no pipeline parallelism (not built in measure/), no offload, resident weights. Knobs the
user gave (--tp, --zero, --recompute, --micro-batch, --grad-accum) constrain the search; --sparsity
and --baseline keep it to plain DDP (all they run with), choosing the micro-batch only. The first
layout in the planner's order that measure/parallel.check_layout accepts is run. Rank 0's choice is
broadcast so every process runs the same layout. No torch at import time.
"""
from __future__ import annotations

import os
from dataclasses import replace

from llmbench.errors import BadInput

#: what measure train runs: one stage, nothing offloaded, weights resident on the device
MEASURABLE = {"pp": 1, "offload": "none", "mode": "resident"}
#: the layout --sparsity and --baseline run with (plain DDP)
PLAIN = {"tp": 1, "zero": 0, "recompute": "none"}


def choose_layout(w, run) -> tuple:
    """(the Workload with the chosen layout, the choice as a dict: layout text, prediction,
    layouts searched, memory per device); raises BadInput when no measurable layout fits."""
    from llmbench.measure.suites import device_for, resolve_workload

    device = device_for(w, run)  # under torchrun: the process group, started once
    given = {k: getattr(w.layout, k) for k in ("tp", "zero", "recompute")}
    if w.sparsity or run.baseline:  # these run in train.py's plain data parallel loop only
        given = {k: v if v is not None else PLAIN[k] for k, v in given.items()}
    plain = resolve_workload(w.with_(tp=None, zero=None, recompute=None), device, run)
    base = plain.with_(micro_batch=w.micro_batch, grad_accum=w.grad_accum, **given, **MEASURABLE)
    hw, memory_bytes, memory_from = device_hardware(base.hardware, device, named=bool(w.hardware))
    choice = _broadcast(_search(base, hw, memory_bytes, memory_from))
    if "error" in choice:
        raise BadInput(choice["error"])
    chosen = base.with_(micro_batch=choice["micro_batch"], grad_accum=choice["grad_accum"],
                        **{k: choice[k] for k in ("tp", "zero", "recompute")})
    return chosen, choice


def device_hardware(name: str, device, named: bool) -> tuple:
    """(the hardware spec with this device's memory, bytes per device, where that figure is from)."""
    from llmbench.hardware import get_hardware
    from llmbench.measure import device as dev

    hw = get_hardware(name)
    mem = hw.device_memory
    if named:
        return hw, mem.capacity_bytes, f"--hardware {hw.name}"
    total = dev.total_memory_bytes(device)
    if not total:
        return hw, mem.capacity_bytes, f"catalog {hw.name}"
    where = f"{device.type} total memory"
    if not dev.is_accelerator(device):  # the processes of one node share its RAM
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        total, where = total // local, f"host RAM / {local} process{'es' if local > 1 else ''}"
    tiers = tuple(replace(t, capacity_bytes=float(total)) if t is mem else t for t in hw.memory_tiers)
    return replace(hw, memory_tiers=tiers), float(total), where


def tp_candidates(spec, w) -> list[int]:
    """Tensor-parallel degrees to search: the one given, else every divisor of the world."""
    if w.layout.tp is not None:
        return [w.layout.tp]
    return [t for t in range(1, w.devices + 1) if w.devices % t == 0]


def _search(w, hw, memory_bytes: float, memory_from: str) -> dict:
    """The planner's time-ordered layouts over every tp candidate; the first measure can run."""
    from llmbench.perfmodel.plan import FIELDS, Plan, evaluate, layout_text, layouts, rank
    from llmbench.perfmodel.params import resolve_params

    spec = w.spec()
    L = {k: [] for k in FIELDS}
    for tp in tp_candidates(spec, w):
        part = layouts(spec, hw, w.with_(tp=tp), [w.devices])
        for k in FIELDS:
            L[k] += list(part[k])
    if not L["devices"]:
        return {"error": f"--layout auto: no layout of {w.devices} process(es) splits batch {w.batch}"}
    r = evaluate(spec, hw, w, L, resolve_params(hw), runtime="measure")  # what measure train holds
    p = Plan(workload=w, layouts=L, metrics=r, order=rank(hw, r, L, "time"), objective="time")
    for i in p.order:
        cand = p.workload_at(int(i))
        if runnable(spec, cand):
            pick = {"tp": cand.layout.tp, "zero": cand.layout.zero, "recompute": cand.layout.recompute,
                    "micro_batch": cand.micro_batch, "grad_accum": cand.grad_accum}
            return {**pick, "layout": layout_text(cand), "searched": p.searched, "fit": len(p.order),
                    "predicted_step_time_s": float(r["step_time_s"][i]),
                    "predicted_tokens_per_s": float(r["tokens_per_s"][i]),
                    "predicted_peak_mem_bytes": float(r["peak_mem_bytes"][i]),
                    "memory_per_device_bytes": memory_bytes, "memory_from": memory_from}
    from llmbench.units import fmt_bytes
    return {"error": f"--layout auto: none of the {p.searched} layouts of {spec.name} (batch {w.batch} x "
                     f"{w.seq_len}, {w.precision}) on {w.devices} process(es) fits {fmt_bytes(memory_bytes)} "
                     f"per device ({memory_from}); try a smaller --batch, --seq or model"}


def runnable(spec, w) -> bool:
    """Whether measure/parallel runs this layout (tp dividing the model's heads and d_ff; TP with
    several replicas over FSDP2 only)."""
    from llmbench.measure.parallel import ParallelLayout, check_layout, plan_batch

    lay = ParallelLayout(tp=w.layout.tp, zero=w.layout.zero, recompute=w.layout.recompute,
                         micro_batch=w.micro_batch, grad_accum=w.grad_accum)
    try:
        check_layout(spec, lay, plan_batch(lay, w.devices, w.batch))
    except BadInput:
        return False
    return True


def _broadcast(choice: dict) -> dict:
    """Rank 0's choice on every rank (the planner is deterministic, but memory may differ by node)."""
    import torch.distributed as tdist

    if not (tdist.is_available() and tdist.is_initialized()) or tdist.get_world_size() == 1:
        return choice
    box = [choice]
    tdist.broadcast_object_list(box, src=0)
    return box[0]
