"""`llmbench serve` as a function: a model on a hardware layout under an engine, fed a load, run
through the simulator, summarised in benchmark_serving's keys. Torch-free; the CLI (serve/cli.py)
parses into these dataclasses and prints; `plan serve` (serve/plan.py) calls `replica` and `run`.

    from llmbench.serve.run import Deployment, Load, run
    res = run(Deployment(model="llama-3.1-8b", hardware="h100-sxm"), Load(rate_per_s=8, requests=1000))
    res["p99_ttft_ms"], res["request_goodput"]
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from llmbench.errors import BadInput
from llmbench.serve import trace as tr
from llmbench.serve.metrics import Slo, summarize
from llmbench.serve.sim import Scheduler, SimResult, simulate

#: tp tried for a replica when none is given (within a node, dividing the heads)
TPS = (1, 2, 4, 8, 16)


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """What serves: the model, the hardware and its layout, the engine and its scheduler."""
    model: str                       # preset name or HF config.json
    hardware: str                    # catalog name
    devices: int | None = None       # devices in all (replicas = devices / (tp pp)); None: replicas
    tp: int | None = None            # tensor-parallel degree of a replica (None: fewest that fit)
    pp: int | None = None            # pipeline stages of a replica (None: 1, or wafers that hold it)
    precision: str | None = None     # weights' precision (None: the hardware's)
    engine: str | None = None        # engines.toml name (None: the hardware family's default)
    kv_precision: str | None = None
    policy: str | None = None        # continuous | chunked | static (None: the engine's)
    max_num_seqs: int = 256          # vLLM --max-num-seqs default
    max_batched_tokens: int | None = None  # None: the engine's chunk budget, else 8192
    replicas: int | None = None      # None: devices / (tp pp), else 1
    router: str = "round_robin"


@dataclass(frozen=True, kw_only=True)
class Load:
    """What arrives: a rate (or all at once with a concurrency limit), or a trace file."""
    rate_per_s: float = math.inf     # requests/s; inf: all at t = 0 (with max_concurrency: closed loop)
    burstiness: float = 1.0          # gamma shape of the intervals (1: Poisson)
    max_concurrency: int | None = None
    trace: str | None = None         # a trace file instead of the generator
    requests: int = 1000             # generated, or the first K of the trace
    prompt_len: str = "1024"         # N, lognormal:MEAN,SD, uniform:LO,HI, file:PATH
    output_len: str = "128"
    seed: int = 0

    def __post_init__(self):
        if not (self.rate_per_s > 0):  # NaN too
            raise BadInput(f"--rate must be > 0 requests/s, got {self.rate_per_s}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise BadInput(f"--max-concurrency must be >= 1, got {self.max_concurrency}")
        if not 1 <= self.requests <= tr.MAX_REQUESTS:
            raise BadInput(f"--requests must be in [1, {tr.MAX_REQUESTS:,}], got {self.requests:,}")

    def make_trace(self) -> tr.Trace:
        if self.trace is not None:
            return tr.read_trace(self.trace, max_requests=self.requests)
        return tr.synthetic(self.requests, rate_per_s=self.rate_per_s, burstiness=self.burstiness,
                            prompt=tr.parse_length(self.prompt_len, "--prompt-len", "prompt_tokens"),
                            output=tr.parse_length(self.output_len, "--output-len", "output_tokens"),
                            seed=self.seed)


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
    from llmbench.perfmodel.serving import engine as engine_by_name, default_engine, step_model
    from llmbench.point import Workload

    spec, hw = _hw_spec(d)
    eng = engine_by_name(d.engine) if d.engine else default_engine(hw)
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
    kv = getattr(spec, "n_kv_heads", None) or spec.n_heads
    tps = [d.tp] if d.tp else [t for t in TPS if t <= dpn and spec.n_heads % t == 0 and kv % t == 0]
    pps = [d.pp] if d.pp else range(1, spec.n_layers + 1)
    out = sorted(((tp, pp) for tp in tps for pp in pps), key=lambda x: (x[0] * x[1], x[1]))
    if d.devices:
        out = [(tp, pp) for tp, pp in out if d.devices % (tp * pp) == 0]
        if not out:
            raise BadInput(f"--devices {d.devices} is not a multiple of tp x pp")
    return out[:64]


def scheduler(d: Deployment, sm, load: Load) -> Scheduler:
    """The engine's scheduler defaults under the user's overrides."""
    eng = sm.engine
    chunk = eng.chunked_prefill_tokens
    policy = d.policy or ("chunked" if chunk else "continuous")
    per = sm.tp * sm.pp
    if d.devices and d.replicas is None:
        replicas = d.devices // per
        if replicas < 1 or d.devices % per:
            raise BadInput(f"--devices {d.devices} is not a multiple of tp x pp = {per}")
    else:
        replicas = d.replicas or 1
    return Scheduler(policy=policy, max_num_seqs=d.max_num_seqs,
                     max_batched_tokens=d.max_batched_tokens or chunk or 8192,
                     block_tokens=eng.block_tokens, replicas=replicas, router=d.router,
                     max_concurrency=load.max_concurrency)


def run(d: Deployment, load: Load, slo: Slo | None = None, trace: tr.Trace | None = None) -> dict:
    """Simulate `load` on `d`: the summary (benchmark_serving keys) and what ran."""
    trace = trace if trace is not None else load.make_trace()
    need = int((trace.prompt_tokens + trace.output_tokens).max())
    sm = replica(d, min(need, 1 << 20))
    sched = scheduler(d, sm, load)
    res = simulate(trace, sm, sched)
    summary = summarize(res.records, slo=slo, kv_cache_utilization=res.kv_cache_utilization,
                        preemptions=res.preemptions)
    return {**describe(d, sm, sched, load, trace, slo), **summary,
            "rejected": res.rejected, "engine_steps": res.steps,
            "max_kv_cache_utilization": res.max_kv_cache_utilization, "_sim": res}


def describe(d: Deployment, sm, sched: Scheduler, load: Load, trace: tr.Trace, slo: Slo | None) -> dict:
    """The configuration that ran, resolved (the engine's defaults filled in)."""
    devices = sm.tp * sm.pp * sched.replicas
    return {"model": d.model, "hardware": d.hardware, "devices": devices, "tp": sm.tp, "pp": sm.pp,
            "replicas": sched.replicas, "precision": sm.precision, "kv_precision": sm.kv_precision,
            "engine": sm.engine.name, "mode": sm.mode, "kv_capacity_tokens": int(sm.kv_capacity_tokens),
            "scheduler": asdict(sched), "request_rate": load.rate_per_s if load.trace is None else None,
            "burstiness": load.burstiness, "max_concurrency": load.max_concurrency,
            "trace": trace.describe(),
            "slo": None if slo is None or not slo.given() else asdict(slo)}
