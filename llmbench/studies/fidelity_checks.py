"""How each kind of seed claim is checked (studies/fidelity.py has the table and the verdict key).

    run_check(claim, Context(db=None))  -> Outcome(value, verdict, source, detail)

Predictions go through `perfmodel.predict.predict` (the exact workload the claim states, precision
included: a precision the hardware has no peak for is an error, not a silent substitute);
published rows through `perfmodel.validate.run()`; measurements through the results database.
"""
from __future__ import annotations

import statistics

from llmbench.errors import BadInput
from llmbench.studies.fidelity_judge import judged
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
        """Which numbers a prediction of the shipped profile rests on: fitted on this very published
        row (in-sample), on other rows, inherited from another hardware's fit, or priors only."""
        if not hw:
            return "predicted"
        prof = self.profile(hw)
        fitted = prof.get("status") == "fitted" or bool(prof.get("inherited_from"))
        if fitted and row and row in (prof.get("point_ids") or []):
            return "predicted, in-sample (shipped profile)"
        if prof.get("inherited_from"):
            return f"predicted, {prof['inherited_from']}'s fit"
        return "predicted, out-of-sample (shipped profile)" if fitted else "predicted, priors"

    def headline(self) -> dict:
        """validate's leave-one-source-out median error where it reports one, else in-sample."""
        v = self.validation
        loso = (v.get("leave_one_source_out") or {}).get("median_abs_error")
        if loso is not None:
            by_kind = {k: (d.get("leave_one_source_out") or {}).get("median_abs_error")
                       for k, d in (v.get("by_kind") or {}).items()}
            return {"median_abs_error": loso, "kind": "leave one source out", "by_kind": by_kind}
        errs = [abs(r["error"]) for r in v["rows"] if r.get("error") is not None]
        return {"median_abs_error": statistics.median(errs) if errs else None, "kind": "in-sample"}


def _path(d: dict, path: str):
    for part in path.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def predict_metrics(base: dict, over: dict | None = None, *, unfit: bool = False) -> dict:
    """A prediction's metrics; inference too gets energy and cost per token (catalog power_w and
    price_per_device_hour_usd x devices over tokens/s), as training predictions carry them;
    training also executed_flops_per_step (executed TFLOP/s x step time x devices).
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
    if m.get("executed_tflops") is not None and m.get("step_time_s"):  # FLOPs one step executes, all devices
        m["executed_flops_per_step"] = m["executed_tflops"] * 1e12 * m["step_time_s"] * n
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
    """The leave-one-source-out prediction `validate` reports for the row (its source held out of
    the pooled fit); the pooled in-sample fit and the shipped profile are shown beside it."""
    row = next((r for r in ctx.validation["rows"] if r["id"] == c["row"]), None)
    if row is None or (row.get("loso_predicted") is None and row.get("in_sample_predicted") is None):
        return Outcome(value="—", verdict="missing", source="—",
                       detail=f"validate has no prediction for {c['row']}")
    raw = {"loso": row.get("loso_predicted"), "in_sample": row.get("in_sample_predicted"),
           "shipped": row.get("predicted"), "tolerance": row.get("tolerance", 0.25)}
    out = judged("validate", {**c, "published": row["published"]}, raw, "", f"llmbench validate row {c['row']}")
    src = "predicted, leave one source out" if raw["loso"] is not None else "predicted, in-sample (pooled fit)"
    return Outcome(**{**out.__dict__, "source": src if out.verdict != "in-sample" else "predicted, in-sample (pooled fit)"})


def check_predict(c, ctx) -> Outcome:
    w = c["w"]
    src = ctx.source(w.get("hardware"), c.get("row"))
    v = _metric(c, w)
    expect = c.get("expect", "value")
    if expect == "value":
        return judged("number", c, float(v), src)
    if expect == "eq":
        return judged("compare", c, (v, c["equals"]), src)
    than = c["than"] if "than" in c else _path(predict_metrics(w, c.get("than_w")), c["than_metric"])
    return judged("compare", c, (v, than), src)


def check_ranking(c, ctx) -> Outcome:
    """The seed's ordering of published rows, from validate's leave-one-source-out predictions."""
    by_id = {r["id"]: r for r in ctx.validation["rows"]}
    raw = [[(rid, (by_id.get(rid) or {}).get("loso_predicted")) for rid in tier] for tier in c["order"]]
    return judged("ranking", c, raw, "predicted, leave one source out")


def check_series(c, ctx) -> Outcome:
    """The metric over `values` of field `vary` (judged by fidelity_judge.judge_series)."""
    base, raw, errs = c["w"], [], []
    for x in c["values"]:  # a value, or a table of overrides (e.g. the batch that goes with a GAS)
        over = x if isinstance(x, dict) else {c["vary"]: x}
        try:
            y = _metric(c, base, over)
        except (BadInput, ValueError) as e:
            y = None
            errs.append(f"{c['vary']} {over[c['vary']]}: {' '.join(str(e).split())[:120]}")
        raw.append((over[c["vary"]], y))
    src = ctx.source(base.get("hardware"), c.get("row"))
    return judged("series", c, raw, src, ("refused: " + "; ".join(errs)) if errs else "")


def _cases(c, fn) -> list:
    """[(label, value or None, reference)] of `fn(over)` over the claim's `ws` list."""
    raw = []
    for case in c["ws"]:
        label = case.get("label") or ", ".join(f"{k} {v}" for k, v in case.items())
        over = {k: v for k, v in case.items() if k not in ("label", "fit")}
        try:
            v, ref = fn(over)
        except (BadInput, ValueError) as e:
            v, ref = None, " ".join(str(e).split())[:120]
        if c["check"] == "fits" and v is not None:
            ref = case.get("fit", True)
        raw.append((label, v, ref))
    return raw


def _cases_outcome(c, ctx, fn) -> Outcome:
    hw = c["w"].get("hardware") or c.get("hardware") or c["ws"][0].get("hardware")
    return judged("cases", c, _cases(c, fn), ctx.source(hw, c.get("row")))


def check_fits(c, ctx) -> Outcome:
    """Each case must fit (or, with `fit = false` in the case, must not): the planner decides."""
    from llmbench.perfmodel.predict import predict_or_unfit

    def fn(over):
        pred, _ = predict_or_unfit(workload_of(c["w"], over))
        return bool(pred.fits), True
    return _cases_outcome(c, ctx, fn)


def check_runs(c, ctx) -> Outcome:
    return _cases_outcome(c, ctx, lambda over: (_metric(c, c["w"], over), None))


def check_beats(c, ctx) -> Outcome:
    ref = _metric(c, c["w"])
    return _cases_outcome(c, ctx, lambda over: (_metric(c, c["w"], over), ref))


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
    if head == "peak_sparse":
        return hw.peak_flops_sparse[rest]
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
    return judged("number", c, float(v), "catalog (cited in the TOML)")


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
    return judged("pair", c, (v, ref), "models/ counting")


def check_measured(c, ctx) -> Outcome:
    from llmbench.studies.fidelity_measured import MEASURED

    return MEASURED[c["fn"]](c, ctx)


def check_none(c, ctx) -> Outcome:
    return Outcome(value="—", verdict="missing", source="—", detail=c.get("why", "no counterpart in llmbench"))


CHECKS = {"validate": check_validate, "ranking": check_ranking, "predict": check_predict, "series": check_series,
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
