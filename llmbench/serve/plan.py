"""Capacity planning for serving (`llmbench plan serve`): which hardware, layout, replicas and
max-num-seqs meet TTFT and TPOT objectives at a request rate, ranked by cost, devices or energy.
The question Vidur-Search answers (Agrawal et al., MLSys 2024), across the catalog's vendors.

    from llmbench.serve.plan import plan_serve
    plan_serve("llama-3.1-70b", Load(rate_per_s=20, prompt_len="1024", output_len="256"),
               Slo(ttft_ms=500, tpot_ms=50), objective="cost")

Two stages, both on the same per-step cost model (perfmodel/serving.py):
1. screen every candidate (hardware x tp x pp x max-num-seqs) with a steady-state fluid model of a
   continuous-batching replica: with b sequences decoding, a decode step takes tau(b) =
   step(0 prompt tokens, b sequences, b x (prompt + output/2) cached tokens); each request also
   costs one prefill t_p = step(prompt tokens, 0, 0); so a replica serves lambda(b) =
   b / (O tau(b) + b t_p) requests/s at TPOT(b) = tau(b) + b t_p / O (its share of the prefills),
   b limited by max-num-seqs and the KV cache (b x (P + O) tokens). The largest lambda(b) whose
   TPOT is within SCREEN_MARGIN of the objective, and t_p x TTFT_QUEUE within the TTFT one, sets
   the rate a replica takes at HEADROOM utilisation; replicas = ceil(rate / that);
2. simulate the best candidates (queueing/sim.py: all their replicas behind the router, default
   least-outstanding, fed the whole load: rate or trace, length distributions, concurrency limit)
   and keep those whose p99 TTFT and p99 TPOT meet the objectives, adding a replica (up to
   MAX_EXTRA) when they do not. Only simulated layouts are called meeting the SLOs.
Cost: devices x the catalog's price per device-hour (its source cited there) over the output
tokens per hour; energy: devices x the catalog's power_w over output tokens per second.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from llmbench.errors import BadInput
from llmbench.footprint import KV_PRECISIONS
from llmbench.perfmodel.plan import serving_tp_ok
from llmbench.queueing.metrics import Slo, summarize
from llmbench.serve.run import (Deployment, Load, check_budget, check_lengths, check_precision, make_trace,
                                scheduler)
from llmbench.queueing.sim import simulate

MAX_NUM_SEQS = (4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
TPS = (1, 2, 4, 8)
PPS = (1, 2, 4, 8)
#: wafers tried in sram_pipeline (seed 004: Llama-3.1-70B on 4 CS-3s, 405B on more)
WAFERS = tuple(range(1, 33))
#: screen: the mean TPOT must be within this share of the objective (p99 runs above the mean)
SCREEN_MARGIN = 0.8
#: screen: a prompt's prefill times this must fit in the TTFT objective (queueing behind others)
TTFT_QUEUE = 2.0
#: screen: replicas run at this share of the rate the fluid model allows
HEADROOM = 0.85
#: verification: requests simulated per candidate, extra replicas tried when the SLOs are missed
SIM_REQUESTS = 300
MAX_EXTRA = 2
OBJECTIVES = ("cost", "devices", "energy")


def default_hardware() -> list[str]:
    """Every catalog accelerator (not the CPU)."""
    from llmbench.hardware import catalog

    return sorted(n for n, hw in catalog().items() if hw.kind != "cpu" and (n.endswith(".toml") is False))


def _layouts(spec, hw):
    """(tp, pp) a replica may take: tp within a node dividing the heads; pp stages (wafers in
    sram_pipeline, where tp is 1)."""
    if hw.default_mode_infer == "sram_pipeline":
        return [(1, w) for w in WAFERS if w <= spec.n_layers]
    dpn = max(hw.interconnect.devices_per_node, 1) if hw.interconnect else 1
    return [(tp, pp) for tp in TPS for pp in PPS
            if tp <= dpn and serving_tp_ok(spec, tp) and pp <= spec.n_layers]


def _replica_models(model: str, hw_name: str, need_tokens: int, precision, engine, kv_precision=None):
    """The StepModels of the layouts of `hw_name` that hold the model and one request; wafers:
    only the fewest that hold it (seed 004's layout; more only add hops)."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.serving import build_step_model, resolve_engine
    from llmbench.point import Workload, precision_for

    hw = get_hardware(hw_name)
    spec = Workload(model=model, hardware=hw_name, suite="infer").spec()
    eng = resolve_engine(engine, hw)
    prec = precision_for(hw, precision)
    mode = "sram_pipeline" if hw.default_mode_infer == "sram_pipeline" else "resident"
    out = []
    for tp, pp in _layouts(spec, hw):
        sm = build_step_model(spec, hw, precision=prec, tp=tp, pp=pp, mode=mode, eng=eng,
                              kv_precision=kv_precision)
        if sm.fits and sm.kv_capacity_tokens >= need_tokens:
            out.append(sm)
            if mode == "sram_pipeline":
                break
    return hw, out


def screen(sm, P: float, O: float, slo: Slo) -> dict[int, float]:
    """max-num-seqs -> requests/s one replica takes within the objectives (0: none)."""
    b = np.arange(1, max(MAX_NUM_SEQS) + 1, dtype=np.float64)
    tau = np.asarray(sm.time_s(np.zeros_like(b), b, b * (P + O / 2.0), prefill_seqs=np.zeros_like(b),
                               prefill_attn_pairs=np.zeros_like(b)), dtype=np.float64)
    t_p = float(sm.time_s(P, 0.0, 0.0, prefill_seqs=1.0, prefill_attn_pairs=P * (P + 1) / 2.0))
    # a request's TTFT also holds the engine's fixed time outside its steps (the simulator adds it too)
    if (t_p * TTFT_QUEUE + sm.engine.request_overhead_s) * 1e3 > slo.ttft_ms:
        return {m: 0.0 for m in MAX_NUM_SEQS}
    lam = b / (O * tau + b * t_p)
    ok = (tau + b * t_p / O) * 1e3 <= SCREEN_MARGIN * slo.tpot_ms
    ok &= b * (P + O) <= sm.kv_capacity_tokens
    out = {}
    for m in MAX_NUM_SEQS:
        sel = ok[:m]
        out[m] = float(lam[:m][sel].max()) if sel.any() else 0.0
    return out


def _economics(hw, devices: int, rate: float, O: float) -> dict:
    out_tps = rate * O
    price, power = hw.price_per_device_hour_usd, hw.power_w
    return {"usd_per_mtok_output": None if price is None else devices * price / (out_tps * 3600.0) * 1e6,
            "j_per_output_token": None if power is None else devices * power / out_tps,
            "price_per_device_hour_usd": price, "power_w": power,
            "price_source": (hw.sources or {}).get("price_per_device_hour_usd", "no price in the catalog")}


def candidates(model: str, load: Load, slo: Slo, hardware: list[str], precision=None, engine=None,
               kv_precision=None):
    """Every screened candidate (dicts), and how many were searched."""
    from llmbench.point import Workload

    trace = make_trace(load)
    check_lengths(Workload(model=model, suite="infer").spec(), trace)
    P, O = float(trace.prompt_tokens.mean()), float(trace.output_tokens.mean())
    need = int(np.percentile(trace.prompt_tokens + trace.output_tokens, 99))
    out, searched = [], 0
    for name in hardware:
        hw, models = _replica_models(model, name, need, precision, engine, kv_precision)
        for sm in models:
            for m, lam in screen(sm, P, O, slo).items():
                searched += 1
                if lam <= 0:
                    continue
                replicas = max(1, math.ceil(load.rate_per_s / (HEADROOM * lam)))
                devices = replicas * sm.tp * sm.pp
                out.append({"hardware": name, "engine": sm.engine.name, "mode": sm.mode, "tp": sm.tp,
                            "pp": sm.pp, "max_num_seqs": m, "replicas": replicas, "devices": devices,
                            "screen_rate_per_replica": lam, "_sm": sm, "_hw": hw,
                            **_economics(hw, devices, load.rate_per_s, O)})
    return out, searched, trace


def _key(objective: str):
    big = math.inf
    if objective == "cost":
        return lambda c: (c["usd_per_mtok_output"] if c["usd_per_mtok_output"] is not None else big, c["devices"])
    if objective == "energy":
        return lambda c: (c["j_per_output_token"] if c["j_per_output_token"] is not None else big, c["devices"])
    return lambda c: (c["devices"], c["usd_per_mtok_output"] if c["usd_per_mtok_output"] is not None else big)


def verify(c: dict, load: Load, slo: Slo, trace, policy=None, max_batched_tokens=None,
           router=None) -> dict | None:
    """Simulate candidate `c`'s replicas behind `router` (None: least-outstanding), fed the whole
    load (its rate or trace, and the client's concurrency limit over all of them); add replicas (up to
    MAX_EXTRA) until p99 TTFT and p99 TPOT meet the objectives. The candidate with its figures."""
    sm = c["_sm"]
    one = replace(load, requests=min(load.requests, SIM_REQUESTS))
    t = make_trace(one) if load.trace is None else trace.head(min(len(trace), SIM_REQUESTS))
    check_lengths(sm.spec, t)
    for extra in range(MAX_EXTRA + 1):
        replicas = c["replicas"] + extra
        d = Deployment(model="-", hardware=c["hardware"], max_num_seqs=c["max_num_seqs"], replicas=replicas,
                       policy=policy, max_batched_tokens=max_batched_tokens,
                       router=router or "least_outstanding")
        sched = scheduler(d, sm, one)
        check_budget(d, sched, t)
        res = simulate(t, sm, sched)
        s = summarize(res.records, slo=slo, percentiles=(50, 99))
        if (s["p99_ttft_ms"] is not None and s["p99_ttft_ms"] <= slo.ttft_ms and s["p99_tpot_ms"] is not None
                and s["p99_tpot_ms"] <= slo.tpot_ms and s["failed"] == 0):
            devices = replicas * sm.tp * sm.pp
            O = float(t.output_tokens.mean())
            return {**c, "replicas": replicas, "devices": devices,
                    **_economics(c["_hw"], devices, load.rate_per_s, O),
                    "simulated": {k: s[k] for k in ("p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms",
                                                    "request_goodput", "request_throughput")}
                    | {"requests": len(t), "rate_per_replica": load.rate_per_s / replicas,
                       "preemptions": res.preemptions,
                       "kv_cache_utilization": res.kv_cache_utilization}}
    return None


def plan_serve(model: str, load: Load, slo: Slo, *, hardware: list[str] | None = None, objective: str = "cost",
               top: int = 5, precision=None, engine=None, kv_precision=None, policy=None,
               max_batched_tokens=None, router=None, show_progress: bool = False) -> dict:
    """The `top` deployments meeting `slo` at `load.rate_per_s`, ranked by `objective`, each
    simulated; and the best of each hardware by the screen (simulated when it is in the top).
    precision, engine, kv_precision: every candidate's; policy, max_batched_tokens: the simulated
    scheduler's (the screen's fluid model is continuous batching)."""
    if objective not in OBJECTIVES:
        raise BadInput(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if math.isinf(load.rate_per_s):
        raise BadInput("plan serve needs a finite --rate")
    Deployment(model=model, hardware="-", policy=policy, max_batched_tokens=max_batched_tokens)  # its checks
    if kv_precision is not None and kv_precision not in KV_PRECISIONS:
        raise BadInput(f"--kv-precision must be one of {', '.join(KV_PRECISIONS)}, got {kv_precision!r}")
    t0 = time.perf_counter()
    hardware = _with_engine(_with_precision(hardware, precision), engine, listed=bool(hardware))
    cands, searched, trace = candidates(model, load, slo, hardware, precision, engine, kv_precision)
    cands.sort(key=_key(objective))
    chosen, tried = [], 0
    for c in _progress(cands, top, show_progress):
        if any(_same(c, k) for k in chosen):
            continue
        tried += 1
        v = verify(c, load, slo, trace, policy, max_batched_tokens, router)
        if v is not None and not any(_same(v, k) for k in chosen):
            chosen.append(v)
        if len(chosen) >= top:
            break
    chosen.sort(key=_key(objective))
    best = {}
    for c in cands:
        best.setdefault(c["hardware"], c)
    return {"model": model, "request_rate": load.rate_per_s, "slo": {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms},
            "objective": objective, "hardware": hardware, "searched": searched, "screened_feasible": len(cands),
            "simulated": tried, "trace": trace.describe(), "layouts": [_public(c) for c in chosen],
            "best_per_hardware": [_public(c) for c in sorted(best.values(), key=_key(objective))],
            "no_candidate": sorted(set(hardware) - set(best)), "elapsed_s": time.perf_counter() - t0}


def _with_precision(hardware: list[str] | None, precision: str | None) -> list[str]:
    """The hardware searched: as listed, each with a peak in `precision` (else BadInput, as serve
    and predict infer); by default every accelerator, only those with such a peak when one is asked."""
    from llmbench.hardware import get_hardware

    if hardware:
        for name in hardware:
            check_precision(get_hardware(name), precision)
        return hardware
    if precision is None:
        return default_hardware()
    check_precision(None, precision)
    out = [n for n in default_hardware() if get_hardware(n).peak(precision)]
    if not out:
        raise BadInput(f"no catalog accelerator has a {precision} peak; choose another --precision")
    return out


def _with_engine(hardware: list[str], engine: str | None, listed: bool) -> list[str]:
    """The hardware searched with --engine: as listed, each one it runs on (else BadInput, as serve
    and predict infer: serving.check_runs_on); by default only those it runs on."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.serving import build_for, check_runs_on, engine as engine_named

    if engine is None:
        return hardware
    out = []
    for name in hardware:
        hw = get_hardware(name)
        try:
            check_runs_on(engine_named(build_for(engine, hw)).name, hw)
        except BadInput:
            if listed:
                raise
            continue
        out.append(name)
    if not out:
        raise BadInput(f"--engine {engine} runs on no catalog accelerator plan serve searches")
    return out


def _same(a: dict, b: dict) -> bool:
    """One deployment: a larger max-num-seqs that the load never reaches is the same one."""
    return all(a[k] == b[k] for k in ("hardware", "tp", "pp", "replicas"))


def _public(c: dict) -> dict:
    return {k: v for k, v in c.items() if not k.startswith("_")}


def _progress(cands, top: int, show: bool):
    """Candidates to simulate, with a progress bar on a terminal (each a few tenths of a second)."""
    import sys

    if not show or not sys.stderr.isatty():
        yield from cands
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("simulating the best layouts", total=top)
        for c in cands:
            yield c
            bar.update(task, completed=min(top, bar.tasks[0].completed + 1))
