"""The study-spec schema: every rule a spec file is checked by before it is used, each one
BadInput line naming the file and the key (tested in tests/test_studies_schema.py).

    from llmbench.studies.schema import check_spec, parse_yaml, read_text
    check_spec(parse_yaml(read_text(path), path), path)      # what studies.spec.load_spec does

At most MAX_SPEC_BYTES of UTF-8 in a regular file; YAML through a SafeLoader that bounds alias
expansion (MAX_YAML_NODES, "billion laughs") and rejects duplicate keys; required keys and types
(SPEC_KEYS, SOURCE_KEYS, QUICK_KEYS, PREDICT_KEYS); unknown keys rejected with the closest valid
name; point values by POINT_RULES, read from the field metadata of llmbench.point.Workload and
Layout and llmbench.measure.options.RunOptions (types, ranges, choices: the same rules as the
CLI's options); published ids that exist; predict hardware in the catalog; at most
MAX_GRID_POINTS points, counted from the list lengths before anything is expanded.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import MISSING, fields
from pathlib import Path

from llmbench.errors import BadInput
from llmbench.measure.options import RunOptions
from llmbench.point import RESIZABLE, Layout, Workload

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
            return f"a mapping of {', '.join(sorted(RESIZABLE))} (not {k!r}{closest(k, RESIZABLE)})"
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
        cap = high is not None and high >= 1024  # a supported ceiling (point.MAX_*), not a range
        want = "a positive integer" if low == 1 and (high is None or cap) else \
            f"an integer >= {low}" if high is None or cap else f"an integer in [{low}, {high}]"
        want += f" (at most 2^{high.bit_length() - 1})" if cap else ""
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


def read_text(path: Path, limit_bytes: int = MAX_SPEC_BYTES) -> str:
    """A study spec's text: the one rule for user files (llmbench._files: regular, at most
    `limit_bytes`, checked before and while reading, UTF-8)."""
    from llmbench._files import read_small_text

    return read_small_text(path, "study spec", limit_bytes)


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
                       f"{closest(data['suite'], SUITES)}")
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
    for i, item in enumerate(as_list(section.get("grid") or {})):
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
                           f"{closest(h, known)}")


def _check_keys(d: dict, schema: dict, path, prefix: str) -> None:
    for key in d:
        if key not in schema:
            raise BadInput(f"{path}: unknown key {prefix}{key}{closest(key, schema)}; "
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
            raise BadInput(f"{path}: unknown key {where}.{key}{closest(key, rules)}")
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
    items = as_list(grid)
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
    from llmbench.published import PUBLISHED_CSV, published_rows

    known = {r["id"] for r in published_rows(PUBLISHED_CSV)}
    for pid in ids:
        if not isinstance(pid, str):
            raise BadInput(f"{path}: published holds row ids (text), got {_kind(pid)}")
        if pid not in known:
            raise BadInput(f"{path}: published id {pid!r} is not in llmbench/reference/published.csv"
                           f"{closest(pid, known)}")


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


def closest(word, choices) -> str:
    near = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def as_list(grid) -> list:
    return [grid] if isinstance(grid, dict) else list(grid)
