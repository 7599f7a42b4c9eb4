"""The typer-free front end of one prediction: argparse options, the prediction, its printout.

`llmbench predict train|infer` and `llmbench project` run through here straight from the console
script (llmbench.entry), without importing typer, so one call answers fast; the typer app
(llmbench/perfmodel/cli.py) routes the same commands here too.

    llmbench predict train --model gpt2-xl --hardware a100-40gb --batch 64 --seq 1024 --devices 8
    llmbench predict infer --model llama-3.1-8b --hardware cs3 --batch 1 --prompt-len 128 --gen-len 256
    llmbench project --model gpt3-20b --hardware cs2 --dataset pile --batch 256 --seq 2048
    llmbench calibrate --published
    llmbench validate --json

Imports nothing heavy at import time (numpy and the model load inside the commands); the --json
path never imports rich.
"""
from __future__ import annotations

import argparse

#: option name, type, default: the one place the training defaults live (predict_train's own)
TRAIN_DEFAULTS = (
    ("devices", int, 1), ("precision", str, "bf16"), ("grad_accum", int, 1), ("tp", int, 1), ("pp", int, 1),
    ("recompute", str, "none"), ("sparsity", float, 0.0), ("mode", str, "auto"), ("zero", int, 0),
)
TRAIN_HELP = {
    "tp": "tensor-parallel degree", "pp": "pipeline-parallel degree",
    "devices": "devices (GPUs, wafers, ...) in all", "precision": "fp32|tf32|fp16|bf16|cbf16|fp8",
    "grad_accum": "gradient-accumulation steps (micro-batches per step)",
    "recompute": "activation recomputation: none|selective|full", "sparsity": "unstructured weight sparsity s",
    "mode": "auto|resident|weight_streaming", "zero": "ZeRO stage 0-3",
}


def _emit(obj) -> None:
    from llmbench._cliutil import emit_json

    emit_json(obj)


def _fmt_s(x: float) -> str:
    if x >= 3600:
        return f"{x / 3600:,.2f} h"
    if x >= 1:
        return f"{x:,.3f} s"
    return f"{x * 1e3:,.3f} ms"


