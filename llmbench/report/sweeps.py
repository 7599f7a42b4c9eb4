"""What `llmbench reproduce` predicts: every seed study, for every catalog accelerator.

Each study is a list of `Pred` (one perfmodel call); `run_predictions(db)` evaluates them and
records each as a source="predicted" result, with the equivalent `llmbench predict ...` command in
its environment so the report can caption each plot with the command behind its data.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

# the accelerators of the seed studies (llmbench/hardware/catalog); `cpu` is this machine
CATALOG = ("a100-40gb", "a100-80gb", "h100-sxm", "h200-sxm", "mi250", "gaudi2", "sn30", "bow-ipu",
           "cs2", "cs3")
BLOCK_BATCHES = (8, 16, 32, 64)
SCALING_DEVICES = (1, 2, 4, 8, 16, 32, 64)
SEQ_LENS = (128, 256, 512, 1024)  # GPT-2 XL has 1024 learned positions
GAS_STEPS = (1, 2, 4, 8)
SPARSITY_MODELS = ("gpt2-xl", "gpt3-1.3b", "gpt3-6.7b", "gpt3-13b", "gpt3-30b")
SPARSITIES = (0.0, 0.5, 0.9)
GENSLM_MODELS = ("genslm-25m", "genslm-250m", "genslm-2.5b", "genslm-13b", "genslm-25b")
BERT_TRAIN_BATCHES = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
BERT_INFER_BATCHES = (1, 4, 16, 64, 256, 1024)
LLAMA_INFER = ("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b")
LLAMA_INFER_HW = ("cs3", "cs2", "h100-sxm", "h200-sxm", "a100-80gb")


@dataclass(frozen=True, kw_only=True)
class Pred:
    """One prediction: a perfmodel call and the study it belongs to."""
    study: str
    kind: str
    """train | infer | block | project"""
    model: str
    hardware: str
    args: dict = field(default_factory=dict)
    """keyword arguments of predict_train / predict_infer (batch is global)"""
    mirrors_measured: bool = False
    """the prediction of a measured point, on the hardware it was measured on"""

    def point(self) -> dict:
        a = dict(self.args)
        if "seq" not in a and "prompt_len" in a:
            a["seq"] = a["prompt_len"]
        extra = {"mirrors": "measured"} if self.mirrors_measured else {}
        return {"suite": self.kind, "model": self.model, "hardware": self.hardware, **a, **extra}

    def command(self) -> str:
        opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.args.items()
                        if k not in ("dataset", "tokens", "resize"))
        if self.args.get("resize"):
            opts += " (model resized: " + ", ".join(f"{k}={v}" for k, v in self.args["resize"].items()) + ")"
        if self.kind == "block":
            return (f"llmbench predict train --model {self.model.removesuffix('-block')} --hardware "
                    f"{self.hardware} {opts} (one layer: n_layers=1)")
        if self.kind == "project":
            return (f"llmbench project --model {self.model} --hardware {self.hardware} "
                    f"--dataset {self.args.get('dataset')} {opts}")
        return f"llmbench predict {self.kind} --model {self.model} --hardware {self.hardware} {opts}"


def precision_for(hw) -> str:
    """bf16 where the datasheet gives a bf16 rate, else fp16 (Bow IPU)."""
    return "bf16" if hw.peak("bf16") else "fp16"


def plan(hardware: tuple[str, ...] = CATALOG) -> list[Pred]:
    """Every prediction of the seed studies for `hardware` (names not in the catalog are skipped)."""
    from llmbench.hardware import catalog

    cat = catalog()
    hws = [cat[h] for h in hardware if h in cat]
    out: list[Pred] = []
    for hw in hws:
        p, h = precision_for(hw), hw.name
        for prec in ("fp32", "fp16", "bf16"):
            if hw.peak(prec):
                out += [Pred(study="transformer-block", kind="block", model="gpt2-xl-block", hardware=h,
                             args=dict(batch=b, seq=1024, precision=prec)) for b in BLOCK_BATCHES]
        out += [Pred(study="gpt2xl-scaling", kind="train", model="gpt2-xl", hardware=h,
                     args=dict(batch=16 * n, seq=1024, devices=n, precision=p)) for n in SCALING_DEVICES]
        out += [Pred(study="gpt2-seq-length", kind="train", model="gpt2-xl", hardware=h,
                     args=dict(batch=max(1, 16 * 1024 // s), seq=s, precision=p)) for s in SEQ_LENS]
        out += [Pred(study="gas", kind="train", model="gpt2-xl", hardware=h,
                     args=dict(batch=8 * g, seq=1024, devices=8, grad_accum=g, precision=p))
                for g in GAS_STEPS]
        out += [Pred(study="sparsity", kind="train", model=m, hardware=h,
                     args=dict(batch=112, seq=1024 if m == "gpt2-xl" else 2048, precision=p, sparsity=s))
                for m in SPARSITY_MODELS for s in SPARSITIES]
        out += [Pred(study="genslm", kind="train", model=m, hardware=h,
                     args=dict(batch=32, seq=1024, devices=n, precision=p))
                for m in GENSLM_MODELS for n in (1, 8)]
        out += [Pred(study="bert-train-batch", kind="train", model=m, hardware=h,
                     args=dict(batch=b, seq=128, precision=p))
                for m in ("bert-base", "bert-large") for b in BERT_TRAIN_BATCHES]
        out += [Pred(study="bert-infer-batch", kind="infer", model="bert-base", hardware=h,
                     args=dict(batch=b, prompt_len=128, gen_len=0, precision=p)) for b in BERT_INFER_BATCHES]
        out += [Pred(study="time-to-train", kind="project", model="gpt3-20b", hardware=h,
                     args=dict(dataset="pile", batch=256, seq=2048, devices=1, precision=p)),
                Pred(study="time-to-train", kind="project", model="bert-large", hardware=h,
                     args=dict(dataset="sst2", batch=8192, seq=128, devices=1, precision=p))]
        if h in LLAMA_INFER_HW:
            out += [Pred(study="llm-inference", kind="infer", model=m, hardware=h,
                         args=dict(batch=1, prompt_len=2048, gen_len=256, precision=p)) for m in LLAMA_INFER]
    out += _published_configs(cat)
    return out


def _published_configs(cat) -> list[Pred]:
    """The exact configurations of the published comparisons (GAS ratios of Fig. 6, Table IV)."""
    out = []
    for h, devices, micro in (("a100-40gb", 64, 1), ("mi250", 4, 16)):
        if h in cat:
            out += [Pred(study="gas", kind="train", model="gpt2-xl", hardware=h,
                         args=dict(batch=micro * devices * g, seq=1024, devices=devices, grad_accum=g,
                                   precision=precision_for(cat[h]))) for g in (1, 4)]
    return out


# ---------------------------------------------------------------- evaluation

def spec_of(model: str, resize: dict | None = None, *, block: bool = False):
    """The ModelSpec of a point: the preset, resized as the point says (quick studies shrink models);
    a block is one transformer layer (a tiny vocabulary makes embeddings and head negligible)."""
    from llmbench.models import get_model
    from llmbench.models.spec import resize as resized

    block = block or model.endswith("-block")
    spec = get_model(model.removesuffix("-block"))
    if resize:
        spec = resized(spec, **resize)
    return spec.with_(n_layers=1, vocab_size=64) if block else spec


def evaluate(pred: Pred) -> dict:
    """Run one prediction; returns its metrics (the prediction's to_dict())."""
    from llmbench import perfmodel
    from llmbench.hardware import get_hardware

    a = dict(pred.args)
    spec = spec_of(pred.model, a.pop("resize", None), block=pred.kind == "block")
    hw = get_hardware(pred.hardware)
    if pred.kind in ("train", "block"):
        return _as_dict(perfmodel.predict_train(spec, hw, **a))
    if pred.kind == "infer":
        return _as_dict(perfmodel.predict_infer(spec, hw, **a))
    if pred.kind == "project":
        return project(spec, hw, **a)
    raise ValueError(f"unknown prediction kind {pred.kind!r}")


def project(spec, hw, *, dataset: str, **train_args) -> dict:
    """Time for one epoch of `dataset` at the predicted training throughput (llmbench project)."""
    from llmbench.perfmodel import predict_train
    from llmbench.perfmodel.project import get_dataset, project as _project

    out = _project(get_dataset(dataset), predict_train(spec, hw, **train_args))
    out["epoch_time_s"] = out["seconds"]
    pred = out.pop("prediction", {})
    out.update(fits=pred.get("fits"), bound=pred.get("bound"), mode=pred.get("mode"))
    return out


def _as_dict(obj) -> dict:
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in dict(obj).items()}


def run_predictions(db, preds: list[Pred], *, log=print) -> dict:
    """Evaluate and record every prediction; failures are recorded as status=error, never raised."""
    from llmbench import __version__

    t0, n_ok, errors = time.perf_counter(), 0, {}
    for p in preds:
        env = {"command": p.command(), "tool": f"llmbench {__version__} perfmodel"}
        try:
            metrics = evaluate(p)
            db.record(p.point(), source="predicted", metrics=metrics, environment=env, study=p.study)
            n_ok += 1
        except Exception as e:  # noqa: BLE001 - a prediction that fails is a result, not a crash
            msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            errors[p.study] = errors.get(p.study, 0) + 1
            db.record(p.point(), source="predicted", status="error", error=msg, environment=env,
                      study=p.study)
    dt = time.perf_counter() - t0
    log(f"predicted {n_ok}/{len(preds)} points in {dt:.1f} s" +
        (f" (errors: {errors})" if errors else ""))
    return {"n": len(preds), "ok": n_ok, "errors": errors, "seconds": dt}
