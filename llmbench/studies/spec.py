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

A spec file is checked before it is used (`load_spec`; every rule is one BadInput line naming the
file and the key, tested in tests/test_studies_schema.py): at most MAX_SPEC_BYTES of UTF-8 in a
regular file; YAML through a SafeLoader that bounds alias expansion (MAX_YAML_NODES, "billion
laughs") and rejects duplicate keys; required keys and types (SPEC_KEYS); unknown keys rejected
with the closest valid name; point values by POINT_RULES, read from the dataclasses' field
metadata (types, ranges, choices: the same rules as the CLI's options); published ids that
exist; predict hardware in the catalog; at most MAX_GRID_POINTS points, counted from the list
lengths before anything is expanded.
"""
from __future__ import annotations

import difflib
import functools
import itertools
import math
import os
import stat
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from llmbench.errors import BadInput
from llmbench.measure.options import RunOptions
from llmbench.point import RESIZABLE, Layout, Workload

SPECS_DIR = Path(__file__).resolve().parent / "specs"
SUITES = ("block", "train", "infer", "genslm")
#: Workload fields a spec sets (suite is the spec's; hardware is where it runs: the runner's)
WORKLOAD_KEYS = tuple(f.name for f in fields(Workload) if f.name not in ("suite", "hardware", "layout"))
LAYOUT_KEYS = tuple(f.name for f in fields(Layout))
#: RunOptions a spec sets (the device, and the data-parallel baseline, are the runner's)
RUN_KEYS = tuple(f.name for f in fields(RunOptions)
                 if f.name not in ("device", "baseline", "baseline_tokens_per_s"))
RUNNER_KEYS = ("suite", "hardware", "device", "baseline", "baseline_tokens_per_s")
MAX_SPEC_BYTES = 1_000_000
MAX_YAML_NODES = 100_000
"""YAML nodes after alias expansion (each use of an alias counted): bounds alias bombs"""
MAX_GRID_POINTS = 10_000
MAX_FLOW_DEPTH = 50
"""[ and { nesting, checked on the text first: PyYAML's scanner is quadratic in it"""

#: key -> (required, type(s), what it is); the same table for the top level, source:, quick:, predict:
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
    "predict": (False, dict, "{hardware: [catalog names], base: ..., grid: ...}: what is predicted"),
}
SOURCE_KEYS = {"paper": (True, str, "arXiv id, or the page where there is none"), "where": (False, str, "figure or table"),
               "note": (False, str, "what the source says")}
QUICK_KEYS = {"shrink": (True, str, "what is made smaller and why"),
              "base": (False, dict, "overrides of base"),
              "grid": (False, (dict, list), "replaces grid")}
PREDICT_KEYS = {"hardware": (True, list, "catalog names the predictions are drawn for"),
                "base": (False, dict, "workload values shared by every prediction"),
                "grid": (False, (dict, list), "a mapping (or list of mappings) whose lists are crossed")}


def _text(v):
    return None if isinstance(v, str) and v.strip() else "non-empty text"


def _resize(v):
    if not isinstance(v, dict):
        return f"a mapping of {', '.join(sorted(RESIZABLE))} to positive integers"
    for k, x in v.items():
        if k not in RESIZABLE:
            return f"a mapping of {', '.join(sorted(RESIZABLE))} (not {k!r}{_closest(k, RESIZABLE)})"
        if not (_is_int(x) and x >= 1):
            return f"a mapping whose {k} is a positive integer (got {_short(x)})"
    return None


def _rule(f):
    """The check of one dataclass field from its metadata (llmbench.point.opt): None when a value
    is fine, else what it must be. Types come from the default: bool, int, float or text."""
    m, default = f.metadata, f.default if f.default is not MISSING else None
    low, high = m.get("low"), m.get("high")
    if m.get("choices"):
        return lambda v: None if v in m["choices"] else f"one of {', '.join(m['choices'])}"
    if isinstance(default, bool):
        return lambda v: None if isinstance(v, bool) else "true or false"
    if m.get("integer"):
        want = "a positive integer" if low == 1 and high is None else \
            f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
        return lambda v: None if _is_int(v) and _in(v, low, high) else want
    if low is not None:
        want = f"a number >= {low:g}" if high is None else f"a number in [{low:g}, {high:g}]"
        return lambda v: None if _is_num(v) and _in(v, low, high) else want
    return _text


def _in(v, low, high) -> bool:
    return (low is None or v >= low) and (high is None or v <= high)


def _point_rules() -> dict:
    """point key -> check, from the field metadata of Workload, Layout and RunOptions."""
    by_name = {f.name: f for cls in (Workload, Layout, RunOptions) for f in fields(cls)}
    rules = {k: _rule(by_name[k]) for k in WORKLOAD_KEYS + LAYOUT_KEYS + RUN_KEYS}
    rules.update(model=_text, resize=_resize)
    return rules


#: point key -> check (None when fine, else what the value must be)
POINT_RULES = _point_rules()
#: keys a `predict:` point may add: a data set to project one epoch of (llmbench project)
PREDICT_RULES = {**POINT_RULES, "dataset": _text}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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
            grid = list(_as_list(self.quick.get("grid", grid)))
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
        for cfg in _expand(dict(self.predict.get("base") or {}), _as_list(self.predict.get("grid") or {})):
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
        w.micro_steps(dp=w.devices or 1)


@functools.lru_cache(maxsize=256)
def _spec_of(model, resize, head, tokens):
    return Workload(model=model, resize=dict(resize), head=head, seq_len=tokens).spec()


def _expand(base: dict, grid: list) -> list[dict]:
    """Every mapping of the grid crossed and merged over base, in order."""
    return [{**base, **combo} for item in grid or [{}] for combo in _cross(item)]


def _as_list(grid) -> list:
    return [grid] if isinstance(grid, dict) else list(grid)


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
    data["grid"] = tuple(_as_list(data["grid"])) if data.get("grid") else ()
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
    if "predict" in data:
        _check_predict(data["predict"], path)
    _check_published(data.get("published") or [], path)


def _check_predict(section: dict, path) -> None:
    _check_keys(section, PREDICT_KEYS, path, "predict.")
    _check_hardware(section["hardware"], path, "predict.hardware", allow_empty=False)
    _check_values(section.get("base") or {}, path, "predict.base", rules=PREDICT_RULES)
    _check_grid(section.get("grid"), path, "predict.grid", rules=PREDICT_RULES)
    for i, item in enumerate(_as_list(section.get("grid") or {})):
        if "hardware" in item:
            hw = item["hardware"]
            _check_hardware(hw if isinstance(hw, list) else [hw], path, f"predict.grid[{i}].hardware")


def _check_hardware(names, path, where: str, allow_empty: bool = True) -> None:
    from llmbench.hardware import catalog

    known = catalog()
    if not names and not allow_empty:
        raise BadInput(f"{path}: {where} is empty (name the catalog hardware to predict)")
    for h in names:
        if h not in known:
            raise BadInput(f"{path}: {where}: {_short(h)} is not in the hardware catalog"
                           f"{_closest(h, known)}")


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


def _check_values(d: dict, path, where: str, grid: bool = False, rules: dict = POINT_RULES) -> None:
    """Point values of base/grid: known keys, each value (or each list item, in a grid) valid."""
    for key, value in d.items():
        if key == "hardware" and rules is PREDICT_RULES and grid:
            continue  # a predict grid item may name its hardware (checked by _check_predict)
        if key in RUNNER_KEYS:
            raise BadInput(f"{path}: {where}.{key} is set by the runner; remove it")
        if key not in rules:
            raise BadInput(f"{path}: unknown key {where}.{key}{_closest(key, rules)}")
        if isinstance(value, list) and grid:
            if not value:
                raise BadInput(f"{path}: {where}.{key} is an empty list (no points)")
            values = value
        elif isinstance(value, list):
            raise BadInput(f"{path}: {where}.{key} is a list; lists (axes) belong in grid")
        else:
            values = [value]
        for v in values:
            need = rules[key](v)
            if need:
                raise BadInput(f"{path}: {where}.{key} must be {need}, got {_short(v)}")


def _check_grid(grid, path, where: str, rules: dict = POINT_RULES) -> None:
    if grid is None:
        return
    items = _as_list(grid)
    total = 0
    for i, item in enumerate(items):
        here = f"{where}[{i}]" if isinstance(grid, list) else where
        if not isinstance(item, dict):
            raise BadInput(f"{path}: {here} must be a mapping, got {_kind(item)}")
        _check_values(item, path, here, grid=True, rules=rules)
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
