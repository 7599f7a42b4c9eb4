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

A spec file is checked before it is used (`load_spec`; every rule is one BadInput line naming the
file and the key, tested in tests/test_studies_schema.py): at most MAX_SPEC_BYTES of UTF-8 in a
regular file; YAML through a SafeLoader that bounds alias expansion (MAX_YAML_NODES, "billion
laughs") and rejects duplicate keys; required keys and types (SPEC_KEYS); unknown keys rejected
with the closest valid name; point values by POINT_RULES (positive batch/seq/steps/repeats,
finite numbers); published ids that exist; at most MAX_GRID_POINTS points, counted from the list
lengths before anything is expanded.
"""
from __future__ import annotations

import difflib
import functools
import itertools
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from llmbench.errors import BadInput

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
MAX_SPEC_BYTES = 1_000_000
MAX_YAML_NODES = 100_000
"""YAML nodes after alias expansion (each use of an alias counted): bounds alias bombs"""
MAX_GRID_POINTS = 10_000
MAX_FLOW_DEPTH = 50
"""[ and { nesting, checked on the text first: PyYAML's scanner is quadratic in it"""

#: key -> (required, type(s), what it is); the same table for the top level, source: and quick:
SPEC_KEYS = {
    "name": (False, str, "the study's name (default: the file name)"),
    "title": (True, str, "one line saying what is measured"),
    "suite": (True, str, f"the measure suite: {' | '.join(SUITES)}"),
    "source": (True, dict, "{paper: arXiv id, where: figure/table, note: ...}"),
    "description": (False, str, "a paragraph"),
    "base": (False, dict, "workload values shared by every point"),
    "grid": (False, (dict, list), "a mapping (or a list of mappings) whose list values are crossed"),
    "published": (False, list, "ids of rows of llmbench/reference/published.csv"),
    "quick": (False, dict, "{shrink: what is made smaller, base: overrides, grid: replacement}"),
}
SOURCE_KEYS = {"paper": (True, str, "arXiv id"), "where": (False, str, "figure or table"),
               "note": (False, str, "what the source says")}
QUICK_KEYS = {"shrink": (True, str, "what is made smaller and why"),
              "base": (False, dict, "overrides of base"),
              "grid": (False, (dict, list), "replaces grid")}


def _pos_int(v):
    return None if _is_int(v) and v >= 1 else "a positive integer"


def _nonneg_int(v):
    return None if _is_int(v) and v >= 0 else "an integer >= 0"


def _fraction(v):
    return None if _is_num(v) and 0.0 <= v < 1.0 else "a number in [0, 1)"


def _pos_num(v):
    return None if _is_num(v) and v > 0 else "a positive number"


def _text(v):
    return None if isinstance(v, str) and v.strip() else "non-empty text"


def _flag(v):
    return None if isinstance(v, bool) else "true or false"


def _resize(v):
    if not isinstance(v, dict):
        return f"a mapping of {', '.join(sorted(_RESIZABLE))} to positive integers"
    for k, x in v.items():
        if k not in _RESIZABLE:
            return f"a mapping of {', '.join(sorted(_RESIZABLE))} (not {k!r}{_closest(k, _RESIZABLE)})"
        if _pos_int(x):
            return f"a mapping whose {k} is a positive integer (got {_short(x)})"
    return None


#: point key -> check (None when fine, else what the value must be). `suite` and `hardware` are
#: set by the runner. TODO(lead): generate from llmbench.point.Workload once it lands.
POINT_RULES = {
    "model": _text, "batch": _pos_int, "seq": _pos_int, "precision": _text, "repeats": _pos_int,
    "steps": _pos_int, "grad_accum": _pos_int, "devices": _pos_int, "gen_len": _nonneg_int,
    "warmup": _nonneg_int, "warmup_steps": _nonneg_int, "seed": _nonneg_int,
    "sparsity": _fraction, "sparsity_pattern": _text, "lr": _pos_num, "data": _text,
    "head": _text, "ceiling": _text, "compile": _flag, "resize": _resize,
}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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
            raise BadInput(f"study {self.name}: suite must be one of {', '.join(SUITES)}, got {self.suite!r}")
        if not self.source.get("paper"):
            raise BadInput(f"study {self.name}: source.paper is required")
        if self.quick and not self.quick.get("shrink"):
            raise BadInput(f"study {self.name}: quick.shrink must say what is shrunk")

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
    """A study spec file, checked (module docstring); every problem is one BadInput line."""
    path = Path(path)
    data = parse_yaml(read_text(path), path)
    check_spec(data, path)
    data = dict(data)
    data.setdefault("name", path.stem)
    data["grid"] = tuple(_as_list(data.get("grid") or {}))
    data["published"] = tuple(data.get("published") or ())
    return StudySpec(**data, path=str(path))


def read_text(path: Path, limit_bytes: int = MAX_SPEC_BYTES) -> str:
    """A user's text file: regular, at most `limit_bytes` (checked before and while reading), UTF-8."""
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise BadInput(f"{path} is a directory, not a study spec (a YAML file)")
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{path} is not a regular file")
        if st.st_size > limit_bytes:
            raise BadInput(f"{path} is {st.st_size:,} bytes; a study spec is at most {limit_bytes:,}")
        with open(path, "rb") as f:
            data = f.read(limit_bytes + 1)
    except FileNotFoundError:
        raise BadInput(f"no such study spec: {path}") from None
    except OSError as e:
        raise BadInput(f"{path}: cannot read it ({e.strerror or e})") from None
    if len(data) > limit_bytes:
        raise BadInput(f"{path} is over {limit_bytes:,} bytes; a study spec is at most that")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path} is not UTF-8 text (byte {e.start}: {data[e.start]:#04x})") from None


class _SpecError(Exception):
    """Raised inside the YAML loader; load_spec turns it into BadInput naming the file."""


def _loader():
    import yaml

    class SpecLoader(yaml.SafeLoader):
        """SafeLoader that bounds alias expansion and refuses duplicate keys."""

        def compose_document(self):
            node = super().compose_document()
            _expanded_nodes(node, MAX_YAML_NODES)
            return node

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if key is not None and key != "<<" and key in seen:
                    raise _SpecError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
                seen.add(key)
            return super().construct_mapping(node, deep)

    return SpecLoader


def _expanded_nodes(root, limit: int) -> int:
    """Nodes of the document with every alias expanded, without expanding it (memo per node)."""
    import yaml

    memo, active = {}, set()

    def size(node) -> int:
        if id(node) in memo:
            return memo[id(node)]
        if id(node) in active:
            raise _SpecError("an alias refers to a node that contains it (a recursive structure)")
        active.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(c) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            n = 1
        active.discard(id(node))
        if n > limit:
            raise _SpecError(f"expands to over {limit:,} YAML nodes (aliases used too often)")
        memo[id(node)] = n
        return n

    return size(root) if root is not None else 0


def parse_yaml(text: str, path: Path):
    """YAML text -> Python data through the bounded loader; BadInput naming the file."""
    import yaml

    if _flow_depth(text) > MAX_FLOW_DEPTH:
        raise BadInput(f"{path}: brackets [ {{ nested over {MAX_FLOW_DEPTH} deep")
    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except _SpecError as e:
        raise BadInput(f"{path}: {e}") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" line {where.line + 1}" if where else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise BadInput(f"{path}:{line} is not valid YAML ({problem})") from None
    except RecursionError:
        raise BadInput(f"{path}: YAML nested too deeply") from None


def _flow_depth(text: str) -> int:
    """Deepest [ { nesting, counting every bracket (quoted ones too: this only over-counts)."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}" and depth:
            depth -= 1
    return deepest


def check_spec(data, path) -> None:
    """The spec schema (SPEC_KEYS, POINT_RULES, limits); raises BadInput naming file and key."""
    if not isinstance(data, dict):
        raise BadInput(f"{path}: a study spec is a YAML mapping, got {_kind(data)}")
    _check_keys(data, SPEC_KEYS, path, "")
    if data["suite"] not in SUITES:
        raise BadInput(f"{path}: suite must be one of {', '.join(SUITES)}, got {data['suite']!r}"
                       f"{_closest(data['suite'], SUITES)}")
    _check_keys(data["source"], SOURCE_KEYS, path, "source.")
    for key in ("name", "title"):
        if key in data and ("\n" in data[key].strip() or not data[key].strip()):
            raise BadInput(f"{path}: {key} must be one non-empty line")
    _check_values(data.get("base") or {}, path, "base")
    _check_grid(data.get("grid"), path, "grid")
    if "quick" in data:
        _check_keys(data["quick"], QUICK_KEYS, path, "quick.")
        _check_values(data["quick"].get("base") or {}, path, "quick.base")
        _check_grid(data["quick"].get("grid"), path, "quick.grid")
    _check_published(data.get("published") or [], path)


def _check_keys(d: dict, schema: dict, path, prefix: str) -> None:
    for key in d:
        if key not in schema:
            raise BadInput(f"{path}: unknown key {prefix}{key}{_closest(key, schema)}; "
                           f"valid: {', '.join(schema)}")
    for key, (required, types, what) in schema.items():
        if key not in d:
            if required:
                raise BadInput(f"{path}: {prefix}{key} is required ({what})")
            continue
        if not isinstance(d[key], types):
            want = " or ".join(_TYPE_WORDS[t] for t in (types if isinstance(types, tuple) else (types,)))
            raise BadInput(f"{path}: {prefix}{key} must be {want} ({what}), got {_kind(d[key])}")


def _check_values(d: dict, path, where: str, grid: bool = False) -> None:
    """Point values of base/grid: known keys, each value (or each list item, in a grid) valid."""
    for key, value in d.items():
        if key in ("suite", "hardware"):
            raise BadInput(f"{path}: {where}.{key} is set by the runner; remove it")
        if key not in POINT_RULES:
            raise BadInput(f"{path}: unknown key {where}.{key}{_closest(key, POINT_RULES)}")
        if isinstance(value, list) and grid:
            if not value:
                raise BadInput(f"{path}: {where}.{key} is an empty list (no points)")
            values = value
        elif isinstance(value, list):
            raise BadInput(f"{path}: {where}.{key} is a list; lists (axes) belong in grid")
        else:
            values = [value]
        for v in values:
            need = POINT_RULES[key](v)
            if need:
                raise BadInput(f"{path}: {where}.{key} must be {need}, got {_short(v)}")


def _check_grid(grid, path, where: str) -> None:
    if grid is None:
        return
    items = _as_list(grid)
    total = 0
    for i, item in enumerate(items):
        here = f"{where}[{i}]" if isinstance(grid, list) else where
        if not isinstance(item, dict):
            raise BadInput(f"{path}: {here} must be a mapping, got {_kind(item)}")
        _check_values(item, path, here, grid=True)
        total += math.prod(len(v) for v in item.values() if isinstance(v, list))
    if total > MAX_GRID_POINTS:
        raise BadInput(f"{path}: {where} has {total:,} points; a study has at most {MAX_GRID_POINTS:,}")


def _check_published(ids: list, path) -> None:
    from llmbench.results.published import published_rows

    known = {r["id"] for r in published_rows()}
    for pid in ids:
        if not isinstance(pid, str):
            raise BadInput(f"{path}: published holds row ids (text), got {_kind(pid)}")
        if pid not in known:
            raise BadInput(f"{path}: published id {pid!r} is not in llmbench/reference/published.csv"
                           f"{_closest(pid, known)}")


_TYPE_WORDS = {str: "text", dict: "a mapping", list: "a list"}


def _kind(v) -> str:
    if v is None:
        return "nothing (null)"
    if isinstance(v, bool):
        return f"true/false ({v})"
    if isinstance(v, (int, float)):
        return f"a number ({v})"
    if isinstance(v, str):
        return f"text ({v[:40]!r})"
    return {dict: "a mapping", list: "a list"}.get(type(v), type(v).__name__)


def _short(v, n: int = 60) -> str:
    text = repr(v)
    return text if len(text) <= n else text[:n] + "..."


def _closest(word, choices) -> str:
    near = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f" (did you mean {near[0]}?)" if near else ""


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
    hint = f" (matches {', '.join(matches)})" if matches else _closest(name, specs)
    raise BadInput(f"unknown study {name!r}{hint}; one of {', '.join(specs)}")
