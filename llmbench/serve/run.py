"""`llmbench serve` as a function: a model on a hardware layout under an engine, fed a load, run
through the simulator, summarised in benchmark_serving's keys. Torch-free; the CLI (serve/cli.py)
parses into these dataclasses and prints; `plan serve` (serve/plan.py) calls `replica` and `run`.

    from llmbench.serve.run import Deployment, Load, run
    res = run(Deployment(model="llama-3.1-8b", hardware="h100-sxm"), Load(rate_per_s=8, requests=1000))
    res["p99_ttft_ms"], res["request_goodput"]
"""
from __future__ import annotations

from dataclasses import asdict

from llmbench.errors import BadInput
from llmbench.perfmodel.plan import check_serving_tp, serving_tp_ok
from llmbench.queueing import trace as tr
from llmbench.serve.config import Deployment, Load
from llmbench.queueing.metrics import Slo, summarize
from llmbench.queueing.sim import Scheduler, SimResult, engine_scheduler, simulate

#: tp tried for a replica when none is given (within a node, dividing the heads)
TPS = (1, 2, 4, 8, 16)


def make_trace(load: Load) -> tr.Trace:
    """The requests of `load`: the trace file's first `requests`, or generated (queueing/trace.py)."""
    if load.trace is not None:
        return tr.read_trace(load.trace, max_requests=load.requests)
    return tr.synthetic(load.requests, rate_per_s=load.rate_per_s, burstiness=load.burstiness,
                        prompt=tr.parse_length(load.prompt_len, "--prompt-len", "prompt_tokens"),
                        output=tr.parse_length(load.output_len, "--output-len", "output_tokens"),
                        seed=load.seed)


def _hw_spec(d: Deployment):
    from llmbench.hardware import get_hardware
    from llmbench.point import Workload

    hw = get_hardware(d.hardware)
    spec = Workload(model=d.model, hardware=d.hardware, suite="infer").spec()
    return spec, hw


def replica(d: Deployment, need_tokens: int = 0):
    """The StepModel of one replica: the tp x pp given, else the fewest devices (tp first, within
    a node; then pipeline stages: wafers in sram_pipeline) whose memory holds the weights and a
    KV cache of at least `need_tokens` (the longest request)."""
    from llmbench.perfmodel.serving import resolve_engine, step_model
    from llmbench.point import Workload

    spec, hw = _hw_spec(d)
    check_precision(hw, d.precision)
    eng = resolve_engine(d.engine, hw)
    for tp, pp in _layouts(d, spec, hw):
        w = Workload(model=d.model, hardware=d.hardware, suite="infer", precision=d.precision,
                     devices=tp * pp).with_(tp=tp, pp=pp)
        sm = step_model(spec, hw, w, engine=eng, kv_precision=d.kv_precision)
        if sm.fits and sm.kv_capacity_tokens >= max(need_tokens, 1):
            return sm
        if d.tp and d.pp:
            raise BadInput(f"{spec.name} on tp {tp} x pp {pp} {hw.name}: the weights leave "
                           f"{sm.kv_capacity_tokens:,} KV tokens per replica, a request needs "
                           f"{need_tokens:,}; use more devices per replica")
    raise BadInput(f"{spec.name} does not fit on any replica layout tried on {hw.name} "
                   "(tp up to a node, pp up to the layers)")


def _layouts(d: Deployment, spec, hw):
    """(tp, pp) candidates, fewest devices first."""
    dpn = max(hw.interconnect.devices_per_node, 1) if hw.interconnect else 1
    if d.tp:
        check_serving_tp(spec, d.tp)
    if d.pp and d.pp > spec.n_layers:
        raise BadInput(f"--pp {d.pp} is more stages than {spec.name}'s {spec.n_layers} layers")
    tps = [d.tp] if d.tp else [t for t in TPS if t <= dpn and serving_tp_ok(spec, t)]
    pps = [d.pp] if d.pp else range(1, spec.n_layers + 1)
    out = sorted(((tp, pp) for tp in tps for pp in pps), key=lambda x: (x[0] * x[1], x[1]))
    if d.devices:
        out = [(tp, pp) for tp, pp in out if d.devices % (tp * pp) == 0
               and (d.replicas is None or d.replicas * tp * pp == d.devices)]
        if not out:
            given = ", ".join(f"--{k} {v}" for k, v in (("devices", d.devices), ("replicas", d.replicas),
                                                          ("tp", d.tp), ("pp", d.pp)) if v)
            raise BadInput(f"{given}: no layout of {spec.name} has devices = replicas x tp x pp "
                           "(tp dividing the heads, pp up to the layers)")
    return out[:64]


