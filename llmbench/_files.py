"""Reading a file the user points at: one rule for every reader (profiles, overlays, study specs,
traces, calibration rows).

A missing file, a directory, a device or FIFO (a profile linked to /dev/zero, read forever), a file
over the reader's limit or non-UTF-8 bytes is one `BadInput` line naming the file and what it
should have been, decided from stat() before reading."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from llmbench.errors import BadInput


def regular_file(path: str | os.PathLike, what: str) -> tuple[Path, os.stat_result]:
    """(path, its stat) when `path` is a regular file; `what` ("profile", "study spec", "trace
    file") names it in the one-line error otherwise. Large files (traces, result rows) are then
    read by their reader, streaming; small ones by read_small_text."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise BadInput(f"no such {what}: {p}") from None
    except OSError as e:
        raise BadInput(f"{what} {p}: cannot read it ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{what} {p}: is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{what} {p}: not a regular file")
    return p, st


def read_small_text(path: str | os.PathLike, what: str, limit_bytes: int = 1_000_000) -> str:
    """The UTF-8 text of the regular file `path` of at most `limit_bytes` (checked before and
    while reading: a file may grow); `what` names it in errors."""
    p, st = regular_file(path, what)
    if st.st_size > limit_bytes:
        raise BadInput(f"{what} {p}: {st.st_size:,} bytes; a {what} is at most {limit_bytes:,}")
    try:
        with open(p, "rb") as f:
            data = f.read(limit_bytes + 1)
    except OSError as e:
        raise BadInput(f"{what} {p}: cannot read it ({e.strerror or e})") from None
    if len(data) > limit_bytes:
        raise BadInput(f"{what} {p}: over {limit_bytes:,} bytes; a {what} is at most that")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} {p}: not UTF-8 text (byte {e.start}: {data[e.start]:#04x})") from None


def read_small_json(path: str | os.PathLike, what: str, limit_bytes: int = 1_000_000):
    """The JSON value of the small regular file `path` (read_small_text's rules); invalid JSON is
    one BadInput line naming the file, with the parser's message and line."""
    try:
        return json.loads(read_small_text(path, what, limit_bytes))
    except json.JSONDecodeError as e:
        raise BadInput(f"{what} {path}: not valid JSON ({e.msg} at line {e.lineno})") from None
