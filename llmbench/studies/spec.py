"""Study specs: one YAML per published study (llmbench/studies/specs/*.yaml) -> its Workloads.

    llmbench study list
    llmbench study show transformer-block --quick --json

A spec names its suite (block | train | infer | genslm), the source study (paper, figure or
table), the ids of the rows of llmbench/reference/published.csv it is compared with, a `base`
shared by every point, and a `grid`: one mapping or a list of mappings whose list values are
crossed (cartesian product) and merged over `base`. The `quick:` section says what it shrinks
(`shrink:`) and overrides `base` (merged) and `grid` (replaced) so the study fits a 2-core CPU in
minutes; quick points are still real measurements, only smaller. The `predict:` section is what
the analytical model predicts for the study (`llmbench study predict`, `llmbench reproduce`): the
catalog `hardware` it is drawn for, and its own `base` and `grid` (a grid item may name its own
`hardware`, and `dataset` projects one epoch of a data set); without it, `study predict` predicts
the study's full-size points.

A point's keys are the fields of llmbench.point.Workload (model, batch, seq_len, precision,
devices, micro_batch, grad_accum, gen_len, sparsity, resize, head and the layout knobs tp, pp,
zero, recompute, offload, mode) and of llmbench.measure.options.RunOptions (steps, repeats, data,
...: how it is measured, not what; results are keyed without them). `batch` is the GLOBAL batch,
as everywhere in llmbench: a data-parallel point over `devices` replicas with `grad_accum`
micro-steps of `micro_batch` sequences has batch = micro_batch x grad_accum x devices.
`points()` gives (Workload, RunOptions) pairs; the runner adds the hardware, the precision and the
micro-steps this machine runs them with (studies/runner.py).

A spec file is checked before it is used: studies/schema.py (every rule one BadInput line).
"""
from __future__ import annotations

import functools
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

from llmbench.errors import BadInput
from llmbench.measure.options import RunOptions
from llmbench.point import Layout, Workload
from llmbench.studies.schema import (LAYOUT_KEYS, RUN_KEYS, SUITES, WORKLOAD_KEYS, as_list,
                                     closest, check_spec, parse_yaml, read_text)

SPECS_DIR = Path(__file__).resolve().parent / "specs"


@dataclass(frozen=True, kw_only=True)
class StudyPoint:
    """One point of a study: what runs (the Workload, hardware still open) and how (RunOptions)."""

    workload: Workload
    run: RunOptions


@dataclass(frozen=True, kw_only=True)
class PredictPoint:
    """One planned prediction: a Workload (hardware still open) and where it is predicted."""

    workload: Workload
    hardware: tuple[str, ...] = ()
    """catalog names; () = what the caller says (--hardware), else every accelerator"""
    dataset: str | None = None
    """project one epoch of this data set at the predicted throughput (llmbench project)"""


