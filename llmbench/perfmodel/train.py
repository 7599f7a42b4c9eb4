"""Training prediction of one Workload, and the vectorised sweep of many.

    from llmbench.point import Workload
    from llmbench.perfmodel.train import predict_train, sweep_train
    w = Workload(model="gpt2-xl", hardware="a100-40gb", devices=8, batch=64, seq_len=1024)
    predict_train(w.spec(), get_hardware("a100-40gb"), w)           # TrainPrediction
    sweep_train(spec, hw, w, batch=np.array([64, 128]), tp=np.array([1, 2]))

The equations are in step.py (one vectorised core: a single prediction runs it on Python floats, a
sweep on numpy arrays); memory placement in memory.py; layout knobs left None are chosen by the
planner (plan.py). docs/predict.md gives every equation and its source.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llmbench.errors import BadInput
from llmbench.point import Workload

from llmbench._xp import Scalar, backend_for
from llmbench.grid import grid_of
from .params import resolve_params
from .step import step_arrays, sweep_metrics

#: the breakdown a prediction reports, in seconds per step (keys of `breakdown_s`)
BREAKDOWN = ("compute", "memory", "network", "stream", "optimizer", "exposed")


@dataclass(frozen=True, kw_only=True)
class TrainPrediction:
    """One training step predicted: the workload as it runs (layout chosen) and its metrics,
    every name in llmbench.point.METRICS. to_dict() = {"workload": {...}, **metrics}."""

    workload: Workload
    """resolved: precision, devices, micro_batch / grad_accum and every layout knob set"""
    step_time_s: float
    tokens_per_s: float
    samples_per_s: float
    achieved_tflops: float
    """model FLOPs (fwd + bwd, no recompute) per second per device, in TFLOP/s"""
    executed_tflops: float
    """FLOPs executed (with recompute) per second per device"""
    mfu: float | None
    bound: str
    mode: str
    fits: bool
    peak_mem_bytes: float
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    tier_bytes: dict = field(default_factory=dict)
    """bytes per device on each memory tier (memory.hierarchy; a shared store: its whole content)"""
    energy_j_per_token: float | None = None
    """power_w x devices / tokens_per_s (None: no power in the catalog)"""
    cost_usd_per_token: float | None = None
    """price_per_device_hour_usd x devices / 3600 / tokens_per_s (None: no price in the catalog)"""
    breakdown_s: dict = field(default_factory=dict)
    """seconds per term: compute, memory, network, stream, optimizer, exposed"""

    @property
    def devices(self) -> int:
        return self.workload.devices

    def metrics(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "workload"}

    def to_dict(self) -> dict:
        return {"workload": self.workload.to_dict(), **self.metrics()}


def check_layout(spec, hw, w: Workload) -> None:
    """A resolved training workload the model can run; BadInput (one line) otherwise."""
    lay = w.layout
    tp, pp, n = lay.tp, lay.pp, w.devices
    if w.seq_len > spec.max_seq_len and spec.position == "learned":
        raise BadInput(f"seq {w.seq_len} exceeds {spec.name}'s {spec.max_seq_len} learned positions")
    if n % (tp * pp):
        raise BadInput(f"devices ({n}) must be a multiple of tp x pp ({tp * pp})")
    from .plan import check_pp, check_tp_heads

    check_tp_heads(spec, tp)
    check_ep(spec, w)
    check_pp(spec, pp)
    if lay.mode == "weight_streaming" and (tp > 1 or pp > 1):
        raise BadInput("weight_streaming runs data parallel only; use --tp 1 --pp 1")
    from .memory import check_devices

    check_devices(hw, n, lay)
    w.micro_steps(n // (tp * pp))


def check_ep(spec, w: Workload) -> None:
    """BadInput unless ep divides the routed experts and the dp replicas (dense models: ep 1)."""
    ep, lay = w.layout.ep or 1, w.layout
    if ep == 1:
        return
    if not spec.is_moe:
        raise BadInput(f"--ep {ep}: {spec.name} has no routed experts (expert parallelism needs a MoE model)")
    dp = w.devices // (lay.tp * lay.pp)
    if spec.n_experts % ep or dp % ep:
        raise BadInput(f"ep {ep} must divide {spec.name}'s {spec.n_experts} experts and the {dp} "
                       "data-parallel replicas (expert parallelism runs inside data parallelism)")
    if lay.mode == "weight_streaming":
        raise BadInput("weight_streaming runs data parallel only; use --ep 1")


def plain_layout(w: Workload, hw) -> Workload:
    """Layout knobs left None at their plain defaults: tp = pp = 1, no ZeRO, no recompute, the
    hardware's mode; micro-batch 1 under pipelining (Megatron), else the whole per-replica batch."""
    lay = w.layout
    mode = lay.mode or ("weight_streaming" if lay.offload == "weights" else hw.default_mode_train)
    mode = "resident" if mode == "sram_pipeline" else mode
    offload = "weights" if mode == "weight_streaming" else lay.offload or "none"
    if offload == "weights" and mode != "weight_streaming":
        raise BadInput("--offload weights is weight streaming: use --mode weight_streaming (or leave --mode out)")
    w = w.with_(tp=lay.tp or 1, pp=lay.pp or 1, zero=lay.zero or 0, recompute=lay.recompute or "none",
                offload=offload, mode=mode)
    dp = w.devices // (w.layout.tp * w.layout.pp) or 1
    if w.micro_batch is None and w.grad_accum is None and w.layout.pp > 1:
        w = w.with_(micro_batch=1)
    mb, ga = w.micro_steps(dp)
    return w.with_(micro_batch=mb, grad_accum=ga)


