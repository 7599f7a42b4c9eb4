"""Helpers shared by the typer CLI and its typer-free fast path: JSON output and one-line errors."""
from __future__ import annotations

import json
import sys

#: bad input: printed as `error: <first arg>` on one line, exit code 2
BAD_INPUT = (ValueError, FileNotFoundError, KeyError)


def json_default(o):
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def emit_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=json_default))


def console():
    """A rich Console; 120 columns when the output is not a terminal (pipes, docs, CI logs)."""
    from rich.console import Console

    c = Console()
    return c if c.is_terminal else Console(width=120)


def fail_one_line(e: BaseException, code: int = 2) -> None:
    msg = e.args[0] if e.args else str(e)
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)
