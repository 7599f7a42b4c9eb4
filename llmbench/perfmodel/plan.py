"""The layout planner: every layout knob a training Workload leaves None (tp, pp, ZeRO, recompute,
offload, micro-batch / grad-accum, mode) is chosen by one vectorised search over the layouts that
fit, as Megatron / NeMo / FSDP / DeepSpeed users choose them; a knob the user gives constrains it.

    llmbench plan --model llama-2-13b --hardware a100-80gb --devices 64 --batch 1024 --seq 4096
    from llmbench.perfmodel.plan import plan
    p = plan(spec, hw, w)              # Plan: the layouts searched, fastest that fits first
    p.best()                           # the resolved Workload predict_train runs

Search space (memory.hierarchy says what each architecture allows; docs/predict.md "Planner"):
- tp: divides the heads (and KV heads) and the node (tensor parallel stays in the scale-up domain);
- pp: divides the layers, tp x pp divides the devices; dp = devices / (tp pp) divides the batch;
- ZeRO / FSDP stage 0-3 (only with dp > 1; with pp > 1 at most 1, as DeepSpeed and Megatron's
  distributed optimizer allow); recompute none | selective | full;
- micro-batch: every divisor of the per-replica batch (grad-accum = the rest);
- ep (MoE models): divides the routed experts and the dp replicas (expert parallelism inside data
  parallelism, moe.py); 1 for dense models and weight streaming;
- offload: optimizer state to the lower tier, or the weights too = weight streaming (tp = pp = 1).
Objectives: time (step time), devices (fewest devices <= --devices, then time), energy (J per
token: power_w x devices x step / tokens), cost (USD per token: price_per_device_hour_usd).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from llmbench.errors import BadInput
from llmbench.layouts import check_layout_knobs, layout_text  # noqa: F401 - layout_text: plan's text
from llmbench.point import LAYOUT_FIELDS, OFFLOAD, RECOMPUTE, Workload

from llmbench._xp import Scalar
from llmbench.grid import OFF_NONE, OFF_WEIGHTS, Grid, code
from .memory import check_devices, hierarchy
from .params import resolve_params

OBJECTIVES = ("time", "devices", "energy", "cost")
#: layouts within this fraction of the best score tie; the simpler wins (no offload, less
#: recompute, lower ZeRO, smaller tp x pp, fewer devices): the model is not accurate to 1%, and
#: users do not add a mechanism for less
TIE = 0.01
#: searches of at most this many layouts run on Python floats (no numpy import)
SMALL = 256
#: the largest device count the fewest-devices search tries (beyond a wafer cluster's own limit)
MAX_DEVICES = 1 << 16
FIELDS = ("devices", "tp", "pp", "micro_batch", "zero", "recompute", "offload", "ep")
#: micro-batch and pipeline-degree candidates searched at most (spread()): every divisor of a
#: per-replica batch below 1,000 (840 has the most, 32) or of a power of two up to 2^31 is still
#: searched, as every layer count's below 1,000
MICRO_CAP = 32
PP_CAP = 32


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The layouts searched for one workload, their predictions, and the order they rank in."""

    workload: Workload
    """as given (precision and defaults resolved)"""
    layouts: dict
    """FIELDS -> list, one entry per layout searched"""
    metrics: dict
    """sweep_train's metrics for the same layouts (numpy arrays; lists for a search on floats)"""
    order: list
    """indices of the layouts that fit, best first"""
    objective: str
    note: str = ""
    """why the ranking is not the objective asked (energy / cost unknown for this hardware)"""

    @property
    def searched(self) -> int:
        return len(self.layouts["devices"])

    def workload_at(self, i: int) -> Workload:
        """The resolved Workload of layout i."""
        L = {k: int(v[i]) for k, v in self.layouts.items()}  # noqa: E741
        dp = L["devices"] // (L["tp"] * L["pp"])
        off = OFFLOAD[L["offload"]]
        w = self.workload
        return w.with_(devices=L["devices"], micro_batch=L["micro_batch"],
                       grad_accum=w.batch // (dp * L["micro_batch"]), tp=L["tp"], pp=L["pp"], zero=L["zero"],
                       recompute=RECOMPUTE[L["recompute"]], offload=off, ep=L["ep"],
                       mode="weight_streaming" if off == "weights" else "resident")

    def best(self) -> Workload:
        return self.workload_at(int(self.order[0]))