def predict_train(spec, hw, w: Workload, params=None, runtime: str | None = None) -> TrainPrediction:
    """One training step of `w` (global batch) on its devices. Layout knobs left None are chosen
    by the planner (plan.py: the fastest layout that fits; BadInput when none does); a workload
    whose knobs are all given is predicted as is (`fits` says whether it fits), on Python floats."""
    w = _defaults(w, hw)
    p = params if params is not None else resolve_params(hw)
    if open_knobs(w, spec):
        from .plan import plan

        w = plan(spec, hw, w, p, runtime=runtime).best()
    else:
        w = plain_layout(w, hw)
    check_layout(spec, hw, w)
    r = step_arrays(spec, hw, w.precision, grid_of(w), p, Scalar, runtime)
    return prediction(w, r, hw)


def open_knobs(w: Workload, spec=None) -> list[str]:
    """The layout knobs of `w` left to the planner (ep only for a MoE `spec`: dense models run ep 1)."""
    out = [k for k, v in w.layout.to_dict().items() if v is None and k != "ep"]
    if w.layout.ep is None and spec is not None and spec.is_moe:
        out.append("ep")
    if w.micro_batch is None and w.grad_accum is None:
        out.append("micro_batch")
    return out


def _defaults(w: Workload, hw) -> Workload:
    from llmbench.point import precision_for

    return w.with_(precision=w.precision or precision_for(hw), devices=w.devices or 1)


def as_run(w: Workload, hw) -> Workload:
    """The workload as a plain runtime runs it, no planner: precision the hardware's, one device,
    and the plain layout (plain_layout). What measured rows mean when they leave a knob out."""
    return plain_layout(_defaults(w, hw), hw)


def prediction(w: Workload, r, hw) -> TrainPrediction:
    """The TrainPrediction of one configuration of step_arrays' output (floats)."""
    st, mem, n = r.step, r.memory, w.devices
    step = float(st.step_time_s)
    tps = w.batch * w.seq_len / step
    price = getattr(hw, "price_per_device_hour_usd", None)
    terms = {"compute": float(r.compute_s), "memory": float(r.memory_s),
             "network": float(st.network_exposed_s), "stream": float(st.stream_exposed_s)}
    return TrainPrediction(
        workload=w, step_time_s=step, tokens_per_s=tps,
        samples_per_s=w.batch / step, achieved_tflops=float(r.model_flops) / step / n / 1e12,
        executed_tflops=float(r.hw_flops) / step / n / 1e12,
        mfu=float(r.model_flops) / step / n / r.peak_flops, bound=max(terms, key=terms.get),
        mode=w.layout.mode, fits=bool(mem.fits), peak_mem_bytes=float(mem.peak_mem_bytes),
        weights_bytes=float(mem.weights_bytes), grads_bytes=float(mem.grads_bytes),
        optimizer_bytes=float(mem.optimizer_bytes), activations_bytes=float(mem.activations_bytes),
        tier_bytes=mem.tier_bytes(), energy_j_per_token=hw.power_w * n / tps if hw.power_w else None,
        cost_usd_per_token=price * n / 3600.0 / tps if price else None,
        breakdown_s={"compute": terms["compute"], "memory": terms["memory"], "network": float(st.network_s),
                     "stream": float(st.stream_s), "optimizer": float(st.optimizer_s),
                     "exposed": float(st.exposed_s)})


