"""The Python API: what `llmbench predict | plan | measure` do, for a notebook or a script (docs/api.md).

    import llmbench as lb
    p = lb.predict_train(model="gpt2-xl", hardware="h100-sxm", batch=64, seq=1024, devices=8)
    p.step_time_s, p.mfu, p.workload.layout, p.to_dict()
    lb.plan(model="llama-2-13b", hardware="a100-80gb", devices=64, batch=1024, seq=4096).best
    lb.predict_infer(model="llama-3.1-8b", hardware="h100-sxm", batch=8, seq=1024, gen_len=256)
    lb.measure_train(model="gpt2-small", batch=4, seq=64, n_layers=2, steps=2, device="cpu")
    lb.results.open("runs.db").to_dataframe()

Each function builds the same `Workload` (llmbench/point.py) the CLI builds and calls the same
engine function (perfmodel.predict.predict, perfmodel.train.plan_report, measure.suites.run_workload);
each returns a frozen dataclass with `.to_dict()`, the JSON the CLI's --json prints. Options are
the Workload's fields under their CLI names (`seq` for seq_len, layout knobs flat: tp=2, zero=1);
their defaults are the Workload's. `model` is a preset name, a config.json path or a ModelSpec;
`hardware` a catalog name, a TOML path or a HardwareSpec. Bad input raises
llmbench.errors.BadInput (a ValueError) with one line naming the option.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from llmbench.errors import BadInput
from llmbench.point import LAYOUT_FIELDS, WORKLOAD_FIELDS, Workload

#: option spellings of the CLI -> Workload field
ALIASES = {"seq": "seq_len", "prompt_len": "seq_len"}


def _names(model, hardware) -> tuple[dict, object, object]:
    """(Workload name fields, ModelSpec or None, HardwareSpec or None) of what the user passed."""
    from llmbench.hardware import HardwareSpec
    from llmbench.models import ModelSpec

    spec = model if isinstance(model, ModelSpec) else None
    hw = hardware if isinstance(hardware, HardwareSpec) else None
    for name, v, typ in (("model", model, ModelSpec), ("hardware", hardware, HardwareSpec)):
        if v is not None and not isinstance(v, (str, typ)):
            raise BadInput(f"{name} must be a name, a file path or a {typ.__name__}, got {type(v).__name__}")
    return {"model": spec.name if spec else model, "hardware": hw.name if hw else hardware}, spec, hw


def workload(model, hardware=None, *, suite: str = "train", allowed=WORKLOAD_FIELDS,
             required=(), where: str = "workload", **options) -> tuple[Workload, object, object]:
    """(Workload, ModelSpec or None, HardwareSpec or None) from API options: CLI spellings
    (ALIASES), layout knobs flat, only `allowed` fields, the `required` ones present."""
    opts = {ALIASES.get(k, k): v for k, v in options.items()}
    if len(opts) < len(options):
        raise BadInput(f"{where}: give seq (seq_len) once")
    unknown = sorted(set(opts) - set(allowed) - {"model", "hardware"})
    if unknown:
        ok = ", ".join("seq" if k == "seq_len" else k for k in allowed if k not in ("model", "hardware"))
        raise BadInput(f"{where}: unknown option {', '.join(unknown)}; one of {ok}")
    missing = [k for k in required if {**opts, "hardware": hardware}.get(k) is None]
    if missing:
        raise BadInput(f"{where} needs {', '.join('seq' if k == 'seq_len' else k for k in missing)}")
    names, spec, hw = _names(model, hardware)
    lay = {k: opts.pop(k) for k in list(opts) if k in LAYOUT_FIELDS}
    return Workload(suite=suite, **names, **opts, layout=lay), spec, hw


def predict_train(model, hardware, **options):
    """One training step predicted (perfmodel.TrainPrediction): step time, tokens/s, MFU, bound,
    memory per device and the layout (knobs left out are chosen by the planner). Needs batch
    (global) and seq; any of devices, precision, micro_batch, grad_accum, sparsity, tp, pp, zero,
    recompute, offload, mode. A layout given whole that does not fit returns fits=False."""
    from llmbench.perfmodel.cli import TRAIN_FIELDS
    from llmbench.perfmodel.predict import predict

    w, spec, hw = workload(model, hardware, allowed=TRAIN_FIELDS, required=("hardware", "batch", "seq_len"),
                           where="predict_train", **options)
    return predict(w, hw=hw, spec=spec)


def predict_infer(model, hardware, **options):
    """A served batch predicted (perfmodel.InferPrediction): TTFT, decode tokens/s, latency, KV
    cache, devices (the fewest that hold the model when devices is left out). Needs seq (prompt
    tokens) and gen_len; any of batch (concurrent requests), devices, precision, tp, pp, mode."""
    from llmbench.perfmodel.cli import INFER_FIELDS
    from llmbench.perfmodel.predict import predict

    w, spec, hw = workload(model, hardware, suite="infer", allowed=INFER_FIELDS,
                           required=("hardware", "seq_len", "gen_len"), where="predict_infer", **options)
    return predict(w, hw=hw, spec=spec)


@dataclass(frozen=True, kw_only=True)
class PlanResult:
    """`llmbench plan` as a value: the top layouts of a training workload, best first."""

    workload: Workload
    """as given, precision and devices resolved"""
    objective: str
    """time | devices | energy | cost"""
    searched: int
    """layouts the planner searched"""
    fitting: int
    """of which fit the devices' memory"""
    layouts: tuple = ()
    """TrainPrediction per layout shown, best first"""
    memory_rule: str = ""
    note: str = ""
    """why the ranking is not the objective asked (energy / cost unknown for this hardware)"""

    @property
    def best(self):
        """The TrainPrediction of the best layout."""
        return self.layouts[0]

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**d, "workload": self.workload.to_dict(), "layouts": [p.to_dict() for p in self.layouts]}


