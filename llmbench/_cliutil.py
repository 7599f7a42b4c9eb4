"""The pieces every area's CLI is built from: argparse parsers whose options come from the
dataclasses' fields (each default declared once, in the dataclass), JSON output, tables, one-line
errors. Stdlib only at import time, so any `llmbench ...` starts in a few tens of milliseconds.

An area's `cli.py` has `register(cli: Group)` that adds its commands:

    def register(cli):
        g = cli.group("results", "Results store: list, export, load published values.")
        p = g.command("list", results_list)          # help: results_list's docstring
        add_db(p); add_json(p)

A command is a function of the parsed namespace; what it returns is ignored, an int is the exit code.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import MISSING, fields

from llmbench._json import strict
from llmbench.errors import BadInput

DB_HELP = "results database (default: $LLMBENCH_DB, else ./llmbench-results.db)"
DEVICE_HELP = "torch device: auto (the accelerator if any), cpu, cuda, cuda:1, xpu, hpu, mps"


class Parser(argparse.ArgumentParser):
    """argparse whose errors are BadInput (printed as one line, exit code 2)."""

    def __init__(self, *args, **kw):
        kw.setdefault("allow_abbrev", False)
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kw)

    def error(self, message):
        raise BadInput(f"{self.prog}: {message}")


class Group:
    """A command with subcommands (`llmbench results list`)."""

    def __init__(self, parser: Parser):
        self.parser = parser
        self._sub = parser.add_subparsers(metavar="COMMAND", title="commands")
        parser.set_defaults(_fn=None, _parser=parser)

    def command(self, name: str, fn, help: str | None = None) -> Parser:
        doc = (fn.__doc__ or "").strip()
        first = help or doc.split("\n\n")[0].replace("\n", " ")
        p = self._sub.add_parser(name, help=first, description=doc or first)
        p.set_defaults(_fn=fn, _parser=p)
        return p

    def group(self, name: str, help: str) -> "Group":
        return Group(self._sub.add_parser(name, help=help, description=help))


# ---------------------------------------------------------------- value types

def int_in(low=None, high=None, name: str = "value"):
    """argparse type: an integer in [low, high]."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = _whole_float(text)
        _check_range(v, low, high, text)
        return v
    parse.__name__ = name
    return parse


def float_in(low=None, high=None, name: str = "value"):
    """argparse type: a finite number in [low, high] (no NaN, no infinity)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        _check_range(v, low, high, text)
        return v
    parse.__name__ = name
    return parse


def _whole_float(text: str) -> int:
    """'1e8' -> 100000000: an integer written as a float (as the issue's examples are)."""
    try:
        f = float(text)
    except ValueError:
        f = math.nan
    if not math.isfinite(f) or not f.is_integer() or abs(f) >= 2.0 ** 63:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}")
    return int(f)


def _check_range(v, low, high, text):
    if low is not None and high is not None and v > high >= 1024:
        from llmbench.point import limit_text

        raise argparse.ArgumentTypeError(limit_text("", v, high).strip())
    if low is not None and v < low or high is not None and v > high:
        rng = f">= {low}" if high is None or high >= 1024 else f"<= {high}" if low is None else f"in [{low}, {high}]"
        raise argparse.ArgumentTypeError(f"must be {rng}, got {text}")


def int_list(low: int = 1):
    """argparse type: one integer or a comma-separated list ('1,2,4')."""
    one = int_in(low)

    def parse(text: str) -> list[int]:
        parts = [t.strip() for t in str(text).split(",") if t.strip()]
        if not parts:
            raise argparse.ArgumentTypeError("needs at least one value")
        return [one(t) for t in parts]
    parse.__name__ = "list"
    return parse


# ---------------------------------------------------------------- options from dataclasses

def field_options(cls) -> dict:
    """name -> dataclasses.Field of a dataclass, with nested dataclass fields flattened (a
    Workload's layout knobs become --tp, --pp, ...)."""
    out = {}
    for f in fields(cls):
        if f.metadata:
            out[f.name] = f
        elif f.default_factory is not MISSING and hasattr(f.default_factory, "__dataclass_fields__"):
            out.update(field_options(f.default_factory))
    return out


