"""How each kind of seed claim is checked (studies/fidelity.py has the table and the verdict key).

    run_check(claim, Context(db=None))  -> Outcome(value, verdict, source, detail)

Predictions go through `perfmodel.predict.predict` (the exact workload the claim states, precision
included: a precision the hardware has no peak for is an error, not a silent substitute);
published rows through `perfmodel.validate.run()`; measurements through the results database.
"""
from __future__ import annotations

import statistics

from llmbench.errors import BadInput
from llmbench.studies.verdict import Outcome, fmt, numeric_verdict, workload_of


class Context:
    """Shared by the checks of one table: the database, validate's result (run once), profiles."""

    def __init__(self, db=None, validation: dict | None = None):
        self.db = db
        self._val = validation
        self._profiles: dict[str, dict] = {}

    @property
    def validation(self) -> dict:
        if self._val is None:
            from llmbench.perfmodel.validate import run

            self._val = run()
        return self._val

    def profile(self, hw: str) -> dict:
        if hw not in self._profiles:
            from llmbench.perfmodel.params import load_profile

            try:
                self._profiles[hw] = load_profile(hw) or {}
            except (OSError, ValueError):
                self._profiles[hw] = {}
        return self._profiles[hw]

    def source(self, hw: str | None, row: str | None = None) -> str:
        """predicted in-sample (the hardware's profile was fitted on this published row),
        out-of-sample (fitted on other rows), or on priors (no fitted profile)."""
        if not hw:
            return "predicted"
        prof = self.profile(hw)
        if row and row in (prof.get("point_ids") or []):
            return "predicted, in-sample"
        return "predicted, out-of-sample" if prof.get("status") == "fitted" else "predicted, priors"

    def headline(self) -> dict:
        """validate's leave-one-source-out median error where it reports one, else in-sample."""
        v = self.validation
        loso = (v.get("leave_one_source_out") or {}).get("median_abs_error")
        if loso is not None:
            return {"median_abs_error": loso, "kind": "leave one source out"}
        errs = [abs(r["error"]) for r in v["rows"] if r.get("error") is not None]
        return {"median_abs_error": statistics.median(errs) if errs else None, "kind": "in-sample"}


def _path(d: dict, path: str):
    for part in path.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def predict_metrics(base: dict, over: dict | None = None, *, unfit: bool = False) -> dict:
    """A prediction's metrics; inference too gets energy and cost per token (catalog power_w and
    price_per_device_hour_usd x devices over tokens/s), as training predictions carry them.
    unfit=True: a workload no layout fits gives its plain layout's metrics (fits False) instead
    of the refusal (a claim about memory growth, not speed)."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.predict import predict, predict_or_unfit

    w = workload_of(base, over)
    m = (predict_or_unfit(w)[0] if unfit else predict(w)).to_dict()
    hw, n, tps = get_hardware(m["workload"]["hardware"]), m["workload"]["devices"], m.get("tokens_per_s")
    if "energy_j_per_token" not in m and tps:
        m["energy_j_per_token"] = hw.power_w * n / tps if hw.power_w else None
        price = hw.price_per_device_hour_usd
        m["cost_usd_per_token"] = price * n / 3600.0 / tps if price else None
    return m


def _metric(c: dict, base: dict, over: dict | None = None):
    """The claim's metric of one workload, divided by its twin `c["over"]` when given."""
    m = predict_metrics(base, over, unfit=c.get("allow_unfit", False))
    v = _path(m, c["metric"])
    if c.get("over") is not None:
        m2 = predict_metrics({**base, **(over or {})}, c["over"])
        v2 = _path(m2, c["metric"])
        if c.get("per_device"):
            v2 = v2 * m["workload"]["devices"] / m2["workload"]["devices"]
        v = v / v2
    if c.get("over_metric"):
        v = v / _path(m, c["over_metric"])
    return v * c.get("scale", 1.0) if isinstance(v, (int, float)) else v


def check_validate(c, ctx) -> Outcome:
    row = next((r for r in ctx.validation["rows"] if r["id"] == c["row"]), None)
    if row is None or row.get("predicted") is None:
        return Outcome(value="—", verdict="missing", source="—",
                       detail=f"validate has no prediction for {c['row']}")
    err, tol = row["error"], row["tolerance"]
    verdict, _ = numeric_verdict(row["predicted"], row["published"], tol, c.get("factor", 2.0))
    return Outcome(value=fmt(float(row["predicted"])), verdict=verdict, source=ctx.source(c.get("hardware"), c["row"]),
                   detail=f"{err:+.1%} against {row['published']} (llmbench validate row {c['row']}, ±{tol:.0%})")


