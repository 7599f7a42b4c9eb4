"""llmbench: how fast will this LLM train or run on this hardware, and why?

    import llmbench as lb          # cheap: names load on first use (PEP 562)
    lb.predict_train(model="gpt2-xl", hardware="h100-sxm", batch=64, seq=1024, devices=8)

The Python API is llmbench/api.py (docs/api.md); the command line is `llmbench --help`.
"""
__version__ = "0.1.0"

#: name -> module it lives in; loaded on first access so `import llmbench` (and the CLI) stays cheap
_EXPORTS = {
    "predict_train": "llmbench.api", "predict_infer": "llmbench.api", "plan": "llmbench.api",
    "measure_train": "llmbench.api", "measure_infer": "llmbench.api", "measure_block": "llmbench.api",
    "PlanResult": "llmbench.api", "Measurement": "llmbench.api",
    "predict": "llmbench.perfmodel.predict", "Workload": "llmbench.point", "Layout": "llmbench.point",
    "METRICS": "llmbench.point", "BadInput": "llmbench.errors",
    "get_model": "llmbench.models", "ModelSpec": "llmbench.models",
    "get_hardware": "llmbench.hardware", "HardwareSpec": "llmbench.hardware",
}
_SUBMODULES = ("results", "models", "hardware", "perfmodel", "measure", "api")
__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    import importlib

    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
