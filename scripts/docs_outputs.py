"""The pasted outputs of the analytical commands in docs/*.md, rerun: every fenced block line
`$ llmbench predict|plan|serve|project|models ...` is run again (through bash, as `python -m
llmbench` of this interpreter, with an empty $LLMBENCH_HOME) and its output compared with the lines pasted under it (up to the next `$ ` line or the
end of the block). These commands are deterministic and need no torch, so a pasted output that
differs is stale: the code or the shipped calibration moved since it was pasted.

    .venv/bin/python scripts/docs_outputs.py            # list the stale blocks (exit 1 if any)
    .venv/bin/python scripts/docs_outputs.py --write    # paste the fresh outputs
    .venv/bin/python scripts/docs_outputs.py --only docs/serve.md

Skipped: a command with a shell comment that says the output was cut or is an excerpt, and a
pasted output holding a `...` line (an excerpt by hand). README.md's tour pastes a few lines of each
output (`$ .venv/bin/llmbench ...`): each is compared with the fresh line of the same label. tests/test_docs_outputs.py runs the check.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("predict", "plan", "serve", "project", "models")
PROMPT = re.compile(r"^\$ (?:\.venv/bin/)?llmbench (\S+)")
EXCERPT = re.compile(r"#.*\b(cut|excerpt|lines? of|first|head)\b", re.I)


@dataclass
class Paste:
    path: Path
    start: int
    """index of the command line in the file's lines"""
    end: int
    """index one past the pasted output"""
    command: str
    output: list[str]
    command_lines: int = 1
    """lines the command takes in the file (a trailing backslash continues it)"""


def pastes(path: Path) -> list[Paste]:
    """The checkable command pastes of one Markdown file."""
    lines = path.read_text().split("\n")
    out, fence = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
            continue
        m = PROMPT.match(line) if fence else None
        if not m or m.group(1) not in COMMANDS or EXCERPT.search(line) or " --db " in line:
            continue
        if line.startswith("$ .venv/") and path.name != "README.md":
            continue  # the pages' terminal renderings (rich tables at the terminal's width)
        command, j = re.sub(r"^\.venv/bin/llmbench ", "llmbench ", line[2:]), i + 1
        while command.endswith("\\") and j < len(lines):  # a command continued on the next line
            command, j = command[:-1] + lines[j].strip(), j + 1
        k = j
        while k < len(lines) and not lines[k].startswith("```") and not lines[k].startswith("$ "):
            k += 1
        body = lines[j:k]
        if not body or "..." in (b.strip() for b in body):
            continue
        if " --json" in command and _json(body) is None:
            continue  # a summary of the JSON written by hand
        out.append(Paste(path, i, k, command, body, j - i))
    return out


def run(command: str, exit_line: bool) -> list[str] | None:
    """The command's stdout and stderr, as a user's terminal shows them (no colour, 100 columns),
    with `exit N` after them when the paste shows the exit code; None when it names a file the
    page made beforehand (a relative path that is not here)."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    for k in ("LLMBENCH_PROFILES", "LLMBENCH_HARDWARE_PATH", "LLMBENCH_DB"):
        env.pop(k, None)
    cmd = re.sub(r"\s+#[^'\"]*$", "", command)  # a trailing shell comment
    cmd = re.sub(r"^llmbench ", f"{shlex.quote(sys.executable)} -m llmbench ", cmd)  # this interpreter's
    with tempfile.TemporaryDirectory() as home:  # no user profile or hardware file in the way
        p = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env={**env, "LLMBENCH_HOME": home},
                           capture_output=True, text=True, timeout=120)
    text = (p.stdout + p.stderr).rstrip("\n")
    if p.returncode and re.search(r"no such (\S+ )?file|no such config", text):
        return None
    lines = text.split("\n") if text else []
    return lines + [f"exit {p.returncode}"] if exit_line else lines


def _json(lines: list[str]):
    try:
        return json.loads("\n".join(lines))
    except ValueError:
        return None


def _keys_of(fresh, shown):
    """fresh cut to the keys a paste shows ("--json, a few keys"), nested objects alike."""
    if isinstance(fresh, dict) and isinstance(shown, dict):
        return {k: _keys_of(fresh.get(k), v) for k, v in shown.items()}
    return fresh


def excerpt(got: list[str], pasted: list[str]) -> list[str]:
    """README's tour pastes a few lines of each output: each pasted line is replaced by the fresh
    line with the same label (the text before the first run of spaces)."""
    label = lambda x: re.split(r"\s{2,}", x.strip(), maxsplit=1)[0]  # noqa: E731
    fresh = {label(g): g for g in got}
    return [fresh.get(label(p), p) for p in pasted]


def expected(got: list[str], pasted: list[str]) -> list[str]:
    """What the paste should hold: the fresh output, cut to the keys the paste shows when it is
    JSON; the wall time of a plan serve header ("ranked by cost (0.8 s)") kept as pasted."""
    shown, fresh = _json(pasted), _json(got)
    if isinstance(shown, dict) and isinstance(fresh, dict):
        got = json.dumps(_keys_of(fresh, shown), indent=2).split("\n")
    wall = re.compile(r"(?<=ranked by )\S+ \(\d+(\.\d+)? s\)")
    return [wall.sub(lambda m: (wall.search(p) or m).group(0), g) if wall.search(g) else g
            for g, p in zip(got, pasted + [""] * len(got))]


NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?")


def same(a: list[str], b: list[str], rel: float = 1e-6) -> bool:
    """Equal line by line, numbers within `rel` of each other: a full-precision float printed on
    another machine (another numpy SIMD path) may differ in its last digits."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        if NUMBER.sub("#", x) != NUMBER.sub("#", y):
            return False
        for u, v in zip(NUMBER.findall(x), NUMBER.findall(y)):
            fu, fv = float(u.replace(",", "")), float(v.replace(",", ""))
            if abs(fu - fv) > rel * max(abs(fu), abs(fv)) + 1e-12:
                return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="paste the fresh outputs into the files")
    ap.add_argument("--only", action="append", help="a docs file (repeatable); default docs/*.md")
    a = ap.parse_args(argv)
    files = [ROOT / f for f in a.only] if a.only else [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"error: not a file: {', '.join(missing)}", file=sys.stderr)
        return 2
    stale = 0
    for path in files:
        fresh = {}
        for p in pastes(path):
            got = run(p.command, exit_line=bool(re.fullmatch(r"exit \d+", p.output[-1])))
            if got is None:
                print(f"{path.relative_to(ROOT)}:{p.start + 1}: not run here (it reads a file the page made)")
                continue
            got = excerpt(got, p.output) if path.name == "README.md" else expected(got, p.output)
            if not same(got, p.output):
                stale += 1
                first = next((i for i, (x, y) in enumerate(zip(got, p.output)) if x != y), min(len(got), len(p.output)))
                print(f"{path.relative_to(ROOT)}:{p.start + 1}: stale: $ {p.command}")
                print(f"    pasted: {p.output[first] if first < len(p.output) else '(nothing)'}")
                print(f"    now:    {got[first] if first < len(got) else '(nothing)'}")
                fresh[p.start + p.command_lines] = (p.end, got)
        if a.write and fresh:
            lines = path.read_text().split("\n")
            for start in sorted(fresh, reverse=True):
                end, got = fresh[start]
                lines[start:end] = got
            path.write_text("\n".join(lines))
    n = sum(len(pastes(p)) for p in files)
    print(f"{n} pasted outputs checked, {stale} stale" + (" (rewritten)" if a.write and stale else ""))
    return 1 if stale and not a.write else 0


if __name__ == "__main__":
    sys.exit(main())
