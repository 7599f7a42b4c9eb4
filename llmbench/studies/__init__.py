"""Studies: every plan of work. The published benchmark studies as YAML specs -> Workloads ->
measured here (runner), predicted (the one planner, predict.py), compared with published values
(validation.py); `reproduce` runs them all and hands the database to report/ to draw.

    llmbench study list
    llmbench study run transformer-block --quick
    llmbench reproduce --quick --out out/
"""
from __future__ import annotations

__all__ = ["StudySpec", "get_study", "studies"]


def __getattr__(name):  # lazy: `llmbench.studies.cli` loads at CLI start-up without the specs
    if name in __all__:
        from llmbench.studies import spec
        return getattr(spec, name)
    raise AttributeError(name)
