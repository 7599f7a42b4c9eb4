"""The llmbench command line: one argparse front end. Thin: parse into a Workload (or an area's
dataclass), call one function, print.

    llmbench --help
    llmbench predict train --model gpt2-xl --hardware a100-80gb --batch 64 --seq 1024 --devices 8

argparse, not typer/click: it is in the standard library, starts in a few milliseconds (typer
builds a pydantic adapter per option: 0.3-0.8 s per call here) and needs no second fast path. Each
area adds its commands in its own `cli.py` (`register(cli)`), which imports nothing heavy (no
torch, numpy, rich or matplotlib at import time); options and defaults come from the dataclasses
(llmbench/_cliutil.py).
"""
from __future__ import annotations

import os
import sys

import importlib

from llmbench import __version__
from llmbench._cliutil import Group, Parser, fail_one_line, one_line

#: the areas whose cli.py registers commands, in order (serve after perfmodel: it adds `plan serve`)
AREAS = ("models", "hardware", "perfmodel", "measure", "streaming", "studies", "results", "serve")
#: top-level command -> the areas that register it; a command builds only its areas' parsers
#: (start-up time: issue 23), anything else (no command, --help, a typo) builds them all.
#: tests/test_cli.py holds this table against the full build.
COMMAND_AREAS = {"models": ("models",), "hardware": ("hardware",), "predict": ("perfmodel",),
                 "project": ("perfmodel",), "validate": ("perfmodel",), "calibrate": ("perfmodel",),
                 "plan": ("perfmodel", "serve"), "serve": ("perfmodel", "serve"), "measure": ("measure",),
                 "stream": ("streaming",), "study": ("studies",), "reproduce": ("studies",),
                 "results": ("results",), "report": ()}
#: errors at a user border: bad options or files, a file system that refuses (sqlite3.Error too)
USER_ERRORS = (ValueError, KeyError, OSError, UnicodeError, RecursionError, MemoryError)


def _user_error(e: BaseException) -> bool:
    if isinstance(e, USER_ERRORS):
        return True
    sqlite3 = sys.modules.get("sqlite3")  # imported only if a command used a database
    return sqlite3 is not None and isinstance(e, sqlite3.Error)


def _area(name: str):
    return importlib.import_module(f"llmbench.{name}.cli")


def build(argv: list[str] | None = None) -> Parser:
    """The parser: of the command `argv` names (its areas only), else of every command."""
    p = Parser(prog="llmbench", description="How fast will this LLM train or run on this hardware, "
               "and why? Measure, predict, stream, serve. Every command has --json; bad input is one "
               "line and exit code 2.")
    p.add_argument("--version", action="version", version=f"llmbench {__version__}")
    root = Group(p)
    first = next((x for x in argv or [] if not x.startswith("-")), None)
    only = COMMAND_AREAS.get(first) if first else None
    for name in AREAS if only is None else only:
        _area(name).register(root)
    if only is None or first == "report":  # report imports no engine: studies passes its predictor
        _area("report").register(root, predict_missing=_area("studies").predict_missing)
    return p


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input is one line on stderr and exit code 2, never a traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        a = build(argv).parse_args(argv)
        if a._fn is None:  # a group without its command: its help
            a._parser.print_help()
            return
        rv = a._fn(a)
        if isinstance(rv, int) and not isinstance(rv, bool) and rv:
            sys.exit(rv)
    except KeyboardInterrupt:
        print("interrupted: every finished result is recorded; rerun the same command to go on",
              file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # `llmbench ... | head`
        try:
            sys.stdout = open(os.devnull, "w")
        finally:
            sys.exit(0)
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - a bug: one line, the traceback only when asked
        if _user_error(e):
            fail_one_line(e)
        if os.environ.get("LLMBENCH_DEBUG"):
            raise
        print(f"internal error: {type(e).__name__}: {one_line(e)} (LLMBENCH_DEBUG=1 shows the "
              "traceback; please report it)", file=sys.stderr)
        sys.exit(1)
