"""Array backends of the analytical model: numpy for sweeps and plans, plain Python floats for one
prediction. The backend is an argument (`xp`) that every equation takes, never a global.

One `llmbench predict` call must answer in well under a second including interpreter start-up;
importing numpy alone costs ~0.1 s, so the single-point path runs the same equations on floats:

    xp = backend_for(batch, seq)     # Scalar when every input is a number, else numpy
    xp.where(tc >= tm, tc, 0.0)
"""
from __future__ import annotations

import math


class Scalar:
    """The subset of numpy the model uses, on Python floats (a namespace, never instantiated)."""

    inf = math.inf

    @staticmethod
    def asarray(x, dtype=None):
        return float(x)

    @staticmethod
    def broadcast_arrays(*xs):
        return [float(x) for x in xs]

    @staticmethod
    def where(c, a, b):
        return a if c else b

    @staticmethod
    def maximum(a, b):
        return a if a >= b else b

    @staticmethod
    def minimum(a, b):
        return a if a <= b else b

    @staticmethod
    def zeros_like(x, dtype=None):
        return 0.0

    @staticmethod
    def ones_like(x, dtype=None):
        return 1.0

    @staticmethod
    def full_like(x, v, dtype=None):
        return float(v)

    ceil = staticmethod(math.ceil)
    log2 = staticmethod(math.log2)
    isfinite = staticmethod(math.isfinite)

    @staticmethod
    def shape(x):
        return ()


def is_scalar(xp) -> bool:
    return xp is Scalar


def backend_for(*inputs):
    """Scalar when every input is a Python number, else numpy (imported here, at first use)."""
    if all(isinstance(x, (int, float, bool)) for x in inputs):
        return Scalar
    import numpy

    return numpy
