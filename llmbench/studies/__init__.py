"""Studies: the published benchmark studies as YAML specs -> points -> measured results.

    llmbench study list
    llmbench study run transformer-block --quick
"""
from __future__ import annotations

__all__ = ["StudySpec", "get_study", "studies"]


def __getattr__(name):  # lazy: `llmbench.studies.cli` loads at CLI start-up without the specs
    if name in __all__:
        from llmbench.studies import spec
        return getattr(spec, name)
    raise AttributeError(name)
