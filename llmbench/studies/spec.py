"""Study specs: one YAML per published study (llmbench/studies/specs/*.yaml) -> its points.

    llmbench study list
    llmbench study show transformer-block --quick --json

A spec names its suite (block | train | infer), the source study (paper, figure or table), the ids
of the rows of llmbench/reference/published.csv it is compared with, a `base` config shared by
every point, and a `grid`: one mapping or a list of mappings whose list values are crossed
(cartesian product) and merged over `base`. The `quick:` section says what it shrinks (`shrink:`)
and overrides `base` (merged) and `grid` (replaced) so the study fits a 2-core CPU in minutes;
quick points are still real measurements, only smaller.

A point is a flat dict: suite, model, hardware (added by the runner), the workload fields (batch,
seq, precision, steps or repeats, grad_accum, devices, sparsity, gen_len, data ...) and, for shrunk models,
`head` (lm | mlm | cls: e.g. BERT pre-training with its MLM head) and, for shrunk models,
`resize`: the exact ModelSpec changes (`get_model(model).with_(**resize)`), with d_ff and
n_kv_heads written out so every engine builds the same model.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from pathlib import Path

SPECS_DIR = Path(__file__).resolve().parent / "specs"
SUITES = ("block", "train", "infer")
# workload defaults per suite: written into every point so its key is its full configuration
SUITE_DEFAULTS = {
    "block": {"precision": "fp32", "repeats": 5},
    "train": {"precision": "fp32", "steps": 10, "grad_accum": 1, "devices": 1, "sparsity": 0.0,
              "data": "synthetic"},
    "infer": {"precision": "fp32", "repeats": 20, "gen_len": 0},
}
_RESIZABLE = {"n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "max_seq_len"}


@dataclass(frozen=True, kw_only=True)
class StudySpec:
    """One published study as runnable points."""

    name: str
    title: str
    suite: str
    """block | train | infer: the measure suite every point runs through"""
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
    path: str = ""

    def __post_init__(self):
        if self.suite not in SUITES:
            raise ValueError(f"study {self.name}: suite must be one of {', '.join(SUITES)}, got {self.suite!r}")
        if not self.source.get("paper"):
            raise ValueError(f"study {self.name}: source.paper is required")
        if self.quick and not self.quick.get("shrink"):
            raise ValueError(f"study {self.name}: quick.shrink must say what is shrunk")

    def points(self, quick: bool = False, hardware: str | None = None) -> list[dict]:
        """The expanded points, in grid order, without duplicates."""
        base = dict(self.base)
        grid = list(self.grid)
        if quick and self.quick:
            base.update(self.quick.get("base", {}))
            grid = list(_as_list(self.quick.get("grid", grid)))
        out, seen = [], set()
        for item in grid or [{}]:
            for combo in _cross(item):
                point = self._complete({**base, **combo}, hardware)
                sig = repr(sorted(point.items()))
                if sig not in seen:
                    seen.add(sig)
                    out.append(point)
        return out

    def _complete(self, cfg: dict, hardware: str | None) -> dict:
        point = {"suite": self.suite, **SUITE_DEFAULTS[self.suite], **cfg}
        if hardware is not None:
            point["hardware"] = hardware
        for key in ("model", "batch", "seq"):
            if key not in point:
                raise ValueError(f"study {self.name}: every point needs {key!r}")
        resize = _full_resize(point["model"], dict(point.get("resize") or {}), point["seq"])
        if resize:
            point["resize"] = resize
        else:
            point.pop("resize", None)
        return point


def _as_list(grid) -> list:
    return [grid] if isinstance(grid, dict) else list(grid)


def _cross(item: dict) -> list[dict]:
    keys = list(item)
    values = [v if isinstance(v, list) else [v] for v in item.values()]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _full_resize(model: str, resize: dict, seq: int) -> dict:
    """The ModelSpec changes of a shrunk point, written out in full (d_ff and GQA groups keep the
    preset's proportions, as llmbench.models.spec.resize does); learned positions are
    extended when the point's seq is longer than the preset's context."""
    from llmbench.models import get_model

    bad = set(resize) - _RESIZABLE
    if bad:
        raise ValueError(f"resize may change only {', '.join(sorted(_RESIZABLE))}; got {', '.join(sorted(bad))}")
    spec = get_model(model)
    if "n_heads" in resize and "n_kv_heads" not in resize and spec.n_kv_heads != spec.n_heads:
        group = spec.n_heads // spec.n_kv_heads
        n = resize["n_heads"]
        resize["n_kv_heads"] = max(1, n // group) if n % group == 0 else n
    elif "n_heads" in resize and "n_kv_heads" not in resize:
        resize["n_kv_heads"] = resize["n_heads"]
    if "d_model" in resize and "d_ff" not in resize:
        resize["d_ff"] = max(1, round(spec.d_ff * resize["d_model"] / spec.d_model))
    if seq > resize.get("max_seq_len", spec.max_seq_len):
        resize["max_seq_len"] = seq
    if resize:
        spec.with_(**resize)  # validates (heads dividing the width ...)
    return {k: resize[k] for k in sorted(resize)}


def model_spec(point: dict):
    """The ModelSpec a point runs: the preset, resized when the point says so."""
    from llmbench.models import get_model

    spec = get_model(point["model"])
    changes = {**(point.get("resize") or {}), **({"head": point["head"]} if point.get("head") else {})}
    return spec.with_(**changes) if changes else spec


def load_spec(path: str | Path) -> StudySpec:
    import yaml

    path = Path(path)
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" line {where.line + 1}" if where else ""
        raise ValueError(f"{path.name}:{line} is not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a study spec is a YAML mapping")
    known = {"name", "title", "suite", "source", "description", "base", "grid", "published", "quick"}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{path.name}: unknown keys {', '.join(sorted(unknown))}")
    data.setdefault("name", path.stem)
    data["grid"] = tuple(_as_list(data.get("grid") or {}))
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
    if name.endswith((".yaml", ".yml")) and Path(name).exists():
        return load_spec(name)
    hint = f" (matches {', '.join(matches)})" if matches else ""
    raise ValueError(f"unknown study {name!r}{hint}; one of {', '.join(specs)}")