def modes_offloads(h, lay) -> list[int]:
    """Offload codes the search covers: the architecture's (memory.hierarchy), as the user constrains;
    BadInput for a mode and an offload that contradict each other (neither is dropped silently)."""
    if lay.mode == "sram_pipeline":
        raise BadInput("--mode sram_pipeline is an inference mode (weights and KV cache in wafer SRAM); "
                       "training runs resident or weight_streaming")
    if lay.mode == "resident" and lay.offload == "weights":
        raise BadInput("--offload weights streams the weights from the lower tier: that is --mode "
                       "weight_streaming, not resident")
    if lay.mode == "weight_streaming" and lay.offload not in (None, "weights"):
        raise BadInput(f"--mode weight_streaming keeps the weights and optimizer state in the lower tier: "
                       f"--offload {lay.offload} contradicts it (give --offload weights or leave it out)")
    if lay.offload is not None:
        codes = [code("offload", lay.offload)]
    else:
        codes = [code("offload", o) for o in h.offloads]
        if "weight_streaming" in h.modes or lay.mode == "weight_streaming":
            codes.append(OFF_WEIGHTS)
    if lay.mode == "weight_streaming":
        codes = [OFF_WEIGHTS]
    elif lay.mode in ("resident", "sram_pipeline"):
        codes = [c for c in codes if c != OFF_WEIGHTS] or [OFF_NONE]
    elif "resident" not in h.modes:  # a wafer trains by weight streaming unless asked
        codes = [c for c in codes if c == OFF_WEIGHTS]
    return codes


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending, from its prime factors: trial division to sqrt(n) is at most
    2^20 steps for the largest supported count (point.MAX_BATCH = 2^40), where a scan of
    range(n) took years (issue 23)."""
    out, m, p = [1], n, 2
    while p * p <= m:
        k = 0
        while m % p == 0:
            m, k = m // p, k + 1
        out = [d * p ** e for d in out for e in range(k + 1)]
        p += 1 if p == 2 else 2
    if m > 1:
        out += [d * m for d in out]
    return sorted(out)


def spread(options: list[int], cap: int) -> list[int]:
    """At most `cap` of the ascending `options`, kept geometrically spread (the smallest, the
    largest, and the one nearest each power of two between): a candidate list bounded by
    construction, whatever the input's divisors (a batch of 2^8 x 5^8 has 81)."""
    if len(options) <= cap:
        return options
    keep = {options[0], options[-1]}
    for k in range(options[-1].bit_length()):
        keep.add(min(options, key=lambda d: abs(math.log2(d) - k)))
    keep = sorted(keep)
    if len(keep) > cap:
        keep = sorted({keep[round(i * (len(keep) - 1) / (cap - 1))] for i in range(cap)})
    return keep


def stages_even(n_layers: int, pp: int) -> bool:
    """pp stages of equal size: the layers split evenly, or the layers plus the embedding and the
    loss counted as one layer each (Megatron-LM --account-for-embedding-in-pipeline-split and
    --account-for-loss-in-pipeline-split: Llama 3.1 405B's 126 layers on pp 8 or 16)."""
    return n_layers % pp == 0 or (n_layers + 2) % pp == 0


def check_tp_heads(spec, tp: int) -> None:
    """BadInput unless tp divides the query heads and the key/value heads (Megatron-LM splits
    both over the tensor-parallel ranks: --num-query-groups must be a multiple of tp)."""
    kv = spec.n_kv_heads or spec.n_heads
    if spec.n_heads % tp or kv % tp:
        raise BadInput(f"tp {tp} must divide {spec.name}'s {spec.n_heads} heads and {kv} key/value heads")


def serving_tp_ok(spec, tp: int) -> bool:
    """Whether a serving engine splits `spec` over tp ranks: tp divides the query heads, and the
    key/value heads split evenly or are replicated evenly (vLLM's QKVParallelLinear: with tp at
    least the KV heads, each rank holds one, num_kv_head_replicas = tp / total_num_kv_heads;
    TensorRT-LLM likewise). Training keeps Megatron's stricter rule (check_tp_heads)."""
    kv = spec.n_kv_heads or spec.n_heads
    return spec.n_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def check_serving_tp(spec, tp: int) -> None:
    """BadInput unless serving_tp_ok."""
    if not serving_tp_ok(spec, tp):
        kv = spec.n_kv_heads or spec.n_heads
        raise BadInput(f"tp {tp} must divide {spec.name}'s {spec.n_heads} heads, and divide or be a multiple of "
                       f"its {kv} key/value heads (replicated when tp exceeds them)")


