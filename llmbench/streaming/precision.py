"""Mixed-precision policy of the streaming runtime, and dynamic loss scaling (no torch).

    from llmbench.streaming.precision import LossScale
    ls = LossScale(scale=2.0 ** 16)
    ls = ls.after(found_inf=True)        # 32768.0, the step was skipped

The policy (as Micikevicius et al. 2018, arXiv:1710.03740, and Megatron-LM's fp32 main params):
fp32 master weights and fp32 Adam moments in the store; the device receives a bf16/fp16 copy of
each layer (half the link bytes of fp32) and computes in it; the gradient of that copy reaches the
store in fp32 (upcast before any data-parallel reduction, so the sum is an fp32 sum) and AdamW runs
in fp32 on the masters. fp16 needs loss scaling (its exponent range is 5 bits: small gradients
flush to zero); bf16 has fp32's exponent range and needs none.

`LossScale` is `torch.amp.GradScaler`'s dynamic rule, value for value: the loss is multiplied by
`scale` before the backward; the store multiplies each gradient by the fp32 `inv_scale`; if any
gradient of the step is inf/NaN the step is skipped (no weight, moment or Adam step count changes)
and the scale halves; after `growth_interval` good steps in a row it doubles. GradScaler's defaults:
init 2^16, growth 2.0, backoff 0.5, interval 2000 (torch/amp/grad_scaler.py).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, replace

#: bytes per element of each precision's device copy
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def needs_loss_scale(precision: str) -> bool:
    return precision == "fp16"


def _f32(x: float) -> float:
    """x rounded to float32, as GradScaler keeps its scale in an fp32 tensor."""
    return struct.unpack("f", struct.pack("f", x))[0]


@dataclass(frozen=True, kw_only=True)
class LossScale:
    """The state of a dynamic loss scaler after some steps."""

    scale: float = 2.0 ** 16
    """the factor the loss is multiplied by before the backward"""
    growth_tracker: int = 0
    """consecutive steps without inf/NaN since the scale last changed"""
    growth_interval: int = 2000
    """good steps before the scale grows"""
    growth_factor: float = 2.0
    backoff_factor: float = 0.5

    @property
    def inv_scale(self) -> float:
        """1 / scale computed in float64, rounded to float32 (GradScaler's unscale factor)."""
        return _f32(1.0 / self.scale)

    def after(self, found_inf: bool) -> "LossScale":
        """The scaler after one step (torch._amp_update_scale_)."""
        if found_inf:
            return replace(self, scale=_f32(self.scale * self.backoff_factor), growth_tracker=0)
        tracker = self.growth_tracker + 1
        if tracker == self.growth_interval:
            return replace(self, scale=_f32(self.scale * self.growth_factor), growth_tracker=0)
        return replace(self, growth_tracker=tracker)

    def to_dict(self) -> dict:
        return {"scale": self.scale, "growth_tracker": self.growth_tracker,
                "growth_interval": self.growth_interval, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor}
