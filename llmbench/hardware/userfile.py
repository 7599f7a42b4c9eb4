"""A user's own accelerator as a TOML file with the catalog's schema: read, validate, write.

    from llmbench.hardware import get_hardware, init_toml, check_user_file
    open("mine.toml", "w").write(init_toml("h100-sxm", name="my-gpu"))   # a starting point
    hw = get_hardware("./mine.toml")              # validated; errors are one-line BadInput
    check_user_file("mine.toml").warnings         # numbers without a source (recommended, not required)

$LLMBENCH_HARDWARE_PATH (folders separated by os.pathsep) adds every *.toml in those folders to
catalog(); an entry may not reuse a shipped name or another file's name (the error names both files).
The lead wires `llmbench hardware init --like NAME` to init_toml. See docs/hardware.md.
No torch; tests: tests/test_hardware_user.py.
"""
from __future__ import annotations

import difflib
import math
import os
from llmbench._toml import tomllib
from dataclasses import dataclass
from pathlib import Path

from llmbench.errors import BadInput, check_name

from .spec import (
    DTYPES, HARDWARE_PATH_VAR, KINDS, MODES, TIER_ROLES, TOPOLOGIES, HardwareSpec, _with_profile, numeric_paths,
)

MAX_USER_FILE_BYTES = 1_000_000
"""a hardware file is a few kB; anything over 1 MB is not one (refused before reading)"""

# field -> kind of value; every field a user file may set (origin_file and overlay are derived)
FIELD_KINDS = {
    "name": "str", "display_name": "str", "vendor": "str", "kind": "str", "peak_flops": "dtypes",
    "peak_flops_sparse": "dtypes", "memory_tiers": "tiers", "interconnect": "interconnect",
    "power_w": "positive", "price_per_device_hour_usd": "positive", "skips_zero_weights": "bool",
    "structured_sparsity": "str", "default_mode_train": "str", "default_mode_infer": "str", "logical_gpus": "count",
    "efficiency": "numbers", "sources": "strings", "notes": "str",
}
REQUIRED = ("name", "display_name", "vendor", "kind", "peak_flops", "memory_tiers")
TIER_KEYS = {"name": "str", "role": "str", "capacity_bytes": "positive", "bandwidth_bytes_per_s": "positive"}
LINK_KEYS = {"name": "str", "bandwidth_bytes_per_s": "positive", "latency_s": "nonnegative",
             "topology": "str", "devices_per_node": "count", "inter_node_bandwidth_bytes_per_s": "nonnegative"}
#: the largest value each quantity may take in a user file (refused at load, issue 23: a
#: devices_per_node of 1e20 made every search over nodes hang): about 1000x beyond the largest
#: device in the catalog -- Cerebras CS-3 125 PFLOP/s and 21 PB/s on-wafer (cerebras.ai CS-3
#: datasheet), MemoryX 1.2 PB; NVL72's 72 GPUs in one NVLink domain (nvidia.com GB200 NVL72)
CEILINGS = {"peak_flops": 1e21, "peak_flops_sparse": 1e21, "capacity_bytes": 1e19, "bandwidth_bytes_per_s": 1e19,
            "inter_node_bandwidth_bytes_per_s": 1e19, "devices_per_node": 1 << 16, "latency_s": 3600.0,
            "power_w": 1e7, "price_per_device_hour_usd": 1e6, "logical_gpus": 64}
CHOICES = {"kind": KINDS, "default_mode_train": MODES, "default_mode_infer": MODES, "role": TIER_ROLES,
           "topology": TOPOLOGIES}


@dataclass(frozen=True, kw_only=True)
class UserFileCheck:
    spec: HardwareSpec
    """the validated entry"""
    warnings: tuple[str, ...]
    """one line each: numbers without a source, sources for numbers that are not there"""


# ---------------------------------------------------------------- reading

