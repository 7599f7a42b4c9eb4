"""Every measured run in the database (any model, any suite, not only the built-in studies) beside
the prediction of the same workload on the same hardware: a table and a measured-vs-predicted plot.

    llmbench measure train --model gpt2-small ... --db mine.db
    llmbench report --db mine.db        # predicts the runs in memory when the database has no prediction
"""
from __future__ import annotations

from . import style
from .plotkit import figure_legend, label_axes, model_label, pyplot
from .rows import Data, field, metric
from .tables import Table, fmt

#: (measured metric, predicted metric, what it is), the first the measured row has is compared
PAIRS = (("tokens_per_s", "tokens_per_s", "tokens/s"), ("fwd_bwd_tflops", "achieved_tflops", "TFLOP/s fwd+bwd"),
         ("latency_s_p50", "latency_s_p50", "latency p50 (s)"), ("achieved_tflops", "achieved_tflops", "TFLOP/s"))


def pairs(data: Data) -> list[dict]:
    """One entry per measured workload: the measured row, its prediction (or None) and the values."""
    preds = {}
    for r in data.all:
        if r.get("source") == "predicted" and r.get("workload_id") and r.get("status") in ("ok", "oom"):
            preds.setdefault(r["workload_id"], r)
    out, seen = [], set()
    for r in data.get(None, "measured"):
        wid = r.get("workload_id")
        if not wid or wid in seen:
            continue
        seen.add(wid)
        p = preds.get(wid)
        for mm, pm, what in PAIRS:
            if metric(r, mm) is not None:
                out.append({"row": r, "pred": p, "what": what, "measured": metric(r, mm),
                            "predicted": metric(p, pm) if p else None})
                break
    return out


def runs_table(data: Data) -> Table:
    t = Table("runs", "Every measured run beside its prediction (same workload, same hardware)",
              ["suite", "model", "hardware", "batch", "seq", "metric", "measured", "predicted", "measured / predicted"],
              kinds=["", "", "", "", "", "", "measured", "predicted", ""])
    for e in pairs(data):
        r = e["row"]
        ratio = e["measured"] / e["predicted"] if e["predicted"] else None
        t.rows.append([r.get("suite"), model_label(r), style.hw_label(r.get("hardware")), fmt(field(r, "batch")),
                       fmt(field(r, "seq_len")), e["what"], fmt(e["measured"]),
                       fmt(e["predicted"]) if e["pred"] else "not predicted (hardware not in the catalog)",
                       fmt(ratio) if ratio else "-"])
    t.sources = ["measured: the command in each row's environment (llmbench results list --source measured)",
                 "predicted: llmbench predict on the measured workload (studies/predict.py)"]
    if not t.rows:
        t.note = "no measured workload in this database"
    return t


def draw_runs(data: Data):
    """Measured (x) against predicted (y) for every measured run, one marker per suite; None when
    the database holds no measured workload (the page says so in one line)."""
    es = [e for e in pairs(data) if e["predicted"]]
    if not es:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, len({e["what"] for e in es}), figsize=(5.2 * len({e["what"] for e in es}), 4.4),
                             squeeze=False)
    markers = dict(zip(sorted({e["row"].get("suite") or "" for e in es}), "o^sDvPX*" * 4))  # one per suite
    for ax, what in zip(axes[0], sorted({e["what"] for e in es})):
        mine = [e for e in es if e["what"] == what]
        lo = min(min(e["measured"], e["predicted"]) for e in mine) / 2
        hi = max(max(e["measured"], e["predicted"]) for e in mine) * 2
        ax.plot([lo, hi], [lo, hi], color="#666666", lw=0.8, label="predicted = measured")
        for suite in sorted({e["row"].get("suite") or "" for e in mine}):
            marker = markers[suite]
            pts = [(e["measured"], e["predicted"]) for e in mine if (e["row"].get("suite") or "") == suite]
            ax.plot(*zip(*pts), **style.measured_kw(marker=marker, markeredgecolor="black"),
                    label=f"measured here · suite {suite} ({len(pts)})")
        label_axes(ax, x=f"measured {what}", y=f"predicted {what}", xlog=True, ylog=True, title=what)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    return figure_legend(fig, axes[0], ncol=5)  # under the panels: never over a point