def check_trend(c, ctx) -> Outcome:
    t = next((t for t in ctx.validation["trends"] if t["id"] == c["row"]), None)
    if t is None:
        return Outcome(value="—", verdict="missing", source="—", detail=f"validate has no trend {c['row']}")
    return Outcome(value="holds" if t["passed"] else "does not hold",
                   verdict="reproduced" if t["passed"] else "contradicted",
                   source=ctx.source(c.get("hardware"), c["row"]), detail=str(t.get("detail", ""))[:240])


def check_predict(c, ctx) -> Outcome:
    w = c["w"]
    src = ctx.source(w.get("hardware"), c.get("row"))
    v = _metric(c, w)
    expect = c.get("expect", "value")
    if expect == "value":
        verdict, err = numeric_verdict(float(v), c["published"], c.get("tolerance", 0.25), c.get("factor", 2.0))
        return Outcome(value=fmt(float(v)), verdict=verdict, source=src, detail=f"{err:+.1%}")
    if expect == "eq":
        ok = v == c["equals"]
    else:
        than = c["than"] if "than" in c else _path(predict_metrics(w, c.get("than_w")), c["than_metric"])
        ok = (v > than) if expect == "gt" else (v < than)
        v = f"{fmt(v)} {'>' if expect == 'gt' else '<'} {fmt(than)}: {'yes' if ok else 'no'}"
    return Outcome(value=fmt(v), verdict="reproduced" if ok else "contradicted", source=src)


def check_series(c, ctx) -> Outcome:
    """The metric over `values` of field `vary`: rising / falling by ≥ min_change, or flat."""
    base, vals, got, errs = c["w"], c["values"], [], []
    for x in vals:  # a value, or a table of overrides (e.g. the batch that goes with a GAS)
        over = x if isinstance(x, dict) else {c["vary"]: x}
        try:
            got.append(_metric(c, base, over))
        except (BadInput, ValueError) as e:
            got.append(None)
            errs.append(f"{c['vary']} {over[c['vary']]}: {' '.join(str(e).split())[:120]}")
    vals = [x[c["vary"]] if isinstance(x, dict) else x for x in vals]
    pts = [(x, y) for x, y in zip(vals, got) if isinstance(y, (int, float))]
    value = ", ".join(f"{x}: {fmt(float(y))}" for x, y in pts) or "—"
    src = ctx.source(base.get("hardware"), c.get("row"))
    if len(pts) < 2:
        return Outcome(value=value, verdict="missing", source=src, detail="; ".join(errs))
    ys = [y for _, y in pts]
    change, k = ys[-1] / ys[0] - 1.0, c.get("min_change", 0.0)
    steps = list(zip(ys, ys[1:]))
    ok = {"rising": change >= k and all(b >= a * 0.999 for a, b in steps),
          "falling": -change >= k and all(b <= a * 1.001 for a, b in steps),
          "flat": max(ys) / min(ys) - 1.0 <= c.get("min_change", 0.05)}[c["expect"]]
    verdict = "reproduced" if ok else "contradicted"
    if ok and errs:
        verdict = "partial"
    return Outcome(value=value, verdict=verdict, source=src,
                   detail=f"first to last {change:+.1%}" + ("; refused: " + "; ".join(errs) if errs else ""))


def _each(c, fn) -> tuple[list[str], int, int]:
    """(lines, how many hold, how many computed) of `fn(over)` over the claim's `ws` list."""
    lines, good, n = [], 0, 0
    for over in c["ws"]:
        label = over.get("label") or ", ".join(f"{k} {v}" for k, v in over.items())
        over = {k: v for k, v in over.items() if k != "label"}
        try:
            ok, text = fn(over)
            n += 1
            good += bool(ok)
        except (BadInput, ValueError) as e:
            ok, text = None, "refused: " + " ".join(str(e).split())[:120]
        lines.append(f"{label}: {text}")
    return lines, good, n


def _all_some_none(c, ctx, fn, none_verdict="contradicted") -> Outcome:
    lines, good, n = _each(c, fn)
    total = len(c["ws"])
    verdict = "reproduced" if good == total else ("partial" if good else (none_verdict if n else "missing"))
    hw = c["w"].get("hardware") or c.get("hardware") or c["ws"][0].get("hardware")
    return Outcome(value="; ".join(lines), verdict=verdict, source=ctx.source(hw, c.get("row")))


def check_fits(c, ctx) -> Outcome:
    from llmbench.perfmodel.predict import predict_or_unfit

    def fn(over):
        pred, refusal = predict_or_unfit(workload_of(c["w"], over))
        return pred.fits, ("fits" if pred.fits else f"does not fit ({pred.peak_mem_bytes / 1e9:,.1f} GB per device)")
    return _all_some_none(c, ctx, fn)


def check_runs(c, ctx) -> Outcome:
    def fn(over):
        v = _metric(c, c["w"], over)
        return True, fmt(v)
    return _all_some_none(c, ctx, fn, none_verdict="missing")