def read_text(path: str | Path) -> str:
    """The file's text, refusing directories, missing files, files over 1 MB and non-UTF-8 bytes."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise BadInput(f"{path}: is a directory, not a hardware TOML file")
    if not p.is_file():
        raise BadInput(f"{path}: no such hardware file")
    size = p.stat().st_size
    if size > MAX_USER_FILE_BYTES:
        raise BadInput(f"{path}: {size:,} bytes is too large for a hardware file (limit {MAX_USER_FILE_BYTES:,})")
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text (byte {e.start})") from None


def read_user_file(path: str | Path) -> dict:
    """The file's fields as a dict, parsed and validated (BadInput naming the file and field)."""
    try:
        data = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{path}: not valid TOML: {e}") from None
    validate(data, str(path))
    return data


def build(data: dict, origin: str) -> HardwareSpec:
    """HardwareSpec from a validated dict; the profile of its name, if any, is laid over it."""
    data = {**data, "origin_file": origin}
    try:
        return _with_profile(data["name"], data)
    except (TypeError, ValueError) as e:
        raise BadInput(f"{origin}: {e}") from None


def check_user_file(path: str | Path) -> UserFileCheck:
    """The validated entry and the list of warnings (sources are optional but recommended)."""
    data = read_user_file(path)
    return UserFileCheck(spec=build(data, str(path)), warnings=tuple(source_warnings(data, str(path))))


def load_user_file(path: str | Path) -> HardwareSpec:
    """What get_hardware("./mine.toml") returns."""
    return check_user_file(path).spec


def source_warnings(data: dict, origin: str) -> list[str]:
    numbers = set(numeric_paths(data))
    sources = data.get("sources", {})
    out = [f"{origin}: no source for {p} (say where the number comes from)" for p in sorted(numbers - set(sources))]
    out += [f"{origin}: source for {p}, which is not a number in the file" for p in sorted(set(sources) - numbers)]
    return out


# ---------------------------------------------------------------- validation

def _unknown(origin: str, where: str, key: str, valid) -> BadInput:
    near = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.5)
    hint = f"; did you mean {near[0]!r}?" if near else f"; valid: {', '.join(sorted(valid))}"
    return BadInput(f"{origin}: unknown {where} {key!r}{hint}")


