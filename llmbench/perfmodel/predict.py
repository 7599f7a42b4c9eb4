"""The prediction of one Workload (llmbench.point): the entry every caller uses.

    from llmbench.point import Workload
    from llmbench.perfmodel.predict import predict
    predict(Workload(model="gpt2-xl", hardware="a100-80gb", devices=8, batch=64, seq_len=1024))

Layout knobs left None take the model's plain defaults here (tp = pp = 1, no ZeRO, no recompute,
the hardware's mode); the precision left None is the hardware's (point.precision_for).
"""
from __future__ import annotations

from llmbench.point import Workload, precision_for


def resolve(w: Workload, hw) -> Workload:
    """The workload with its precision, devices and layout filled in as the model runs it."""
    lay = w.layout
    w = w.with_(precision=w.precision or precision_for(hw), tp=lay.tp or 1, pp=lay.pp or 1,
                zero=lay.zero or 0, recompute=lay.recompute or "none")
    if w.suite != "infer" and w.devices is None:
        w = w.with_(devices=1)
    return w


def train_args(w: Workload) -> dict:
    """Keyword arguments of predict_train for a resolved training workload."""
    _, grad_accum = w.micro_steps()
    lay = w.layout
    return dict(batch=w.batch, seq=w.seq_len, devices=w.devices, precision=w.precision,
                grad_accum=grad_accum, tp=lay.tp, pp=lay.pp, recompute=lay.recompute,
                sparsity=w.sparsity, mode=lay.mode or "auto", zero=lay.zero)


def predict(w: Workload, params=None, hw=None):
    """TrainPrediction (suite train/genslm/block) or InferPrediction (suite infer) of `w`."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.infer import predict_infer
    from llmbench.perfmodel.train import predict_train

    if not w.hardware and hw is None:
        raise ValueError("a prediction needs --hardware (a catalog name, e.g. a100-80gb)")
    hw = hw or get_hardware(w.hardware)
    w = resolve(w, hw)
    spec = w.spec()
    if w.suite == "infer":
        return predict_infer(spec, hw, batch=w.batch, prompt_len=w.seq_len, gen_len=w.gen_len,
                             devices=w.devices, precision=w.precision, mode=w.layout.mode or "auto",
                             params=params)
    if w.suite == "block":
        spec = spec.with_(n_layers=1, vocab_size=64)
    return predict_train(spec, hw, params=params, **train_args(w))