def _lines(pairs) -> None:
    w = max(len(k) for k, _ in pairs)
    for k, v in pairs:
        print(f"{k:<{w}}  {v}")


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (cli.main prints 'error: ...', exit 2)."""

    def error(self, message):
        raise ValueError(f"{self.prog}: {message}")


def _parse(parser, args):
    return parser.parse_args(args)


def _train_parser(prog: str):
    """The training options. argparse (stdlib), not typer options: this typer builds a pydantic
    TypeAdapter per option per call (~20 ms each), and one prediction must answer in < 0.3 s."""
    p = _Parser(prog=prog, description="Predict one training configuration (analytical model).")
    p.add_argument("--model", required=True, help="preset name or Hugging Face config.json")
    p.add_argument("--hardware", required=True, help="catalog name, e.g. a100-80gb, cs2")
    p.add_argument("--batch", type=int, required=True, help="global batch (sequences per step)")
    p.add_argument("--seq", type=int, required=True, help="sequence length")
    for name, typ, default in TRAIN_DEFAULTS:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=typ, default=default,
                       help=f"{TRAIN_HELP[name]} (default {default})")
    p.add_argument("--json", action="store_true", help="JSON output")
    return p


def _infer_parser():
    p = _Parser(prog="llmbench predict infer", description="Predict serving one batch (analytical model).")
    p.add_argument("--model", required=True, help="preset name or Hugging Face config.json")
    p.add_argument("--hardware", required=True, help="catalog name")
    p.add_argument("--batch", type=int, default=1, help="concurrent requests (default 1)")
    p.add_argument("--prompt-len", type=int, default=128, help="input tokens per request (default 128)")
    p.add_argument("--gen-len", type=int, default=128, help="generated tokens per request; 0 for encoders (default 128)")
    p.add_argument("--devices", type=int, default=None, help="devices (default: the fewest that hold the model)")
    p.add_argument("--precision", default="bf16", help=TRAIN_HELP["precision"])
    p.add_argument("--mode", default="auto", help="auto|resident|sram_pipeline")
    p.add_argument("--json", action="store_true", help="JSON output")
    return p


def _train_pred(a):
    from llmbench.hardware import get_hardware
    from llmbench.models import get_model
    from llmbench.perfmodel.train import fit_advice, predict_train

    spec, hw = get_model(a.model), get_hardware(a.hardware)
    kw = {name: getattr(a, name) for name, _, _ in TRAIN_DEFAULTS}
    pred = predict_train(spec, hw, batch=a.batch, seq=a.seq, **kw)
    if not pred.fits:
        raise ValueError(fit_advice(spec, hw, pred, **{**kw, "mode": pred.mode}))
    return pred


def _infer(a) -> None:
    from llmbench.hardware import get_hardware
    from llmbench.models import get_model
    from llmbench.perfmodel.infer import predict_infer

    spec, hw = get_model(a.model), get_hardware(a.hardware)
    pred = predict_infer(spec, hw, batch=a.batch, prompt_len=a.prompt_len, gen_len=a.gen_len,
                         devices=a.devices, precision=a.precision, mode=a.mode)
    if not pred.fits:
        raise ValueError(f"{spec.name} with a {pred.kv_cache_bytes / 1e9:,.1f} GB KV cache does not fit "
                         f"on {pred.devices} x {hw.name}; drop --devices to get the fewest that hold it, "
                         "or use a smaller batch")
    if a.json:
        return _emit(pred.to_dict())
    d = pred.to_dict()
    pairs = [("prediction", f"infer {a.model} on {a.hardware}, batch {a.batch}, prompt {a.prompt_len}, gen {a.gen_len}"),
             ("mode", d["mode"]), ("devices", str(d["devices"])), ("TTFT", _fmt_s(d["ttft_s"])),
             ("decode tokens/s per seq", f"{d['decode_tokens_per_s_per_seq']:,.1f}"),
             ("tokens/s (batch)", f"{d['tokens_per_s']:,.1f}"), ("latency", _fmt_s(d["latency_s"])),
             ("bound", d["bound"]), ("KV cache", f"{d['kv_cache_bytes'] / 1e9:,.3f} GB")]
    if d["max_batch_x_context"] is not None:
        pairs.append(("max batch x context", f"{d['max_batch_x_context']:,.0f} tokens"))
    _lines(pairs)


def _project(a) -> None:
    from llmbench.perfmodel.project import get_dataset, project

    ds = get_dataset(a.dataset)
    pred = _train_pred(a)
    out = project(ds, pred, epochs=a.epochs)
    if a.json:
        return _emit(out)
    size = f"{ds.tokens:,.0f} tokens" if ds.tokens else f"{ds.samples:,.0f} samples"
    _lines([("data set", f"{ds.name} ({size}) x {a.epochs:g} epoch(s)"), ("source", ds.source),
            ("throughput", f"{pred.tokens_per_s:,.0f} tokens/s, {pred.samples_per_s:,.1f} samples/s "
                           f"({pred.mode}, bound {pred.bound})"),
            ("time", f"{out['hours']:,.2f} h = {out['days']:,.2f} days ({out['seconds']:,.2f} s)"),
            ("device-hours", f"{out['device_hours']:,.1f}")])


def _print_train(pred, title: str) -> None:
    d = pred.to_dict()
    mfu = "-" if d["mfu"] is None else f"{d['mfu']:.1%}"
    nd = 1 if d["tflops_per_device"] >= 1 else 4
    pairs = [("prediction", title), ("mode", d["mode"]), ("devices", str(d["devices"])),
             ("step time", _fmt_s(d["step_time_s"])), ("tokens/s", f"{d['tokens_per_s']:,.0f}"),
             ("samples/s", f"{d['samples_per_s']:,.2f}"),
             ("TFLOP/s per device", f"{d['tflops_per_device']:,.{nd}f} model, "
                                    f"{d['hw_tflops_per_device']:,.{nd}f} executed"),
             ("MFU", mfu), ("bound", d["bound"]),
             ("memory per device", f"{d['memory_per_device_bytes'] / 1e9:,.2f} GB")]
    pairs += [(f"  {k}", _fmt_s(v)) for k, v in d["breakdown"].items()]
    _lines(pairs)




def predict_train_main(args: list[str]) -> None:
    a = _parse(_train_parser("llmbench predict train"), args)
    pred = _train_pred(a)
    if a.json:
        return _emit(pred.to_dict())
    _print_train(pred, f"train {a.model} on {a.devices} x {a.hardware}, batch {a.batch} x {a.seq}")


def predict_infer_main(args: list[str]) -> None:
    _infer(_parse(_infer_parser(), args))


def project_main(args: list[str]) -> None:
    p = _train_parser("llmbench project")
    p.add_argument("--dataset", required=True, help="pile | owt | sst2 | a number of tokens")
    p.add_argument("--epochs", type=float, default=1.0)
    _project(_parse(p, args))
