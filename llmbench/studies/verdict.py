"""The verdict arithmetic of the seed-fidelity table (studies/fidelity.py): a published value or
range against a computed number, and the workload of a claim's flat table.

    numeric_verdict(1.75, "1.8-2.0")   # -> ("reproduced", -0.0278)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llmbench.point import LAYOUT_FIELDS, Workload


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What one check computed: the value as shown, its verdict, and where it comes from."""
    value: str
    verdict: str
    source: str
    detail: str = ""
    raw: object = None
    """the computed project value before judging (studies/fidelity_judge.py), None when not computed"""
    kind: str = ""
    """the judge that turned `raw` into the verdict ("" for input and missing rows)"""


def parse_published(text) -> tuple[float, float] | None:
    """'14000' -> (14000, 14000); '1.8-2.0' -> (1.8, 2.0); text that is not a number -> None."""
    s = str(text).replace(",", "").strip()
    for sep in ("-", "–"):
        a, _, b = s[1:].partition(sep)
        if b:
            try:
                return float(s[0] + a), float(b)
            except ValueError:
                return None
    try:
        v = float(s)
    except ValueError:
        return None
    return v, v


def numeric_verdict(value: float, published, tolerance: float = 0.25, factor: float = 2.0) -> tuple[str, float]:
    """(verdict, relative error) of a number against a published value or range."""
    lo, hi = parse_published(published)
    err = 0.0 if lo <= value <= hi else (value / (lo if value < lo else hi) - 1.0)
    if abs(err) <= tolerance + 1e-12:
        return "reproduced", err
    ratio = value / (lo if value < lo else hi) if value > 0 else 0.0
    return ("partial" if ratio and 1 / factor <= ratio <= factor else "contradicted"), err


def fmt(v) -> str:
    if isinstance(v, float):
        if v == 0 or not math.isfinite(v):
            return f"{v:g}"
        a = abs(v)
        if a >= 1e7:
            return f"{v:.4g}"
        return f"{v:,.0f}" if a >= 1000 else (f"{v:.3g}" if a >= 0.01 else f"{v:.3e}")
    return str(v)


def workload_of(base: dict, over: dict | None = None) -> Workload:
    """A Workload from a claim's flat table (layout knobs beside the fields); a value "=field" is
    that field's value (a twin at one sequence a device: batch = "=devices")."""
    d = {k: v for k, v in {**base, **(over or {})}.items() if v != "auto"}  # "auto": the planner's choice
    d = {k: d[v[1:]] if isinstance(v, str) and v.startswith("=") else v for k, v in d.items()}
    layout = {k: d.pop(k) for k in list(d) if k in LAYOUT_FIELDS}
    d.setdefault("suite", "train")
    return Workload.from_dict({**d, "layout": layout})
