"""Array backend: numpy for sweeps, plain Python floats for one prediction.

One `llmbench predict` call must answer in under 0.3 s including interpreter start-up; importing
numpy alone costs ~0.1 s, so the single-point path runs the same equations on Python floats. The
model's modules write `np.where(...)` etc. against `np` below, a proxy that forwards to the backend
chosen by `use_for(*inputs)` at each entry point.
"""
from __future__ import annotations

import math


class Scalar:
    """The subset of numpy the model uses, on Python floats."""

    inf = math.inf
    ndarray = ()

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

    @staticmethod
    def shape(x):
        return ()


class _Proxy:
    backend = Scalar

    def __getattr__(self, name):
        return getattr(_Proxy.backend, name)


np = _Proxy()


def is_scalar() -> bool:
    return _Proxy.backend is Scalar


def use_for(*inputs):
    """Pick numpy when any input is an array or a list, else the scalar backend."""
    if all(isinstance(x, (int, float, bool)) for x in inputs):
        _Proxy.backend = Scalar
    else:
        import numpy

        _Proxy.backend = numpy
    return _Proxy.backend