def _check_value(origin: str, where: str, value, kind: str) -> None:
    if kind in ("str", "bool"):
        want = str if kind == "str" else bool
        if not isinstance(value, want):
            raise BadInput(f"{origin}: {where} must be a {'string' if kind == 'str' else 'true/false'}, "
                           f"got {value!r}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadInput(f"{origin}: {where} must be a number, got {value!r}")
    if kind == "positive" and value <= 0:
        raise BadInput(f"{origin}: {where} must be positive, got {value!r}")
    if kind == "nonnegative" and value < 0:
        raise BadInput(f"{origin}: {where} must not be negative, got {value!r}")
    if kind == "count" and (not isinstance(value, int) or value < 1):
        raise BadInput(f"{origin}: {where} must be a whole number >= 1, got {value!r}")
    top = next((CEILINGS[p] for p in where.replace("[", ".").split(".") if p in CEILINGS), None)
    if top is not None and value > top:
        raise BadInput(f"{origin}: {where} {value:g} exceeds the supported {top:g} (far beyond any device built)")


def _check_choice(origin: str, where: str, key: str, value: str) -> None:
    if key in CHOICES and value not in CHOICES[key]:
        raise _unknown(origin, where, value, CHOICES[key])


def _check_table(origin: str, where: str, table, schema: dict[str, str], required=()) -> None:
    if not isinstance(table, dict):
        raise BadInput(f"{origin}: {where} must be a table, got {table!r}")
    for key, value in table.items():
        if key not in schema:
            raise _unknown(origin, f"key in {where}:", key, schema)
        _check_value(origin, f"{where}.{key}", value, schema[key])
        _check_choice(origin, f"{where}.{key}", key, value)
    missing = [k for k in required if k not in table]
    if missing:
        raise BadInput(f"{origin}: {where} is missing required field {missing[0]!r}")


def _check_tiers(origin: str, tiers) -> None:
    if not isinstance(tiers, list) or not tiers:
        raise BadInput(f"{origin}: memory_tiers must be one or more [[memory_tiers]] tables")
    seen = set()
    for i, tier in enumerate(tiers):
        label = f"memory_tiers[{i}]" + (f" ({tier.get('name')!r})" if isinstance(tier, dict) and "name" in tier else "")
        _check_table(origin, label, tier, TIER_KEYS, required=tuple(TIER_KEYS))
        if tier["name"] in seen:
            raise BadInput(f"{origin}: memory_tiers: two tiers are named {tier['name']!r}")
        seen.add(tier["name"])


def _check_field(origin: str, key: str, value) -> None:
    kind = FIELD_KINDS[key]
    if kind == "tiers":
        _check_tiers(origin, value)
    elif kind == "interconnect":
        _check_table(origin, "interconnect", value, LINK_KEYS, required=("name", "bandwidth_bytes_per_s",
                                                                           "latency_s", "topology"))
    elif kind in ("dtypes", "numbers", "strings"):
        if not isinstance(value, dict):
            raise BadInput(f"{origin}: {key} must be a table, got {value!r}")
        for k, v in value.items():
            if kind == "dtypes" and k not in DTYPES:
                raise _unknown(origin, f"dtype in {key}:", k, DTYPES)
            _check_value(origin, f"{key}.{k}", v, {"dtypes": "positive", "numbers": "nonnegative",
                                                   "strings": "str"}[kind])
    else:
        _check_value(origin, key, value, kind)
        _check_choice(origin, key, key, value)


def validate(data: dict, origin: str) -> None:
    """Raise BadInput (one line, naming `origin` and the field) unless `data` is a valid entry."""
    for key in data:
        if key not in FIELD_KINDS:
            raise _unknown(origin, "field", key, FIELD_KINDS)
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise BadInput(f"{origin}: missing required field {missing[0]!r}")
    for key, value in data.items():
        _check_field(origin, key, value)
    if not data["peak_flops"]:
        raise BadInput(f"{origin}: peak_flops needs at least one dtype ({', '.join(DTYPES)})")
    if not data["name"].strip() or data["name"] != data["name"].strip().lower():
        raise BadInput(f"{origin}: name must be a non-empty lower-case name, got {data['name']!r}")
    check_name(data["name"], f"{origin}: name")


# ---------------------------------------------------------------- $LLMBENCH_HARDWARE_PATH

def path_entries(hardware_path: str, taken: dict[str, Path]) -> dict[str, dict]:
    """name -> validated dict for every *.toml in the folders of `hardware_path` (os.pathsep-
    separated); `taken` maps names already defined (shipped entries) to their files."""
    taken, out, seen = dict(taken), {}, set()
    for folder in [f for f in hardware_path.split(os.pathsep) if f.strip()]:
        d = Path(folder).expanduser()
        if not d.is_dir():
            raise BadInput(f"${HARDWARE_PATH_VAR}: {folder} is not a folder")
        if d.resolve() in seen:  # the same folder twice is read once (it would clash with itself)
            continue
        seen.add(d.resolve())
        for path in sorted(d.glob("*.toml")):
            data = read_user_file(path)
            name = data["name"]
            if name in taken:
                raise BadInput(f"{path} defines hardware {name!r}, already defined by {taken[name]}; "
                               f"give one of them another 'name'")
            taken[name] = path
            out[name] = {**data, "origin_file": str(path)}
    return out


# ---------------------------------------------------------------- writing

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _key(k: str) -> str:
    return k if k and set(k) <= _BARE else _string(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return _string(str(v))


def to_toml(data: dict) -> str:
    """TOML text of a spec dict (scalars, tables, then [[memory_tiers]]); tomllib reads it back equal."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items()
             if v is not None and not isinstance(v, (dict, list, tuple))]
    for k in ("peak_flops", "peak_flops_sparse", "efficiency", "memory_tiers", "interconnect", "sources"):
        tables = data.get(k) if isinstance(data.get(k), (list, tuple)) else [data.get(k)]
        for table in [t for t in tables if isinstance(t, dict) and (t or k == "peak_flops")]:
            head = f"[[{k}]]" if k == "memory_tiers" else f"[{k}]"
            lines += ["", head] + [f"{_key(a)} = {_value(b)}" for a, b in table.items()]
    return "\n".join(lines) + "\n"


__all__ = ["MAX_USER_FILE_BYTES", "UserFileCheck", "check_user_file", "load_user_file",
           "path_entries", "read_user_file", "to_toml", "validate"]