@dataclass(frozen=True, kw_only=True)
class StudySpec:
    """One published study as runnable points."""

    name: str
    title: str
    suite: str
    """block | train | infer | genslm: the measure suite every point runs through"""
    source: dict
    """{paper: arXiv id, where: figure/table, note: ...}"""
    description: str = ""
    base: dict = field(default_factory=dict)
    grid: tuple = ()
    """mappings whose list values are crossed; their union is the study's points"""
    published: tuple = ()
    """ids of rows of llmbench/reference/published.csv this study is compared with"""
    quick: dict = field(default_factory=dict)
    """{shrink: what is made smaller and why, base: overrides, grid: replacement}"""
    predict: dict = field(default_factory=dict)
    """{hardware: catalog names, base: ..., grid: ...}: what the analytical model predicts"""
    path: str = ""

    def __post_init__(self):
        if self.suite not in SUITES:
            raise BadInput(f"study {self.name}: suite must be one of {', '.join(SUITES)}, got {self.suite!r}")
        if not self.source.get("paper"):
            raise BadInput(f"study {self.name}: source.paper is required")
        if self.quick and not self.quick.get("shrink"):
            raise BadInput(f"study {self.name}: quick.shrink must say what is shrunk")

    def points(self, quick: bool = False) -> list[StudyPoint]:
        """The expanded points, in grid order, without duplicates. A study with only a `predict:`
        section has none."""
        base, grid = dict(self.base), list(self.grid)
        if quick and self.quick:
            base.update(self.quick.get("base", {}))
            grid = list(as_list(self.quick.get("grid", grid)))
        if not base and not grid:
            return []
        out, seen = [], set()
        for cfg in _expand(base, grid):
            p = StudyPoint(workload=self._workload(cfg), run=self._run(cfg))
            if (p.workload.id(), p.run) not in seen:
                seen.add((p.workload.id(), p.run))
                out.append(p)
        return out

    def predict_points(self) -> list[PredictPoint]:
        """What the analytical model predicts for this study: the `predict:` section's points on
        its hardware, else the full-size points (hardware left to the caller)."""
        if not self.predict:
            return [PredictPoint(workload=p.workload) for p in self.points()]
        section = tuple(self.predict["hardware"])
        out = []
        for cfg in _expand(dict(self.predict.get("base") or {}), as_list(self.predict.get("grid") or {})):
            hw = cfg.pop("hardware", None)
            hardware = tuple(hw) if isinstance(hw, list) else (hw,) if hw else section
            out.append(PredictPoint(workload=self._workload(cfg), hardware=hardware,
                                    dataset=cfg.get("dataset")))
        return out

    def _workload(self, cfg: dict) -> Workload:
        """The Workload of one expanded point (every field not given: Workload's default)."""
        if "model" not in cfg:
            raise BadInput(f"study {self.name}: every point needs 'model'")
        wf = {k: v for k, v in cfg.items() if k in WORKLOAD_KEYS}
        lay = {k: v for k, v in cfg.items() if k in LAYOUT_KEYS}
        try:
            w = Workload(suite=self.suite, **wf, layout=Layout(**lay))
            _check_builds(w)
        except ValueError as e:  # BadInput is a ValueError; ModelSpec raises ValueError too
            raise BadInput(f"study {self.name} ({self.path or 'spec'}): {e}") from None
        return w

    def _run(self, cfg: dict) -> RunOptions:
        return RunOptions(**{k: v for k, v in cfg.items() if k in RUN_KEYS})


def _check_builds(w: Workload) -> None:
    """The model builds (preset exists, resize valid) and a training batch splits into its
    replicas' micro-steps; raises ValueError saying why not."""
    _spec_of(w.model, tuple(sorted(w.resize.items())), w.head, w.seq_len + w.gen_len)
    if w.suite in ("train", "genslm"):
        w.micro_steps()  # the replicas its tp and pp leave (devices when unsaid)


@functools.lru_cache(maxsize=256)
def _spec_of(model, resize, head, tokens):
    return Workload(model=model, resize=dict(resize), head=head, seq_len=tokens).spec()


def _expand(base: dict, grid: list) -> list[dict]:
    """Every mapping of the grid crossed and merged over base, in order."""
    return [{**base, **combo} for item in grid or [{}] for combo in _cross(item)]


def _cross(item: dict) -> list[dict]:
    keys = list(item)
    values = [v if isinstance(v, list) else [v] for v in item.values()]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def load_spec(path: str | Path) -> StudySpec:
    """A study spec file, checked (module docstring); every problem is one BadInput line."""
    path = Path(path)
    data = parse_yaml(read_text(path), path)
    check_spec(data, path)
    data = dict(data)
    data.setdefault("name", path.stem)
    data["grid"] = tuple(as_list(data["grid"])) if data.get("grid") else ()
    data["published"] = tuple(data.get("published") or ())
    return StudySpec(**data, path=str(path))


@functools.lru_cache(maxsize=1)
def _all_specs() -> dict[str, StudySpec]:
    specs = {}
    for path in sorted(SPECS_DIR.glob("*.yaml")):
        spec = load_spec(path)
        specs[spec.name] = spec
    return specs


def studies() -> dict[str, StudySpec]:
    """Every shipped study, by name."""
    return dict(_all_specs())


def get_study(name: str) -> StudySpec:
    """A shipped study by exact name or unique prefix, else a path to a YAML spec."""
    specs = _all_specs()
    if name in specs:
        return specs[name]
    matches = [n for n in specs if n.startswith(name)]
    if len(matches) == 1:
        return specs[matches[0]]
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        return load_spec(name)
    hint = f" (matches {', '.join(matches)})" if matches else closest(name, specs)
    raise BadInput(f"unknown study {name!r}{hint}; one of {', '.join(specs)}")
