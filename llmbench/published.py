"""The one reader of the published tables (llmbench/reference/published.csv, published_v2.csv) and
the one parser of their values; every user (perfmodel validation and calibration, results, studies,
report) reads them here, and tests/test_architecture.py holds that no other module opens them.

    from llmbench.published import PUBLISHED_V2_CSV, parse_range, published_rows
    rows = published_rows(PUBLISHED_V2_CSV)       # list of dicts of str, one per row (or PUBLISHED_CSV)
    parse_range(rows[0]["value"])                 # (low, high) or None for a text trend

A table is checked where it is read: a header without the columns every user needs, a row with
more or fewer cells than the header, an empty or repeated id, a row without its source, its value,
metric or unit, or a task other than train / infer is one BadInput line naming the file and line.
"""
from __future__ import annotations

import csv
import io
from functools import lru_cache
from pathlib import Path

from llmbench._files import read_small_text
from llmbench.errors import BadInput

REFERENCE = Path(__file__).resolve().parent / "reference"
PUBLISHED_CSV = REFERENCE / "published.csv"
PUBLISHED_V2_CSV = REFERENCE / "published_v2.csv"
#: columns every user of a published table reads (published_v2.csv adds the layout columns)
REQUIRED = ("id", "source", "system", "model", "task", "metric", "value", "unit", "notes")
#: cells a row must fill: an id to cite it by, its source (house rule: every number carries one)
FILLED = ("id", "source", "system", "model", "task", "metric", "value", "unit")
TASKS = ("train", "infer")
LIMIT_BYTES = 4_000_000  # published_v2.csv is ~0.2 MB


def published_rows(path: str | Path) -> list[dict]:
    """The rows of the published table `path` (PUBLISHED_CSV, PUBLISHED_V2_CSV: every caller names
    its table) as dicts of str, checked; a fresh copy each call (the parsed file is cached per path
    and modification time)."""
    p = Path(path).resolve()
    try:
        mtime = p.stat().st_mtime_ns
    except OSError:
        mtime = None  # read_small_text says why, in one line
    return [dict(r) for r in _rows(str(p), mtime)]


@lru_cache(maxsize=8)
def _rows(path: str, mtime_ns: int | None) -> tuple[dict, ...]:
    name = Path(path).name
    reader = csv.DictReader(io.StringIO(read_small_text(path, "published table", LIMIT_BYTES), newline=""))
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
    if missing:
        raise BadInput(f"{name}: the header lacks column(s) {', '.join(missing)}")
    rows, seen = [], {}
    for row in reader:
        check_row(row, name, reader.line_num, seen)
        rows.append(row)
    return tuple(rows)


def check_row(row: dict, name: str, line: int, seen: dict) -> None:
    """BadInput (one line: file, line, what) for a malformed row; `seen` maps ids to their lines."""
    where = f"{name} line {line}"
    columns = [k for k in row if k is not None]
    cells = len(columns) + len(row.get(None) or ()) - sum(row[k] is None for k in columns)
    if cells != len(columns):  # csv.DictReader: extra cells under the key None, missing ones None
        raise BadInput(f"{where}: {cells} cells, the header has {len(columns)} columns")
    empty = [c for c in FILLED if not row[c].strip()]
    if empty:
        raise BadInput(f"{where} ({row['id'] or 'no id'}): empty {', '.join(empty)}")
    if row["id"] in seen:
        raise BadInput(f"{where}: id {row['id']!r} repeats line {seen[row['id']]}")
    if row["task"] not in TASKS:
        raise BadInput(f"{where} ({row['id']}): task {row['task']!r}, not one of {', '.join(TASKS)}")
    seen[row["id"]] = line


def parse_range(value) -> tuple[float, float] | None:
    """A published value as (low, high): '14000' -> (14000, 14000), '1.8-2.0' -> (1.8, 2.0), a
    number -> (x, x); text that is neither (a trend) -> None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), float(value)
    text = str(value).strip()
    try:
        return float(text), float(text)
    except ValueError:
        pass
    parts = text.split("-")
    if len(parts) == 2:
        try:
            return float(parts[0]), float(parts[1])
        except ValueError:
            return None
    return None