def plan(model, hardware, *, objective: str = "time", top: int = 10, **options) -> PlanResult:
    """The `top` layouts (tp, pp, ZeRO, recompute, micro-batch, offload, mode) of a training
    workload that fit, ranked by `objective` (time | devices | energy | cost); knobs given
    constrain the search. Needs devices, batch and seq."""
    from llmbench.perfmodel.cli import TRAIN_FIELDS
    from llmbench.perfmodel.plan import OBJECTIVES
    from llmbench.perfmodel.train import plan_report

    if objective not in OBJECTIVES:
        raise BadInput(f"plan: objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise BadInput(f"plan: top must be a positive integer, got {top!r}")
    w, spec, hw = workload(model, hardware, allowed=TRAIN_FIELDS, where="plan",
                           required=("hardware", "devices", "batch", "seq_len"), **options)
    r = plan_report(w, objective, top, hw=hw, spec=spec)
    return PlanResult(**{**r, "workload": Workload.from_dict(r["workload"]), "layouts": tuple(r["layouts"])})


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One measurement (measure.suites.run_workload) as a value: the workload as it ran."""

    workload: Workload
    """resolved: hardware, precision, devices, micro-batch / grad-accum, layout"""
    status: str
    """ok | oom | error: out of memory and other failures are results, not exceptions"""
    metrics: dict = field(default_factory=dict)
    """METRICS names (llmbench.point): tokens_per_s, step_time_s, achieved_tflops, mfu, ..."""
    info: dict = field(default_factory=dict)
    error: str | None = None
    environment: dict = field(default_factory=dict)
    key: str | None = None
    """the results-DB key, when recorded (db=...)"""

    def to_dict(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "workload": self.workload.to_dict()}


def _measure(model, suite: str, *, db=None, n_layers: int | None = None, **options) -> Measurement:
    """Measure one workload here (PyTorch; torch must be installed). Options: the Workload's
    fields (batch is global, seq, micro_batch, precision, hardware, tp, zero, recompute, ...) and
    measure.options.RunOptions' (device, steps, warmup_steps, repeats, data, seed, ...); n_layers
    shrinks the preset (recorded as resize); db: record the result there (None: nothing recorded)."""
    from llmbench.layouts import check_layout_knobs
    from llmbench.measure.options import RunOptions
    from llmbench.models import get_model

    run_fields = [f.name for f in fields(RunOptions)]
    run = RunOptions(**{k: options.pop(k) for k in list(options) if k in run_fields})
    if n_layers is not None:
        options["resize"] = {**options.get("resize", {}), "n_layers": n_layers}
    allowed = tuple(f for f in WORKLOAD_FIELDS if f not in ("suite", "layout")) + LAYOUT_FIELDS
    w, spec, _ = workload(model, options.pop("hardware", None), suite=suite, allowed=allowed,
                          where=f"measure_{suite}", **options)
    if spec is not None:
        raise BadInput(f"measure_{suite}: model must be a preset name or a config.json path, not a ModelSpec")
    # the layout and the model's config are checked before torch is imported (issue 23: ep=2 and a
    # config.json with 0 heads are refused at once, not after seconds of import)
    check_layout_knobs(f"measure.{suite}", {k: v for k, v in w.layout.to_dict().items() if v is not None})
    get_model(w.model)
    from llmbench.measure.suites import run_workload  # torch, only now

    w, res = run_workload(w, run)
    key = _record(w, res, db) if db is not None else None
    return Measurement(workload=w, status=res["status"], metrics=res["metrics"], info=res["info"],
                       error=res["error"], environment=res["environment"], key=key)


def _record(w: Workload, res: dict, db) -> str:
    from llmbench.measure.cli import record

    return record(w, res, str(db))


def measure_train(model, **options) -> Measurement:
    """A few optimizer steps measured here: tokens/s, step time, TFLOP/s, MFU, peak memory, loss,
    e.g. measure_train(model="gpt2-small", batch=4, seq=64, n_layers=2, steps=2, device="cpu").
    Options: see _measure (Workload and RunOptions fields, n_layers, db)."""
    return _measure(model, "train", **options)


def measure_infer(model, **options) -> Measurement:
    """Inference measured here: prefill / TTFT and decode tokens/s (decoders), latency (encoders)."""
    return _measure(model, "infer", **options)


def measure_block(model, **options) -> Measurement:
    """One transformer layer, forward and forward + backward, measured here."""
    return _measure(model, "block", **options)


__all__ = ["Measurement", "PlanResult", "measure_block", "measure_infer", "measure_train", "plan",
           "predict_infer", "predict_train", "workload"]