def check_pp(spec, pp: int) -> None:
    """BadInput unless pp stages split the layers evenly (plan.stages_even)."""
    if pp > spec.n_layers:
        raise BadInput(f"pp {pp} exceeds {spec.name}'s {spec.n_layers} layers")
    if not stages_even(spec.n_layers, pp):
        # the step model gives every stage n_layers / pp layers: with uneven stages the slowest
        # stage, ceil(n_layers / pp) layers, sets the pace, which it does not model
        ds = divisors(spec.n_layers)
        near = " or ".join(str(d) for d in [max(d for d in ds if d < pp)] + [d for d in ds if d > pp][:1])
        raise BadInput(f"pp {pp} does not split {spec.name}'s {spec.n_layers} layers into equal "
                       f"pipeline stages; nearest valid pp: {near}")


def tp_options(spec, h, lay) -> list[int]:
    if lay.tp is not None:
        return [lay.tp]
    kv = getattr(spec, "n_kv_heads", spec.n_heads) or spec.n_heads
    return [t for t in divisors(h.tp_max) if spec.n_heads % t == 0 and kv % t == 0]


def pp_options(spec, h, lay) -> list[int]:
    if lay.pp is not None:
        return [lay.pp]
    return spread(divisors(spec.n_layers), PP_CAP) if h.pp else [1]


