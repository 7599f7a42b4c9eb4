"""The report's serving page: latency-throughput curves (TTFT and TPOT, p50 and p99, against the
request rate, one line per hardware) and the capacity plan, drawn from what `llmbench reproduce`
recorded (studies/serving.py: studies "serving" and "serving-plan", rows of `llmbench serve` and
`llmbench plan serve`). Reads results rows only.
"""
from __future__ import annotations

import math

from . import style
from .plotkit import empty, figure_legend, label_axes, pyplot
from .rows import Data, UnknownMetric
from .tables import Table, fmt

#: the serving rows' metrics (vLLM benchmark_serving's keys, llmbench/queueing/metrics.py) the page reads
SERVE_METRICS = {
    "request_throughput": "completed requests per second of the run",
    "output_throughput": "generated tokens per second", "request_goodput": "requests/s meeting every SLO",
    "median_ttft_ms": "median time to first token", "p99_ttft_ms": "99th percentile time to first token",
    "median_tpot_ms": "median time per output token", "p99_tpot_ms": "99th percentile time per output token",
    "kv_cache_utilization": "KV blocks in use, time-averaged", "preemptions": "sequences preempted",
}
NOT_RUN = "not available: llmbench reproduce runs it (python -m llmbench.studies.serving)"


def serve_metric(row: dict, name: str) -> float | None:
    if name not in SERVE_METRICS:
        raise UnknownMetric(f"serving metric {name!r} is not declared (report/serving.py SERVE_METRICS)")
    v = (row.get("metrics") or {}).get(name)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _curves(rows: list[dict]) -> dict[str, list[dict]]:
    """hardware -> its rows, by rate."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        if (r.get("point") or {}).get("request_rate") is not None:
            out.setdefault(r.get("hardware"), []).append(r)
    return {hw: sorted(rs, key=lambda r: r["point"]["request_rate"]) for hw, rs in out.items()}


def draw_serving(data: Data):
    """TTFT and TPOT (p50 solid, p99 dashed) and output tokens/s against the request rate."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    curves = _curves(data.get("serving", "predicted"))
    if not curves:
        for ax in axes:
            empty(ax, NOT_RUN)
        return figure_legend(fig, axes)
    for hw, rows in curves.items():
        x = [r["point"]["request_rate"] for r in rows]
        lab = style.hw_label(hw) + f" ({rows[0]['point'].get('engine')})"
        for ax, what in ((axes[0], "ttft"), (axes[1], "tpot")):
            ax.plot(x, [serve_metric(r, f"median_{what}_ms") for r in rows], **style.predicted_kw(hw), label=lab)
            ax.plot(x, [serve_metric(r, f"p99_{what}_ms") for r in rows],
                    **style.predicted_kw(hw, linestyle="--", marker="none"))
        axes[2].plot(x, [serve_metric(r, "output_throughput") for r in rows], **style.predicted_kw(hw), label=lab)
    p = next(iter(curves.values()))[0]["point"]
    slo = p.get("slo") or {}
    for ax, key in ((axes[0], "ttft_ms"), (axes[1], "tpot_ms")):
        if slo.get(key):
            ax.axhline(slo[key], color="#d7301f", lw=0.9, ls=":", label=f"SLO {slo[key]:g} ms")
    model = p.get("model")
    label_axes(axes[0], x="request rate (requests/s)", y="TTFT (ms)", xlog=2, ylog=True,
               title=f"{model}: time to first token (solid p50, dashed p99)")
    label_axes(axes[1], x="request rate (requests/s)", y="TPOT (ms)", xlog=2, ylog=True,
               title="time per output token (solid p50, dashed p99)")
    label_axes(axes[2], x="request rate (requests/s)", y="output tokens/s", xlog=2, ylog=True,
               title="output throughput (flat: saturated)")
    return figure_legend(fig, axes, ncol=5)


def serving_plan_table(data: Data) -> Table:
    """The deployments meeting the SLOs (simulated), then the best layout of each hardware
    (screened), of the latest `plan serve` the database holds."""
    cols = ["#", "hardware", "engine", "replica", "replicas", "devices", "max seqs", "p99 TTFT ms",
            "p99 TPOT ms", "USD per M output tokens", "J per output token"]
    rows = data.get("serving-plan", "predicted")
    t = Table("serving_plan", "Capacity plan for serving (llmbench plan serve)", cols,
              kinds=[""] * 7 + ["predicted"] * 4)
    if not rows:
        t.note = NOT_RUN
        return t
    res = rows[-1]["metrics"]
    for i, c in enumerate(res.get("layouts", []), 1):
        s = c["simulated"]
        t.rows.append([str(i), style.hw_label(c["hardware"]), c["engine"], _lay(c), c["replicas"], c["devices"],
                       c["max_num_seqs"], fmt(s["p99_ttft_ms"]), fmt(s["p99_tpot_ms"]),
                       _price(c["usd_per_mtok_output"]), fmt(c["j_per_output_token"])])
    for c in res.get("best_per_hardware", []):
        t.rows.append(["best (screen)", style.hw_label(c["hardware"]), c["engine"], _lay(c), c["replicas"],
                       c["devices"], c["max_num_seqs"], "not simulated", "not simulated",
                       _price(c["usd_per_mtok_output"]), fmt(c["j_per_output_token"])])
    slo = res.get("slo", {})
    t.note = (f"{res.get('model')} at {res.get('request_rate'):g} requests/s, p99 TTFT <= {slo.get('ttft_ms'):g} ms "
              f"and p99 TPOT <= {slo.get('tpot_ms'):g} ms: {res.get('searched', 0):,} candidates (hardware x tp x "
              f"pp x max-num-seqs) screened on the per-step cost model, the cheapest simulated "
              f"(numbered rows: they meet the SLOs in the simulator); 'best (screen)': each hardware's best "
              f"layout by the steady-state screen. No layout met the SLOs on: "
              f"{', '.join(res.get('no_candidate', [])) or 'none'}.")
    t.sources = [rows[-1].get("environment", {}).get("command", "llmbench plan serve"),
                 "prices: the catalog's price_per_device_hour_usd (each hardware file cites it); power: power_w"]
    return t


def _lay(c: dict) -> str:
    return f"{c['pp']} wafers" if c.get("mode") == "sram_pipeline" else f"tp{c['tp']} pp{c['pp']}"


def _price(v) -> str:
    return "no price" if v is None else fmt(v)
