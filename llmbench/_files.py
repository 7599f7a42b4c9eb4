"""Reading a small file the user points at: one rule for every reader (profiles, overlays).

A directory, a device or FIFO (a profile linked to /dev/zero), a missing file, a file over the
reader's limit or non-UTF-8 bytes is one `BadInput` line naming the file, decided before reading."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from llmbench.errors import BadInput


def read_small_text(path: str | os.PathLike, what: str, limit_bytes: int = 1_000_000) -> str:
    """The UTF-8 text of the regular file `path` (at most `limit_bytes`); `what` names it in errors."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise BadInput(f"{what} {p}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{what} {p}: not a regular file")
    if st.st_size > limit_bytes:
        raise BadInput(f"{what} {p}: {st.st_size:,} bytes is too large (limit {limit_bytes:,})")
    try:
        with open(p, "rb") as f:
            data = f.read(limit_bytes + 1)
    except OSError as e:
        raise BadInput(f"{what} {p}: {e.strerror or e}") from None
    if len(data) > limit_bytes:
        raise BadInput(f"{what} {p}: more than {limit_bytes:,} bytes (limit)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} {p}: not UTF-8 text (byte {e.start})") from None
