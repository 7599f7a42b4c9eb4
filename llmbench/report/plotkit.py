"""Shared plotting helpers of the report's figures (matplotlib imported at first use, Agg backend).

Measured points are green circles, predicted values lines with small squares in the hardware's
colour, published values red stars (`style.py`); every legend entry says which it is.
"""
from __future__ import annotations

from . import style
from .rows import Data, field, metric, xy
from .sweeps import CATALOG

MEASURED_PANEL = "measured on this machine"


def pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.spines.top": False, "axes.spines.right": False,
                         "legend.fontsize": 7.5, "legend.frameon": False, "svg.hashsalt": "llmbench"})
    return plt


def empty(ax, text: str = "not measured / not available") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#888888",
            fontsize=10, style="italic")
    ax.set_xticks([])
    ax.set_yticks([])


def hw_order(rows) -> list[str]:
    have = {r.get("hardware") for r in rows}
    return [h for h in CATALOG if h in have] + sorted(h for h in have - set(CATALOG) if h)


def predicted_lines(ax, rows, x, *ys, scale=1.0, label_suffix="") -> bool:
    """One predicted line per hardware; returns whether anything was drawn."""
    drawn = False
    for hw in hw_order(rows):
        xs, vs = xy([r for r in rows if r.get("hardware") == hw], x, *ys)
        if xs:
            ax.plot(xs, [v * scale for v in vs], label=f"predicted · {style.hw_label(hw)}{label_suffix}",
                    **style.predicted_kw(hw))
            drawn = True
    return drawn


def measured_points(ax, rows, x, *ys, scale=1.0, label="measured here", line=True) -> bool:
    xs, vs = xy(rows, x, *ys)
    if not xs:
        return False
    ax.plot(xs, [v * scale for v in vs], label=label, **style.measured_kw())
    if line and len(xs) > 1:
        ax.plot(xs, [v * scale for v in vs], color=style.SOURCE_STYLE["measured"][0], lw=1, alpha=0.5)
    return True


def model_label(row: dict) -> str:
    """The model of a row; a resized preset (quick studies) says its size."""
    m = row.get("model") or "?"
    resize = field(row, "resize")
    if resize:
        n = params_of(m, resize)
        return f"{m} shrunk to {n / 1e6:.1f}M params" if n else f"{m} (resized)"
    return m


def measured_panel(ax, data: Data, study: str, x: str, ys: tuple[str, ...], *, ylabel: str,
                    xlabel: str, scale: float = 1.0, group: str | None = None) -> None:
    """This machine: measured points, and the prediction for this machine (hardware cpu) if any."""
    rows = data.get(study, "measured")
    ax.set_title(MEASURED_PANEL, fontsize=9)
    drawn = False
    groups = {}
    for r in rows:
        groups.setdefault(field(r, group) if group else None, []).append(r)
    for g, grows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        name = model_label(grows[0]) if group == "model" else g
        drawn |= measured_points(ax, grows, x, *ys, scale=scale,
                           label="measured here" + (f" · {name}" if name is not None else ""))
    pred_cpu = data.predicted(study, mirrors=True)
    if drawn and pred_cpu:
        predicted_lines(ax, pred_cpu, x, *ys, scale=scale)
    if not drawn:
        return empty(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc="best")


def finish(fig, axes_with_legend=()):
    for ax in axes_with_legend:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", ncol=1)
    fig.tight_layout()
    return fig


def figure_legend(fig, axes):
    """One legend under the panels with every entry of `axes` once (panels share hardware)."""
    seen = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.tight_layout(rect=(0, 0.12 if seen else 0, 1, 1))
    if seen:
        fig.legend(seen.values(), seen.keys(), loc="lower center", ncol=min(6, len(seen)), fontsize=7.5,
                   frameon=False)
    return fig


def params_of(model: str, resize: dict | None = None) -> float | None:
    from llmbench.models.counting import param_count

    from .sweeps import spec_of

    try:
        return param_count(spec_of(model, resize))
    except Exception:  # noqa: BLE001
        return None


def fmt_num(v) -> str:
    return "n/a" if not isinstance(v, (int, float)) else f"{v:.3g}"


def speedups(rows, s: float) -> dict:
    """(hardware, model) -> tokens/s at sparsity s over dense."""
    dense, sparse = {}, {}
    for r in rows:
        sp, t = field(r, "sparsity") or 0.0, metric(r, "tokens_per_s")
        if t is None:
            continue
        key = (r.get("hardware"), r.get("model"), field(r, "batch"), field(r, "seq"))
        if sp == 0:
            dense[key] = t
        elif abs(sp - s) < 1e-9:
            sparse[key] = t
    return {(k[0], k[1]): sparse[k] / dense[k] for k in sparse if dense.get(k)}


def gas_ratios(rows, *, global_batch: bool = True) -> dict:
    """(hardware, devices, micro-batch) -> {gas: tokens/s relative to gas 1}. Predicted points
    carry the global batch (micro x devices x GAS); measured ones the micro-batch per replica."""
    table = {}
    for r in rows:
        g, d, b, t = field(r, "grad_accum") or 1, field(r, "devices") or 1, field(r, "batch"), \
            metric(r, "tokens_per_s")
        if b is None or t is None:
            continue
        micro = b // (d * g) if global_batch else b
        table.setdefault((r.get("hardware"), d, micro), {})[g] = t
    return {k: {g: t / v[1] for g, t in sorted(v.items())} for k, v in table.items() if v.get(1)}
