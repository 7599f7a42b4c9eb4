"""How a computed project value becomes a verdict, apart from how it is computed
(studies/fidelity_checks.py), so that the same judge can be fed a perturbed value: the mutation
test (tests/test_fidelity_mutation.py) checks that every non-input claim's verdict changes when its
value is halved, doubled, flattened or replaced by a null model.

    verdict, shown, detail = judge("number", claim, 1.75)
    mutants("number", claim, 1.75)      # -> [0.875, 3.5, claim["null"]]

Kinds and their raw values: number (float), validate ({"loso", "in_sample", "shipped"}), pair
((value, reference) of a closed form), compare ((value, than), claim["expect"] gt / lt / eq),
series ([(x, y or None)]), cases ([(label, value or None, reference)]: beats, fits, runs),
loss_gap ((gap, rising)). `null_raw` is the null model of a kind: a flat series, two equal
values, the claim's `null` number (1.0 for a ratio, 16 for perfect scaling on 16 devices); a claim
whose null model passes its own check is never counted reproduced (studies/fidelity.py).
"""
from __future__ import annotations

from llmbench.studies.verdict import Outcome, fmt, numeric_verdict

OK, NO = "reproduced", "contradicted"


def _tol(c: dict, default: float = 0.25) -> tuple[float, float]:
    return c.get("tolerance", default), c.get("factor", 2.0)


def judge_number(c, raw):
    verdict, err = numeric_verdict(float(raw), c["published"], *_tol(c))
    return verdict, fmt(float(raw)), f"{err:+.1%}"


def judge_pair(c, raw):
    v, ref = raw
    verdict, err = numeric_verdict(float(v), ref, *_tol(c, 0.05))
    return verdict, f"{v / 1e9:.2f} GFLOP/token", f"closed form 6N + 12·L·T·d: {ref / 1e9:.2f} GFLOP/token ({err:+.1%})"


def judge_validate(c, raw):
    """The leave-one-source-out prediction decides; only the in-sample fit matching: `in-sample`."""
    tol = c.get("tolerance", raw.get("tolerance", 0.25))
    cc = {**c, "tolerance": tol}
    parts = [f"{k.replace('_', '-')} {fmt(float(raw[k]))}" for k in ("loso", "in_sample", "shipped")
             if raw.get(k) is not None]
    if raw.get("loso") is None:
        if raw.get("in_sample") is None:
            return "missing", "—", "no prediction"
        v, _, _ = judge_number(cc, raw["in_sample"])
        return ("in-sample" if v == OK else v), fmt(float(raw["in_sample"])), "; ".join(parts)
    v, shown, err = judge_number(cc, raw["loso"])
    if v != OK and raw.get("in_sample") is not None and judge_number(cc, raw["in_sample"])[0] == OK:
        v = "in-sample"
    return v, shown, f"held out {err} (±{tol:.0%}); " + ", ".join(parts)


def judge_compare(c, raw):
    v, than = raw
    exp = c.get("expect", "gt")
    ok = v == than if exp == "eq" else (v > than if exp == "gt" else v < than)
    sym = {"eq": "=", "gt": ">", "lt": "<"}[exp]
    shown = fmt(v) if exp == "eq" else f"{fmt(v)} {sym} {fmt(than)}: {'yes' if ok else 'no'}"
    return (OK if ok else NO), shown, ""


