"""The directory of a disk ParameterStore: its lock, its manifest, its files (no torch).

    d = StoreDir.lock(Path("/tmp/st"))    # exclusive flock for the run's lifetime, or BadInput
    m = d.read_manifest()                  # None, or the validated manifest; BadInput if bad
    d.write_manifest(m)                    # tmp + fsync + os.replace + fsync of the directory
    d.close()                              # releases the lock

Safety rules (issue 12): one run per store at a time (`fcntl.flock` on `llmbench-store.lock`,
held until `close()` or the process dies; a second run gets "store X is in use by pid N"); files
that are not the store's are never written, replaced or removed (a `manifest.json` of another
program is refused; a file in the way of a store file is refused); a manifest is validated before
any of it is used: its format, types and ranges, group names that keep every file inside the
directory, and the size of every file it names. Every problem is one `BadInput` line naming the
file.
"""
from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import re
from pathlib import Path

from llmbench.errors import BadInput

FORMAT = "llmbench-stream-store/2"
LOCK_NAME = "llmbench-store.lock"
MANIFEST = "manifest.json"
DTYPE = "<f4"
"""every store file but the masks: little-endian IEEE float32"""
SLOTS = 2
MAX_MANIFEST_BYTES = 64 << 20
_GROUP = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")


def slot_file(group: str, slot: int) -> str:
    return f"{group}.{slot}.f32"


def mask_file(group: str) -> str:
    return f"{group}.mask.u8"


def store_files(groups: dict) -> list[str]:
    """Every data file of a store with these groups ({name: {"mask": bool, ...}})."""
    out = []
    for g, info in groups.items():
        out += [slot_file(g, s) for s in range(SLOTS)]
        if info.get("mask"):
            out.append(mask_file(g))
    return out


