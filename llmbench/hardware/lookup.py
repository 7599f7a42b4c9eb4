"""The catalog: shipped entries, the user files of $LLMBENCH_HARDWARE_PATH's folders and the
measured profiles of $LLMBENCH_HOME/hardware, looked up by name (get_hardware); profiles saved and
deleted; a catalog entry as a starting TOML (init_toml). Built on spec.py (the data classes and
files) and userfile.py (a user's file, checked), neither of which imports this module.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from .spec import (
    CATALOG_DIR, HARDWARE_PATH_VAR, HardwareSpec, UnknownHardware, _apply, _build, _read_profile, _read_toml,
    _with_profile, llmbench_home, merge_overrides, profile_path,
)
from .userfile import load_user_file, path_entries, to_toml, validate


def save_profile(name: str, overrides: dict, replace: bool = False) -> Path:
    """Write $LLMBENCH_HOME/hardware/<name>.json atomically and return its path.

    Merges into an existing profile unless `replace`; the result must still build a valid
    HardwareSpec. A name not in the catalog makes a measured-only device: it needs peak_flops and
    memory_tiers; display_name, vendor ('local') and kind (gpu if it has an hbm tier, else cpu)
    default when not given."""
    name = name.strip().lower()
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"bad hardware name for a profile: {name!r}")
    path = profile_path(name)
    current = {} if replace or not path.is_file() else _read_profile(path)
    merged = merge_overrides(current, overrides, str(path))
    merged.pop("overlay", None)
    _build(_apply(name, _base(name), merged, str(path)), str(path))  # validate first
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}.", suffix=".json.tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(merged, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    clear_cache()
    return path


def delete_profile(name: str) -> bool:
    """Remove a saved profile; True if there was one."""
    path = profile_path(name.strip().lower())
    existed = path.is_file()
    path.unlink(missing_ok=True)
    clear_cache()
    return existed


@lru_cache(maxsize=1)
def _shipped() -> dict[str, dict]:
    out = {}
    for path in sorted(CATALOG_DIR.glob("*.toml")):
        data = _read_toml(path)
        out[data.get("name", path.stem)] = data
    return out


def _base(name: str) -> dict | None:
    """The spec dict a profile of `name` lies over: shipped, or a $LLMBENCH_HARDWARE_PATH file."""
    if name in _shipped():
        return _shipped()[name]
    return path_entries(os.environ.get(HARDWARE_PATH_VAR, ""), {}).get(name)


@lru_cache(maxsize=64)
def _entry(name: str, home: str) -> HardwareSpec | None:
    """A shipped entry with its profile applied, built once (catalog() and get_hardware share the
    object). Reads only its own file unless the catalog is loaded already: `llmbench predict`
    parses one TOML, not all of them (start-up time, issue 9)."""
    if not _shipped.cache_info().currsize:
        path = CATALOG_DIR / f"{name}.toml"
        data = _read_toml(path) if path.is_file() else None
        if data is not None and data.get("name", name) == name:
            return _with_profile(name, data)
    data = _shipped().get(name)
    return _with_profile(name, data) if data is not None else None


@lru_cache(maxsize=8)
def _catalog(home: str, hardware_path: str) -> dict[str, HardwareSpec]:
    out = {name: _entry(name, home) for name in _shipped()}
    for name, data in path_entries(hardware_path, {n: CATALOG_DIR / f"{n}.toml" for n in out}).items():
        out[name] = _with_profile(name, data)
    profiles = Path(home) / "hardware"
    if profiles.is_dir():
        for path in sorted(profiles.glob("*.json")):
            if path.stem not in out:
                out[path.stem] = _with_profile(path.stem, None)
    return out


def catalog() -> dict[str, HardwareSpec]:
    """Every device: the shipped catalog files, the user files in $LLMBENCH_HARDWARE_PATH's folders,
    and measured-only devices, with $LLMBENCH_HOME/hardware/*.json applied (cached)."""
    return _catalog(str(llmbench_home()), os.environ.get(HARDWARE_PATH_VAR, ""))


def clear_cache() -> None:
    """Forget the cached catalog (after editing catalog files or profiles by hand)."""
    _shipped.cache_clear()
    _entry.cache_clear()
    _catalog.cache_clear()


catalog.cache_clear = clear_cache  # type: ignore[attr-defined]  # catalog() was an lru_cache before


def is_hardware_file(name: str) -> bool:
    """A --hardware value that names a file: it ends in .toml or contains a path separator."""
    name = name.strip()
    return name.lower().endswith(".toml") or "/" in name or os.sep in name


def get_hardware(name: str) -> HardwareSpec:
    """A catalog entry by name (exact, then a unique substring), or a user's hardware file by path
    (any value ending in .toml or holding a '/', or an existing file that is no catalog name)."""
    key = name.strip().lower()
    if key and not is_hardware_file(name) and not os.environ.get(HARDWARE_PATH_VAR):
        hw = _entry(key, str(llmbench_home()))  # a shipped name: its file alone (start-up time)
        if hw is not None:
            return hw
    if is_hardware_file(name):
        return load_user_file(name.strip())
    table = catalog()
    if key in table:
        return table[key]
    if key and Path(name.strip()).is_file():
        return load_user_file(name.strip())
    hits = [n for n in table if key and key in n]
    if len(hits) == 1:
        return table[hits[0]]
    import difflib

    near = hits or difflib.get_close_matches(key, list(table), n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(near)}?" if near else "; see 'llmbench hardware list'"
    raise UnknownHardware(f"unknown hardware {name!r}{hint}")


def init_toml(like: str, name: str | None = None) -> str:
    """The TOML text of catalog entry `like` (profile applied) as a starting point for a user's file;
    `name` renames it (needed before the file goes into a $LLMBENCH_HARDWARE_PATH folder)."""
    hw = get_hardware(like)
    data = {k: v for k, v in hw.to_dict().items() if v is not None and k not in ("overlay", "origin_file")}
    if name is not None:
        data["name"] = name.strip().lower()
        data["display_name"] = f"{hw.display_name} (edited copy)"
    validate(data, f"init_toml({like!r})")
    header = (f"# Hardware file started from llmbench's {hw.name!r} entry. Edit the numbers for your\n"
              f"# accelerator and keep a [sources] line for each; schema: docs/hardware.md.\n")
    return header + to_toml(data)

