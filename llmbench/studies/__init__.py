"""Studies: the published benchmark studies as YAML specs -> points -> measured results.

    llmbench study list
    llmbench study run transformer-block --quick
"""
from llmbench.studies.spec import StudySpec, get_study, studies

__all__ = ["StudySpec", "get_study", "studies"]