def judge_series(c, raw):
    pts = [(x, y) for x, y in raw if isinstance(y, (int, float))]
    shown = ", ".join(f"{x}: {fmt(float(y))}" for x, y in pts) or "—"
    if len(pts) < 2:
        return "missing", shown, "fewer than two points computed"
    ys, k, exp = [y for _, y in pts], c.get("min_change", 0.05), c["expect"]
    change = ys[-1] / ys[0] - 1.0 if ys[0] else float("inf")
    steps = list(zip(ys, ys[1:]))
    if exp == "peak":
        i = max(range(len(ys)), key=ys.__getitem__)
        ok = pts[i][0] == c["peak_at"] and i + 1 < len(ys) and ys[i + 1] <= ys[i] * (1 - k)
    else:
        ok = {"rising": change >= k and all(b >= a * 0.999 for a, b in steps),
              "falling": -change >= k and all(b <= a * 1.001 for a, b in steps),
              "flat": max(ys) / min(ys) - 1.0 <= k,
              "not_falling": ys[-1] >= max(ys) * (1 - k)}[exp]
    verdict = OK if ok else NO
    if ok and len(pts) < len(raw):
        verdict = "partial"
    return verdict, shown, f"first to last {change:+.1%} ({exp}, threshold {k:.0%})"


def _case_ok(c, value, ref) -> bool | None:
    if value is None:
        return None
    if c["check"] == "beats":
        return value < ref if c.get("invert") else value > ref
    if c["check"] == "fits":
        return value == ref  # ref: the fit the case expects (True unless the case says fit = false)
    return value == c["equals"] if "equals" in c else True


def judge_cases(c, raw):
    oks = [_case_ok(c, v, ref) for _, v, ref in raw]
    shown = "; ".join(f"{label}: {_case_text(c, v, ref)}" for label, v, ref in raw)
    good, n = sum(bool(o) for o in oks), sum(o is not None for o in oks)
    verdict = OK if good == len(raw) else ("partial" if good else (NO if n else "missing"))
    if c["check"] == "runs" and "equals" not in c and verdict == OK:
        verdict = "partial"  # runs: the model computes it, the seed gives no number to match
    return verdict, shown, ""


def _case_text(c, v, ref) -> str:
    if v is None:
        return f"refused ({ref})" if isinstance(ref, str) else "refused"
    if c["check"] == "beats":
        return f"{fmt(v)} ({'above' if v > ref else 'below'} {fmt(ref)})"
    if c["check"] == "fits":
        return ("fits" if v else "does not fit") + ("" if v == ref else " (expected the opposite)")
    return fmt(v)


def judge_loss_gap(c, raw):
    gap, rising = raw
    if gap <= 0:
        return NO, f"{gap:+.1%}", "the sparse model ends at or below the dense one"
    verdict, err = numeric_verdict(gap, c["published"], *_tol(c))
    if verdict == OK and not rising:
        verdict = "partial"
    return verdict, f"{gap:+.1%}", f"{err:+.1%}" + ("" if rising else "; losses do not rise with sparsity")


def judge_ranking(c, raw):
    """raw: the seed's tiers, best first, of (name, value); every pair across tiers must keep its order."""
    pairs = [(a, b) for i, hi in enumerate(raw) for lo in raw[i + 1:] for a in hi for b in lo]
    good = sum(a[1] is not None and b[1] is not None and a[1] > b[1] for a, b in pairs)
    shown = " > ".join(" = ".join(f"{n.split('-')[-1]} {fmt(float(v)) if v is not None else '—'}" for n, v in tier)
                       for tier in raw)
    verdict = OK if good == len(pairs) else ("partial" if good > len(pairs) / 2 else NO)
    return verdict, shown, f"{good} of {len(pairs)} pairs across the seed's tiers in its order"


JUDGES = {"number": judge_number, "pair": judge_pair, "validate": judge_validate, "compare": judge_compare,
          "series": judge_series, "cases": judge_cases, "loss_gap": judge_loss_gap,
          "ranking": judge_ranking}


def judge(kind: str, c: dict, raw):
    return JUDGES[kind](c, raw)


def null_raw(kind: str, c: dict, raw):
    """The null model's value of a claim (None: the claim states no null for a number)."""
    if kind in ("number", "validate") and "null" in c:
        n = float(c["null"])
        return {"loso": n, "in_sample": n, "tolerance": raw.get("tolerance")} if kind == "validate" else n
    if kind == "series" and raw:
        y0 = next((y for _, y in raw if y is not None), None)
        return [(x, y0) for x, _ in raw]
    if kind == "ranking":
        return [[(n, 1.0) for n, _ in tier] for tier in raw]
    if kind == "compare" and c.get("expect") in ("gt", "lt"):
        return (raw[1], raw[1])
    if kind == "cases" and c["check"] == "beats":
        return [(label, ref, ref) for label, _, ref in raw]
    return None