def micro_options(w: Workload, per_replica: int) -> list[int]:
    if w.micro_batch is not None:
        return [w.micro_batch] if per_replica % w.micro_batch == 0 else []
    if w.grad_accum is not None:
        return [per_replica // w.grad_accum] if per_replica % w.grad_accum == 0 else []
    return spread(divisors(per_replica), MICRO_CAP)


def check_ep_given(spec, ep) -> None:
    """BadInput for an --ep the model cannot take (dense model, not dividing the experts)."""
    if ep is None or ep == 1:
        return
    if not spec.is_moe:
        raise BadInput(f"--ep {ep}: {spec.name} has no routed experts (expert parallelism needs a MoE model)")
    if spec.n_experts % ep:
        raise BadInput(f"--ep {ep} must divide {spec.name}'s {spec.n_experts} routed experts")


def ep_options(spec, lay, dp: int, off: int) -> list[int]:
    """Expert-parallel degrees: divisors of the routed experts that divide the dp replicas (EP
    inside DP); 1 for a dense model or weight streaming."""
    if lay.ep is not None:
        return [lay.ep] if dp % lay.ep == 0 and (lay.ep == 1 or off != OFF_WEIGHTS) else []
    if not spec.is_moe or off == OFF_WEIGHTS:
        return [1]
    return [e for e in divisors(spec.n_experts) if dp % e == 0]


def zero_options(h, lay, dp: int, pp: int, off: int) -> list[int]:
    if lay.zero is not None:
        return [lay.zero]
    if off == OFF_WEIGHTS or dp == 1:
        return [0]
    top = min(h.zero_max, 1 if pp > 1 else 3)
    return list(range(top + 1))


def layouts(spec, hw, w: Workload, counts) -> dict:
    """Every layout of the search space on each device count: FIELDS -> list of ints."""
    h, lay = hierarchy(hw), w.layout
    rcs = [code("recompute", lay.recompute)] if lay.recompute is not None else [0, 1, 2]
    offs = modes_offloads(h, lay)
    cols = {k: [] for k in FIELDS}
    for n, tp, pp in itertools.product(counts, tp_options(spec, h, lay), pp_options(spec, h, lay)):
        if n % (tp * pp) or pp > spec.n_layers or not stages_even(spec.n_layers, pp) or w.batch % (n // (tp * pp)):
            continue
        dp = n // (tp * pp)
        mbs = micro_options(w, w.batch // dp)
        for off in offs:
            if off == OFF_WEIGHTS and tp * pp > 1:
                continue
            combos = list(itertools.product(mbs, zero_options(h, lay, dp, pp, off), rcs,
                                            ep_options(spec, lay, dp, off)))
            if combos:
                k = len(combos)
                for name, v in (("devices", n), ("tp", tp), ("pp", pp), ("offload", off)):
                    cols[name] += [v] * k
                for name, v in zip(("micro_batch", "zero", "recompute", "ep"), zip(*combos)):
                    cols[name] += v
    return cols


def evaluate(spec, hw, w: Workload, L: dict, params, runtime: str | None = None) -> dict:
    """sweep_train's metrics for each layout of L: one numpy pass; a search of at most SMALL
    layouts runs them one by one on Python floats instead (no numpy import: a planned
    prediction on one device stays as fast as a given one). Returns lists."""
    from .step import step_arrays, sweep_metrics

    n = len(L["devices"])
    base = {"batch": float(w.batch), "seq": float(w.seq_len), "sparsity": float(w.sparsity)}
    if n <= SMALL:
        rows = [sweep_metrics(step_arrays(spec, hw, w.precision, Grid(**base, **{k: float(L[k][i]) for k in FIELDS}),
                                          params, Scalar, runtime), Scalar) for i in range(n)]
        return {k: [r[k] for r in rows] for k in (rows[0] if rows else ("fits",))}
    import numpy as np

    g = Grid(**base, **{k: np.array(L[k], dtype=float) for k in FIELDS})
    return sweep_metrics(step_arrays(spec, hw, w.precision, g, params, np, runtime), np)


def score(hw, step: float, tokens: float, devices: int, objective: str) -> float:
    """What the objective minimises for one layout (devices: time, within a device count)."""
    if objective == "energy" and hw.power_w:
        return hw.power_w * devices / tokens
    price = getattr(hw, "price_per_device_hour_usd", None)
    if objective == "cost" and price:
        return price / 3600.0 * devices / tokens
    return step


def unknown(hw, objective: str) -> str:
    """The note when the catalog lacks what the objective needs (then: ranked by time)."""
    if objective == "energy" and not hw.power_w:
        return f"energy unknown (no power_w for {hw.name}): ranked by time"
    if objective == "cost" and not getattr(hw, "price_per_device_hour_usd", None):
        return f"cost unknown (no price_per_device_hour_usd for {hw.name}): ranked by time"
    return ""


def rank(hw, r: dict, L: dict, objective: str) -> list[int]:
    """Indices of the layouts that fit, best first: in bands of TIE from the best score (per device
    count for `devices`, fewest first); within a band the simpler layout (no offload, less
    recompute, lower ZeRO, smaller tp x pp, less expert parallelism, fewer devices), then the
    better score."""
    ok = [i for i, f in enumerate(_list(r["fits"])) if f]
    if not ok:
        return []
    step, tokens = _list(r["step_time_s"]), _list(r["tokens_per_s"])
    s = {i: score(hw, step[i], tokens[i], L["devices"][i], objective) for i in ok}
    group = (lambda i: L["devices"][i]) if objective == "devices" else (lambda i: 0)
    best: dict = {}
    for i in ok:
        best[group(i)] = min(best.get(group(i), math.inf), s[i])

    def key(i):
        band = math.floor(math.log(s[i] / best[group(i)]) / math.log1p(TIE) + 1e-9)
        return (group(i), band, L["offload"][i], L["recompute"][i], L["zero"][i], L["tp"][i] * L["pp"][i],
                L["ep"][i], L["devices"][i], s[i])
    return sorted(ok, key=key)


def _list(v) -> list:
    return v.tolist() if hasattr(v, "tolist") else list(v)


def search(spec, hw, w: Workload, params=None, objective: str = "time", counts=None,
           runtime: str | None = None) -> Plan:
    """Evaluate every layout of the search space (on each of `counts` devices, default
    w.devices) and rank those that fit by the objective (rank)."""
    if objective not in OBJECTIVES:
        raise BadInput(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    p = params if params is not None else resolve_params(hw)
    check_layout_knobs("perfmodel.train", {k: getattr(w.layout, k) for k in LAYOUT_FIELDS})
    check_ep_given(spec, w.layout.ep)
    L = layouts(spec, hw, w, counts or [w.devices])
    r = evaluate(spec, hw, w, L, p, runtime)
    return Plan(workload=w, layouts=L, metrics=r, order=rank(hw, r, L, objective), objective=objective,
                note=unknown(hw, objective))


def device_counts(hw, up_to: int) -> list[int]:
    """Device counts a search tries up to `up_to`: powers of two and whole nodes."""
    dpn = max(hw.interconnect.devices_per_node, 1) if hw.interconnect else 1
    out = {1 << k for k in range(up_to.bit_length()) if 1 << k <= up_to}
    if dpn > 1:  # whole nodes: each count to 64 nodes, then powers of two of nodes (bounded)
        out |= {dpn * k for k in range(1, min(up_to // dpn, 64) + 1)}
        out |= {dpn << k for k in range(up_to.bit_length()) if dpn << k <= up_to}
    return sorted(out | {up_to})


def plan(spec, hw, w: Workload, params=None, runtime: str | None = None) -> Plan:
    """The time-ordered plan of `w` on its devices; BadInput (one line) when nothing fits, with
    the fewest devices on which some layout does."""
    check_devices(hw, w.devices, w.layout)
    check_given(spec, w)
    p = search(spec, hw, w, params, runtime=runtime)
    if len(p.order):
        return p
    raise BadInput(refusal(spec, hw, w, params, p.searched, runtime))


def check_given(spec, w: Workload) -> None:
    """The rules a given tp, pp, micro-batch or grad-accum breaks, named before the search (which
    would otherwise say only that no layout fits)."""
    if w.layout.tp is not None:
        check_tp_heads(spec, w.layout.tp)
    if w.layout.pp is not None:
        check_pp(spec, w.layout.pp)
    check_batch_rule(w)


def check_batch_rule(w: Workload) -> None:
    """BadInput naming the batch rule (batch = micro_batch x grad_accum x replicas) when a given
    --micro-batch or --grad-accum divides the per-replica batch of no data-parallel degree the
    devices allow (the layout search would otherwise say only that nothing fits)."""
    if w.micro_batch is None and w.grad_accum is None:
        return
    lay, n = w.layout, w.devices or 1
    step = (lay.tp or 1) * (lay.pp or 1)
    dps = [d for d in divisors(n) if n % (d * step) == 0 or lay.tp is None or lay.pp is None]
    per = [w.batch // d for d in dps if w.batch % d == 0]
    k, v = ("micro_batch", w.micro_batch) if w.micro_batch is not None else ("grad_accum", w.grad_accum)
    if any(p % v == 0 for p in per):
        return
    shown = ", ".join(str(p) for p in per[:6]) + (", ..." if len(per) > 6 else "")
    raise BadInput(f"--{k.replace('_', '-')} {v} divides no per-replica batch: batch {w.batch} = micro_batch x "
                   f"grad_accum x data-parallel replicas, and batch / replicas on {n} devices is {shown}")


def given_knobs(w: Workload) -> list[str]:
    """The layout options the user gave (as flags), which the search keeps."""
    out = [k for k in LAYOUT_FIELDS if getattr(w.layout, k) is not None]
    out += [k for k in ("micro_batch", "grad_accum") if getattr(w, k) is not None]
    return ["--" + k.replace("_", "-") for k in out]


def refusal(spec, hw, w: Workload, params, searched: int, runtime: str | None = None) -> str:
    """Why nothing fits, and on how few devices something would (with the knobs given, else with
    the planner choosing them). A wafer's MemoryX limit is no question of devices or tp/pp."""
    from llmbench.units import fmt_bytes

    from .memory import model_state_bytes

    h = hierarchy(hw)
    head = (f"{spec.name} (batch {w.batch} x {w.seq_len}, {w.precision}) fits no layout on {w.devices} x "
            f"{hw.name} ({searched} layout{'s' if searched != 1 else ''} searched)")
    state = sum(model_state_bytes(spec, w.precision))
    if h.store_shared and h.store is not None and state > h.store.capacity_bytes:
        return (f"{head}: weights and optimizer state need {fmt_bytes(state)} of {h.store.name}, which holds "
                f"{fmt_bytes(h.store.capacity_bytes)} for the whole cluster; more systems do not add any")
    top, given = h.max_devices or MAX_DEVICES, given_knobs(w)
    for free in ([False, True] if given else [False]):
        ww = w.with_(micro_batch=None, grad_accum=None, **{k: None for k in LAYOUT_FIELDS}) if free else w
        more = search(spec, hw, ww, params, "devices", device_counts(hw, top), runtime)
        if len(more.order):
            best = more.best()
            how = f"leaving {' '.join(given)} to the planner, " if free else ""
            return f"{head}; {how}the fewest devices on which one fits: {best.devices} ({layout_text(best)})"
    return (f"{head}, nor on any count up to {top}: even one sequence's activations exceed "
            f"{h.resident.name} ({fmt_bytes(h.resident.capacity_bytes)} per device); try a shorter "
            "--seq or another precision")