class StoreDir:
    """A locked store directory. Use `StoreDir.lock(path)`; `close()` unlocks."""

    def __init__(self, path: Path, fd: int):
        self.path, self._fd = path, fd

    @classmethod
    def lock(cls, path: Path) -> "StoreDir":
        if path.exists() and not path.is_dir():
            raise BadInput(f"--store: {path} is not a directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise BadInput(f"--store: cannot use {path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise BadInput(f"store {path} is in use by pid {holder}") from None
            raise BadInput(f"--store: cannot lock {path}: {e.strerror}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None

    # ------------------------------------------------------------ the manifest

    def read_manifest(self) -> dict | None:
        """The validated manifest, or None when the directory has none. A manifest that is not
        an llmbench store's, or is malformed, or names missing or wrong-sized files: BadInput."""
        mf = self.path / MANIFEST
        if not mf.exists() and not mf.is_symlink():
            return None
        if mf.is_symlink() or not mf.is_file():
            raise BadInput(f"{mf} is not a regular file; refusing to use it as a store manifest")
        if mf.stat().st_size > MAX_MANIFEST_BYTES:
            raise BadInput(f"{mf}: over {MAX_MANIFEST_BYTES >> 20} MiB, not a store manifest")
        try:
            m = json.loads(mf.read_bytes())
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise BadInput(f"{mf} is not an llmbench store manifest (not JSON); refusing to touch "
                           "this directory's files: choose another --store directory") from None
        if not isinstance(m, dict) or not str(m.get("format", "")).startswith("llmbench-stream-store/"):
            raise BadInput(f"{mf} is not an llmbench store manifest; refusing to touch this "
                           "directory's files: choose another --store directory")
        if m["format"] != FORMAT:
            raise BadInput(f"{mf}: store format {m['format']!r}, this llmbench reads {FORMAT!r}; "
                           "start a new store (another directory, or --overwrite)")
        validate(m, mf)
        return m

    def check_files(self, m: dict) -> None:
        """Every file the manifest names exists inside the directory with the right size."""
        for g, info in m["groups"].items():
            sizes = [(slot_file(g, s), 3 * info["numel"] * 4) for s in range(SLOTS)]
            if info["mask"]:
                sizes.append((mask_file(g), info["numel"]))
            for name, size in sizes:
                f = self.confined(name)
                if not f.is_file() or f.stat().st_size != size:
                    raise BadInput(f"store file {f} is missing or is not {size:,} bytes "
                                   f"(manifest {self.path / MANIFEST})")

    def confined(self, name: str) -> Path:
        """self.path / name, refused unless it stays inside the store directory."""
        f = self.path / name
        if os.path.dirname(name) or f.resolve().parent != self.path.resolve():
            raise BadInput(f"{self.path / MANIFEST}: file {name!r} is outside the store directory")
        return f

    def write_manifest(self, m: dict) -> None:
        """Atomically replace the manifest: write a tmp file, fsync, rename, fsync the directory."""
        tmp = self.path / (MANIFEST + ".tmp")
        with open(tmp, "w") as f:
            json.dump(m, f, allow_nan=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / MANIFEST)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # ------------------------------------------------------------ making room for a new store

    def prepare_new(self, groups: dict, *, overwrite: bool) -> None:
        """Before a new store is written here: an existing store is refused without `overwrite`
        and removed with it (only the files its manifest names); a file in the way is refused."""
        old = self.read_manifest()
        if old is not None:
            if not overwrite:
                what = "was being created when its run stopped" if not old["complete"] else \
                    f"holds a run at step {old['step']}"
                raise BadInput(f"store {self.path} {what}; pass --resume to continue it or "
                               "--overwrite to replace it")
            for name in store_files(old["groups"]) + [MANIFEST]:
                self.confined(name).unlink(missing_ok=True)
        for name in store_files(groups):
            f = self.path / name
            if f.exists() or f.is_symlink():
                raise BadInput(f"{f} exists and is not part of a store here; refusing to replace "
                               "it: choose an empty --store directory")


# ---------------------------------------------------------------- validation

def _bad(mf: Path, what: str) -> BadInput:
    return BadInput(f"{mf}: bad store manifest: {what}")


def _is_int(v, lo: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def validate(m: dict, mf: Path) -> None:
    """Types, ranges and names of a store manifest; BadInput naming the first problem."""
    need = {"step": _is_int, "adam_step": _is_int, "slot": lambda v: v in (0, 1),
            "complete": lambda v: isinstance(v, bool), "dtype": lambda v: v == DTYPE,
            "losses": lambda v: isinstance(v, list) and all(_is_num(x) for x in v),
            "skipped": lambda v: isinstance(v, list) and all(_is_int(x) for x in v),
            "adam": lambda v: isinstance(v, dict) and all(_is_num(x) for x in v.values()),
            "meta": lambda v: isinstance(v, dict),
            "loss_scale": lambda v: v is None or (isinstance(v, dict) and _is_num(v.get("scale"))),
            "groups": lambda v: isinstance(v, dict) and bool(v)}
    for key, ok in need.items():
        if key not in m or not ok(m[key]):
            raise _bad(mf, f"{key!r} is missing or has the wrong type or value")
    if m["adam_step"] > m["step"] or len(m["losses"]) != m["step"]:
        raise _bad(mf, "step, adam_step and losses disagree")
    for g, info in m["groups"].items():
        if not isinstance(g, str) or not _GROUP.match(g) or len(g) > 200:
            raise _bad(mf, f"group name {g!r} is not a plain file-name part")
        _validate_group(g, info, mf)


def _validate_group(g: str, info, mf: Path) -> None:
    if not isinstance(info, dict) or not _is_int(info.get("numel"), 1) or \
            not isinstance(info.get("mask"), bool) or not isinstance(info.get("params"), list):
        raise _bad(mf, f"group {g!r} needs numel (> 0), mask (bool) and params (list)")
    off = 0
    for p in info["params"]:
        ok = isinstance(p, list) and len(p) == 3 and isinstance(p[0], str) and \
            isinstance(p[1], list) and all(_is_int(d) for d in p[1]) and p[2] == off
        if not ok:
            raise _bad(mf, f"group {g!r}: parameter entry {str(p)[:80]!r} is malformed or "
                           "not contiguous")
        off += math.prod(p[1])
    if off != info["numel"]:
        raise _bad(mf, f"group {g!r}: parameters hold {off:,} elements, numel says {info['numel']:,}")