def _published_mid(c: dict) -> float | None:
    from llmbench.studies.verdict import parse_published

    rng = parse_published(c.get("published", ""))
    return (rng[0] + rng[1]) / 2 if rng else None


def _series_shapes(raw) -> list:
    """rising, falling, flat and peaked versions of a series (the x values kept)."""
    xs = [x for x, _ in raw]
    y0 = next((y for _, y in raw if isinstance(y, (int, float)) and y), 1.0)
    peak = [[(x, y0 * (2.0 if x == p else 1.0)) for x in xs] for p in xs]
    return [[(x, y0 * (1 + i)) for i, x in enumerate(xs)], [(x, y0 / (1 + i)) for i, x in enumerate(xs)],
            [(x, y0) for x in xs], list(zip(xs, [y for _, y in raw][::-1]))] + peak


def _case_mutants(c: dict, raw) -> list:
    if c["check"] == "beats":
        return [[(label, ref * f, ref) for label, _, ref in raw] for f in (0.5, 2.0)]
    if c["check"] == "fits":
        return [[(label, not ref, ref) for label, _, ref in raw], [(label, ref, ref) for label, _, ref in raw]]
    out = [[(label, None, "refused") for label, _, _ in raw]]
    if "equals" in c:
        out += [[(label, "something else", ref) for label, _, ref in raw], [(label, c["equals"], ref) for label, _, ref in raw]]
    return out


def mutants(kind: str, c: dict, raw) -> list:
    """Perturbed values that break and that satisfy the check: x 0.25 to x 4 and the seed's own
    number, reversed / flat / rising / falling / peaked series, swapped comparisons, flipped fits,
    refusals, a reversed or flat ranking, and the claim's null model. The mutation test asserts
    that at least one of them changes each computed claim's verdict."""
    fs, mid, out = (0.25, 0.5, 2.0, 4.0), _published_mid(c), []
    if kind == "number":
        out = [raw * f for f in fs] + ([mid] if mid is not None else [])
    elif kind == "validate":
        keys = [k for k in ("loso", "in_sample") if raw.get(k) is not None]
        out = [{**raw, **{k: raw[k] * f for k in keys}} for f in fs]
        out += [{**raw, **{k: mid for k in keys}}] if mid is not None else []
    elif kind == "pair":
        out = [(raw[0] * f, raw[1]) for f in fs] + [(raw[1], raw[1])]
    elif kind == "series":
        out = _series_shapes(raw)
    elif kind == "compare":
        v, than = raw
        out = [("something else", than), (than, than)] if c.get("expect") == "eq" else \
            [(than, v), (than * 2 + 1, than), (than * 0.5 - 1, than)]
    elif kind == "cases":
        out = _case_mutants(c, raw)
    elif kind == "ranking":
        n = len(raw)
        out = [raw[::-1], [[(name, float(n - i)) for name, _ in tier] for i, tier in enumerate(raw)]]
    elif kind == "loss_gap":
        out = [(raw[0] * f, raw[1]) for f in fs] + [(-abs(raw[0]), raw[1])] + ([(mid, True)] if mid else [])
    n = null_raw(kind, c, raw)
    return out + ([n] if n is not None else [])


def judged(kind: str, c: dict, raw, source: str, detail: str = "") -> Outcome:
    """The Outcome of a computed value: the judge's verdict, the value as shown, and the raw value."""
    verdict, shown, d = judge(kind, c, raw)
    return Outcome(value=shown, verdict=verdict, source=source, detail="; ".join(x for x in (d, detail) if x),
                   raw=raw, kind=kind)