def add_fields(p: argparse.ArgumentParser, cls, names, *, defaults: dict | None = None,
               required: tuple = (), help: dict | None = None, aliases: dict | None = None,
               many: tuple = ()) -> None:
    """Options for the dataclass fields `names`, typed, ranged and documented from each field's
    metadata (llmbench.point.opt); the default is the dataclass's unless `defaults` overrides it
    for this command; `aliases` adds flag names (--prompt-len for seq_len); a field in `many`
    takes a comma-separated list (a sweep: --batch 1,8,32) and parses to a list."""
    opts = field_options(cls)
    defaults, help, aliases = defaults or {}, help or {}, aliases or {}
    for name in names:
        f = opts[name]
        m = f.metadata
        default = defaults.get(name, f.default if f.default is not MISSING else None)
        kw = {"dest": name, "default": default}
        text = help.get(name, m["help"])
        if isinstance(default, bool):
            kw["action"] = argparse.BooleanOptionalAction if default else "store_true"
        elif name in many:
            kw["type"] = int_list(m["low"] if m["low"] is not None else 1)
            kw["default"] = None if default is None else [default]
            text += " (a comma list sweeps)"
        elif m["integer"]:
            kw["type"] = int_in(m["low"], m["high"], name)
        elif m["low"] is not None:
            kw["type"] = float_in(m["low"], m["high"], name)
        if m["choices"]:
            kw["choices"] = m["choices"]
        unit = f" [{m['unit']}]" if m["unit"] else ""
        if name in required:
            kw["required"] = True
        elif default is not None and not isinstance(default, bool):
            text += f" (default {default})"
        flag = m["flag"] or "--" + name.replace("_", "-")
        flags = [flag] + ([f"--{name.replace('_', '-')}"] if m["flag"] else []) + aliases.get(name, [])
        p.add_argument(*flags, help=text + unit, **kw)


def values(a: argparse.Namespace, names) -> dict:
    """The parsed values of `names` (for building a dataclass)."""
    return {n: getattr(a, n) for n in names}


def add_json(p) -> None:
    p.add_argument("--json", action="store_true", help="JSON output")


def add_db(p, help: str = DB_HELP) -> None:
    p.add_argument("--db", default=None, help=help)


def add_device(p) -> None:
    p.add_argument("--device", default="auto", help=DEVICE_HELP)


# ---------------------------------------------------------------- output

# metrics shown in the table, first present wins
_HEADLINE = ("latency_s_p50", "tokens_per_s", "samples_per_s", "fwd_bwd_tflops", "achieved_tflops",
             "step_time_s", "fwd_bwd_time_s")


def headline(metrics: dict) -> str:
    """The one or two figures that say most: a rate or time, then the fraction of a ceiling."""
    out = []
    for name in _HEADLINE:
        v = metrics.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(f"{name}={v:.4g}")
            break
    for name in ("frac_of_ceiling", "mfu", "scaling_efficiency"):
        v = metrics.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(f"{name}={v:.3g}")
            break
    if not out:
        for name, v in metrics.items():
            return f"{name}={v:.4g}" if isinstance(v, float) else f"{name}={v}"
    return " ".join(out)


def json_default(o):
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def emit_json(obj) -> None:
    print(json.dumps(strict(obj), indent=2, default=json_default, allow_nan=False))


def console(stderr: bool = False):
    """A rich Console that never parses markup in what it prints (user text with [brackets] is
    printed as is); 120 columns when the output is not a terminal (pipes, docs, CI logs)."""
    from rich.console import Console

    c = Console(stderr=stderr, markup=False, highlight=False)
    return c if c.is_terminal else Console(stderr=stderr, markup=False, highlight=False, width=120)


def table(title: str | None, columns, rows, *, right: tuple = ()) -> None:
    """Print a rich table; cells are plain text (no markup)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(title) if title else None)
    for c in columns:
        t.add_column(Text(str(c)), justify="right" if c in right else "left", overflow="fold")
    for r in rows:
        t.add_row(*[Text("-" if v is None else str(v)) for v in r])
    console().print(t)


def pairs(items) -> None:
    """Print `key  value` lines, keys aligned (plain text: no markup)."""
    items = [(str(k), str(v)) for k, v in items]
    w = max((len(k) for k, _ in items), default=0)
    for k, v in items:
        print(f"{k:<{w}}  {v}")


def one_line(e: BaseException) -> str:
    msg = e.args[0] if e.args and isinstance(e.args[0], str) else str(e) or type(e).__name__
    return " ".join(str(msg).split())[:2000]


def fail_one_line(e: BaseException, code: int = 2) -> None:
    print(f"error: {one_line(e)}", file=sys.stderr)
    sys.exit(code)