def check_precision(hw, precision: str | None) -> None:
    """An asked weights' precision must have a peak on `hw`, as predict infer checks it
    (perfmodel/step.peak_flops), not fall back to the hardware's own in silence (precision_for);
    hw None: the name only."""
    from llmbench.perfmodel.step import peak_flops
    from llmbench.point import PRECISIONS

    if precision is None:
        return
    if precision not in PRECISIONS:
        raise BadInput(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if hw is None:
        return
    try:
        peak_flops(hw, precision)
    except ValueError as e:
        raise BadInput(str(e)) from None


def check_lengths(spec, trace: tr.Trace) -> None:
    """Every request's prompt + output within the model's positions (max_position_embeddings), as
    predict infer checks --seq + --gen-len (point.check_positions); serve has no --rope-scaling."""
    total = trace.prompt_tokens + trace.output_tokens
    i = int(total.argmax())
    if total[i] > spec.max_seq_len:
        raise BadInput(f"the longest request has {int(trace.prompt_tokens[i]):,} prompt + "
                       f"{int(trace.output_tokens[i]):,} output = {int(total[i]):,} tokens, more than "
                       f"{spec.name}'s {spec.max_seq_len:,} positions; shorten the prompts or outputs")


def check_budget(d: Deployment, sched: Scheduler, trace: tr.Trace) -> None:
    """Without chunked prefill a prompt is prefilled whole in one step: vLLM refuses to start when
    --max-num-batched-tokens is below the longest sequence it may take (SchedulerConfig); so is a
    budget the user gives below the longest prompt (the engine's default is sized for its prompts)."""
    longest = int(trace.prompt_tokens.max())
    given = d.max_batched_tokens is not None
    if given and sched.policy == "continuous" and longest > sched.max_batched_tokens:
        raise BadInput(f"--max-batched-tokens {sched.max_batched_tokens:,} is below the longest prompt "
                       f"({longest:,} tokens), which --policy continuous prefills in one step; raise it "
                       "or use --policy chunked")


def scheduler(d: Deployment, sm, load: Load) -> Scheduler:
    """The engine's scheduler defaults under the user's overrides."""
    per = sm.tp * sm.pp
    if d.devices and d.replicas is None:
        replicas = d.devices // per
        if replicas < 1 or d.devices % per:
            raise BadInput(f"--devices {d.devices} is not a multiple of tp x pp = {per}")
    else:
        replicas = d.replicas or 1
    return engine_scheduler(sm.engine, policy=d.policy or None, max_num_seqs=d.max_num_seqs,
                            max_batched_tokens=d.max_batched_tokens or None, replicas=replicas, router=d.router,
                            max_concurrency=load.max_concurrency)


def run(d: Deployment, load: Load, slo: Slo | None = None, trace: tr.Trace | None = None) -> dict:
    """Simulate `load` on `d`: the summary (benchmark_serving keys) and what ran."""
    trace = trace if trace is not None else make_trace(load)
    check_lengths(_hw_spec(d)[0], trace)
    need = int((trace.prompt_tokens + trace.output_tokens).max())
    sm = replica(d, min(need, 1 << 20))
    sched = scheduler(d, sm, load)
    check_budget(d, sched, trace)
    res = simulate(trace, sm, sched)
    summary = summarize(res.records, slo=slo, kv_cache_utilization=res.kv_cache_utilization,
                        preemptions=res.preemptions)
    return {**describe(d, sm, sched, load, trace, slo), **summary,
            "rejected": res.rejected, "engine_steps": res.steps,
            "max_kv_cache_utilization": res.max_kv_cache_utilization, "_sim": res}


def describe(d: Deployment, sm, sched: Scheduler, load: Load, trace: tr.Trace, slo: Slo | None) -> dict:
    """The configuration that ran, resolved (the engine's defaults filled in), and where the step
    model's parameters come from (provenance.serving_calibration)."""
    from llmbench.perfmodel.provenance import serving_calibration

    devices = sm.tp * sm.pp * sched.replicas
    return {"model": d.model, "hardware": d.hardware, "devices": devices, "tp": sm.tp, "pp": sm.pp,
            "replicas": sched.replicas, "precision": sm.precision, "kv_precision": sm.kv_precision,
            "engine": sm.engine.name, "mode": sm.mode, "kv_capacity_tokens": int(sm.kv_capacity_tokens),
            "scheduler": asdict(sched), "request_rate": load.rate_per_s if load.trace is None else None,
            "burstiness": load.burstiness, "max_concurrency": load.max_concurrency,
            "trace": trace.describe(),
            "slo": None if slo is None or not slo.given() else asdict(slo),
            "calibration": serving_calibration(sm.hw.name, sm.engine.name)}


def result_row(res: dict, load: Load) -> dict:
    """A `run` result as a results-store row (ResultsDB.record's arguments): a point naming what
    ran and the load (suite serve, source predicted), the summary as metrics, the per-request
    records in its environment."""
    rec = res["_sim"].records
    point = {"suite": "serve", **{k: res[k] for k in ("model", "hardware", "devices", "tp", "pp", "replicas",
                                                        "precision", "kv_precision", "engine", "mode")},
             "scheduler": res["scheduler"], "request_rate": res["request_rate"], "burstiness": load.burstiness,
             "max_concurrency": load.max_concurrency, "trace": res["trace"]["source"],
             "requests": res["trace"]["requests"], "slo": res["slo"]}
    metrics = {k: v for k, v in res.items()
               if k not in point and k not in ("_sim", "trace", "scheduler", "key", "calibration")}
    per_request = {k: getattr(rec, k).tolist() for k in
                   ("arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens", "preemptions")}
    return {"point": point, "source": "predicted", "status": "ok", "metrics": metrics,
            "environment": {"tool": "llmbench.queueing.sim", "requests": per_request}}
