"""The prediction of one Workload (llmbench.point): the entry every caller uses.

    from llmbench.point import Workload
    from llmbench.perfmodel.predict import predict
    predict(Workload(model="gpt2-xl", hardware="a100-80gb", devices=8, batch=64, seq_len=1024))

Resolves, once: the hardware (catalog), the ModelSpec (`w.spec()`: preset, resize, head), the
precision (the hardware's when None: point.precision_for). Layout knobs left None are chosen by
the engine (predict_train / predict_infer); the result carries the workload as it runs.
"""
from __future__ import annotations

from llmbench.errors import BadInput
from llmbench.point import Workload, precision_for


def predict(w: Workload, params=None, hw=None, spec=None, runtime: str | None = None):
    """TrainPrediction (suite train/genslm/block) or InferPrediction (suite infer) of `w`; `hw` and
    `spec` (a HardwareSpec, a ModelSpec) stand in for w.hardware and w.model's preset; `runtime`
    names what holds the training state (footprint.STATE; None: the hardware's stack)."""
    from llmbench.hardware import get_hardware

    if not w.hardware and hw is None:
        raise BadInput("a prediction needs --hardware (a catalog name, e.g. a100-80gb)")
    hw = hw or get_hardware(w.hardware)
    w = w.with_(hardware=hw.name, precision=w.precision or precision_for(hw))
    spec = w.spec(spec)
    if w.suite == "infer":
        from llmbench.perfmodel.infer import predict_infer

        return predict_infer(spec, hw, w, params)
    from llmbench.perfmodel.train import predict_train

    if w.suite == "block":  # one layer, forward and backward, in one process
        return one_process(predict_train(spec.with_(n_layers=1, vocab_size=64), hw.one_logical_gpu(), w,
                                          params, runtime=runtime), hw)
    return predict_train(spec, hw, w, params, runtime=runtime)


def one_process(pred, hw):
    """A micro-benchmark is one process, and one process uses one of the GPUs the software shows
    per device (an MI250 is two GCDs, each its own GPU to ROCm: arXiv:2310.04607's 'single MI250'
    block runs on one). Its MFU stays against the whole device's peak, the peak its name carries."""
    from dataclasses import replace

    n = hw.logical_gpus
    return pred if n == 1 or pred.mfu is None else replace(pred, mfu=pred.mfu / n)


def predict_or_unfit(w: Workload, params=None, hw=None):
    """(prediction, None), or, for a training workload on which no layout fits, (the prediction
    of its plain layout with fits False, the planner's one-line refusal): what a sweep records as
    `oom` and a figure draws hollow. Any other bad input still raises."""
    try:
        return predict(w, params, hw), None
    except BadInput as refusal:
        if w.suite == "infer":
            raise
        from llmbench.hardware import get_hardware
        from llmbench.perfmodel.train import plain_layout

        hw = hw or get_hardware(w.hardware)
        try:
            plain = plain_layout(w.with_(hardware=hw.name, precision=w.precision or precision_for(hw),
                                         devices=w.devices or 1), hw)
            pred = predict(plain, params, hw)
        except BadInput:
            raise refusal from None
        if pred.fits:  # the refusal was about something else than memory
            raise refusal from None
        return pred, " ".join(str(refusal).split())