def sweep_train(spec, hw, w: Workload, params=None, **arrays) -> dict:
    """Vectorised predict_train: `w` is the base (its layout resolved as predict_train does) and
    keyword arrays replace the fields that vary (Workload names: batch, seq_len, devices, tp, pp,
    micro_batch, sparsity, zero, and recompute / offload as grid codes). No per-point checks.
    Returns a dict of arrays: METRICS names, the breakdown terms, micro_batches, fits."""
    w = plain_layout(_defaults(w, hw), hw)
    p = params if params is not None else resolve_params(hw)
    xp = backend_for(*arrays.values())
    r = step_arrays(spec, hw, w.precision, grid_of(w, **arrays), p, xp)
    return sweep_metrics(r, xp)


# ---------------------------------------------------------------- weight streaming

def streaming_crossover_tokens(spec, hw, precision="bf16", seq=None, params=None) -> float:
    """Tokens per step above which weight streaming stops being exposed: the step's compute
    (fwd + bwd) equals the time to stream the weights in twice and the gradients out once.

    Searched over fractional batches of `seq`-token sequences (default min(max_seq_len, 1024)), so
    the answer may be below one sequence on slow compute (a CPU): then streaming is always hidden.
    """
    import numpy as np

    T = int(seq or min(spec.max_seq_len, 1024))
    batches = np.logspace(-4, 6, 2000)
    w = Workload(model=spec.name, hardware=hw.name, precision=precision, seq_len=T,
                 layout={"mode": "weight_streaming"})
    r = sweep_train(spec, hw, w, params, batch=batches, micro_batch=batches)
    over = r["stream_exposed"] - r["stream"] / spec.n_layers  # exposed beyond pipeline fill
    hidden = np.nonzero(over <= 0)[0]
    if not len(hidden):
        return float("inf")
    i = hidden[0]
    if i == 0:
        return float(batches[0] * T)
    # linear interpolation of the exposed part between the last exposed and first hidden batch
    x0, x1, y0, y1 = batches[i - 1], batches[i], over[i - 1], over[i]
    return float((x0 + (x1 - x0) * y0 / (y0 - y1)) * T)


def streaming_ratio(spec, hw, *, batch, seq, precision="bf16", params=None) -> float:
    """Predicted step time streamed / resident on one device: what a streaming runtime measures
    side by side (1.0 = streaming fully hidden; it can dip below 1 because the streamed optimizer
    update overlaps the next forward while the resident one does not)."""
    w = Workload(model=spec.name, hardware=hw.name, precision=precision, seq_len=seq)
    t = {}
    for mode in ("weight_streaming", "resident"):
        r = sweep_train(spec, hw, w.with_(mode=mode), params, batch=batch, micro_batch=batch)
        t[mode] = r["step_time_s"]
    return t["weight_streaming"] / t["resident"]


def plan_report(w: Workload, objective: str = "time", top: int = 10, params=None, hw=None,
                spec=None) -> dict:
    """`llmbench plan`: the `top` layouts of a training workload by `objective`, each predicted as
    predict_train would (TrainPrediction). time: on w.devices; devices / energy / cost: on any
    count up to w.devices. BadInput (one line) when nothing fits. `hw` and `spec` (a HardwareSpec,
    a ModelSpec) stand in for w.hardware and w.model's preset."""
    from llmbench.hardware import get_hardware
    from llmbench.point import precision_for

    from .memory import check_devices, hierarchy
    from .params import resolve_params
    from .plan import device_counts, refusal, search

    hw = hw or get_hardware(w.hardware)
    w = w.with_(hardware=hw.name, precision=w.precision or precision_for(hw), devices=w.devices or 1)
    spec = w.spec(spec)
    check_devices(hw, w.devices, w.layout)
    p = params if params is not None else resolve_params(hw)
    counts = [w.devices] if objective == "time" else device_counts(hw, w.devices)
    res = search(spec, hw, w, p, objective, counts)
    if not len(res.order):
        raise BadInput(refusal(spec, hw, w, p, res.searched))
    rows = []
    for i in res.order[:top]:
        best = res.workload_at(int(i))
        check_layout(spec, hw, best)
        rows.append(predict_train(spec, hw, best, p))
    h = hierarchy(hw)
    return {"workload": w.to_dict(), "objective": objective, "note": res.note, "searched": res.searched,
            "fitting": int(len(res.order)), "memory_rule": f"{h.rule[0]} ({h.rule[1]})", "layouts": rows}