def check_beats(c, ctx) -> Outcome:
    ref = _metric(c, c["w"])

    def fn(over):
        v = _metric(c, c["w"], over)
        ok = v < ref if c.get("invert") else v > ref
        return ok, f"{fmt(v)} ({'above' if v > ref else 'below'} {fmt(ref)})"
    return _all_some_none(c, ctx, fn)


def check_refuses(c, ctx) -> Outcome:
    try:
        predict_metrics(c["w"])
    except (BadInput, ValueError) as e:
        return Outcome(value="refused: " + " ".join(str(e).split())[:160], verdict="reproduced",
                       source=ctx.source(c["w"].get("hardware")))
    return Outcome(value="accepted", verdict="contradicted", source=ctx.source(c["w"].get("hardware")))


def _catalog_value(hw_name: str, path: str) -> float:
    """power_w, price_per_device_hour_usd, peak.<dtype>, tier.<role>.<capacity_bytes|bandwidth_bytes_per_s>."""
    from llmbench.hardware import get_hardware

    hw = get_hardware(hw_name)
    head, _, rest = path.partition(".")
    if head == "peak":
        return hw.peak_flops[rest]
    if head == "tier":
        role, _, attr = rest.partition(".")
        return getattr(next(t for t in hw.memory_tiers if t.role == role or t.name == role), attr)
    return getattr(hw, path)


def check_catalog(c, ctx) -> Outcome:
    v = _catalog_value(c["hardware"], c["path"])
    if v is None:
        return Outcome(value="—", verdict="missing", source="catalog", detail=f"{c['hardware']} has no {c['path']}")
    if c.get("over_hardware"):
        v = v / _catalog_value(c["over_hardware"], c.get("over_path", c["path"]))
    v *= c.get("scale", 1.0)
    verdict, err = numeric_verdict(float(v), c["published"], c.get("tolerance", 0.25), c.get("factor", 2.0))
    return Outcome(value=fmt(float(v)), verdict=verdict, source="catalog (cited in the TOML)", detail=f"{err:+.1%}")


def check_model(c, ctx) -> Outcome:
    spec = workload_of({"model": c["model"]}).spec()
    diff = {k: (getattr(spec, k), v) for k, v in c["fields"].items() if getattr(spec, k) != v}
    value = ", ".join(f"{k} {getattr(spec, k)}" for k in c["fields"])
    verdict = "reproduced" if not diff else ("partial" if len(diff) < len(c["fields"]) else "contradicted")
    return Outcome(value=value, verdict=verdict, source="model preset",
                   detail="; ".join(f"{k}: {a} vs {b}" for k, (a, b) in diff.items()))


def check_dataset(c, ctx) -> Outcome:
    from llmbench.perfmodel.project import get_dataset

    v = getattr(get_dataset(c["dataset"]), c["attr"])
    verdict, err = numeric_verdict(float(v), c["published"], c.get("tolerance", 0.25))
    return Outcome(value=fmt(float(v)), verdict=verdict, source="data-set table (perfmodel/project.py)",
                   detail=f"{err:+.1%}")


def check_counting(c, ctx) -> Outcome:
    """Training FLOPs per token from models/ counting against the closed form the seed states."""
    from llmbench.models.counting import closed_form_flops_per_token, flops_per_token

    spec = workload_of({"model": c["model"]}).spec()
    v, ref = flops_per_token(spec, c["seq"]), closed_form_flops_per_token(spec, c["seq"])
    verdict, err = numeric_verdict(v, ref, c.get("tolerance", 0.05))
    return Outcome(value=f"{v / 1e9:.2f} GFLOP/token", verdict=verdict, source="models/ counting",
                   detail=f"closed form 6N + 12·L·T·d: {ref / 1e9:.2f} GFLOP/token ({err:+.1%})")


def check_measured(c, ctx) -> Outcome:
    from llmbench.studies.fidelity_measured import MEASURED

    return MEASURED[c["fn"]](c, ctx)


def check_none(c, ctx) -> Outcome:
    return Outcome(value="—", verdict="missing", source="—", detail=c.get("why", "no counterpart in llmbench"))


CHECKS = {"validate": check_validate, "trend": check_trend, "predict": check_predict, "series": check_series,
          "fits": check_fits, "runs": check_runs, "beats": check_beats, "refuses": check_refuses,
          "catalog": check_catalog, "model": check_model, "dataset": check_dataset, "counting": check_counting,
          "measured": check_measured, "none": check_none}


def run_check(c: dict, ctx: Context) -> Outcome:
    if c["check"] not in CHECKS:
        raise ValueError(f"claim {c['id']}: unknown check {c['check']!r}; one of {', '.join(CHECKS)}")
    try:
        return CHECKS[c["check"]](c, ctx)
    except (BadInput, ValueError, KeyError) as e:
        src = ctx.source((c.get("w") or {}).get("hardware") or c.get("hardware"))
        return Outcome(value="refused: " + " ".join(str(e).split())[:160], verdict="missing", source=src,
                       detail="the model cannot compute this claim")
