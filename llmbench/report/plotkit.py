"""Shared plotting helpers of the report's figures (matplotlib imported at first use, Agg backend).

Measured points are green circles, predicted values lines with small squares in the hardware's
colour, published values red stars (`style.py`); every legend entry says which it is.
"""
from __future__ import annotations

from . import style
from .rows import Data, field, hw_order, metric, xy

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


def label_axes(ax, *, x: str | None = None, y: str | None = None, title: str | None = None,
               xlog: int | bool = False, ylog: bool = False, legend: dict | None = None) -> None:
    """The epilogue every panel shares: log scales (xlog=2 for base 2), labels, a small title,
    and a legend (`legend`: its keyword arguments) when the panel has labelled artists."""
    if xlog:
        ax.set_xscale("log", **({"base": xlog} if xlog is not True else {}))
    if ylog:
        ax.set_yscale("log")
    if x:
        ax.set_xlabel(x)
    if y:
        ax.set_ylabel(y)
    if title:
        ax.set_title(title, fontsize=9)
    if legend is not None and ax.get_legend_handles_labels()[0]:
        ax.legend(**legend)


UNFIT_LABEL = "hollow: predicted not to fit device memory"


def unfit(row: dict) -> bool:
    """A prediction the model says does not fit (recorded as status oom, metrics kept)."""
    return row.get("status") == "oom" or (row.get("metrics") or {}).get("fits") is False


def mark_unfit(ax, rows, x, y, scale=1.0, hw: str | None = None) -> bool:
    """Hollow markers over the points of `rows` that do not fit, with one legend entry per panel
    (the SVG groups them under id 'unfit…', which the browser test looks for)."""
    pts = [(field(r, x), metric(r, y)) for r in rows if unfit(r)]
    pts = sorted((a, b * scale) for a, b in pts if a is not None and b is not None)
    if not pts:
        return False
    hollow(ax, [p[0] for p in pts], [p[1] for p in pts], hw)
    return True


def hollow(ax, xs, ys, hw: str | None = None) -> None:
    """Draw (xs, ys) as hollow squares in the hardware's colour: predicted not to fit."""
    (line,) = ax.plot(list(xs), list(ys), **style.unfit_kw(style.hw_colour(hw) if hw else "#444444"))
    line.set_gid(f"unfit-{hw or 'x'}-{id(line)}")
    if UNFIT_LABEL not in ax.get_legend_handles_labels()[1]:
        ax.plot([], [], label=UNFIT_LABEL, **style.unfit_kw("#444444"))


def predicted_lines(ax, rows, x, y, scale=1.0, label_suffix="", **kw) -> bool:
    """One predicted line per hardware, points that do not fit hollow; whether anything was drawn."""
    drawn = False
    for hw in hw_order(rows):
        mine = [r for r in rows if r.get("hardware") == hw]
        xs, vs = xy(mine, x, y)
        if xs:
            ax.plot(xs, [v * scale for v in vs], label=f"predicted · {style.hw_label(hw)}{label_suffix}",
                    **style.predicted_kw(hw, **kw))
            mark_unfit(ax, mine, x, y, scale, hw)
            drawn = True
    return drawn


def measured_points(ax, rows, x, y, scale=1.0, label="measured here", line=True) -> bool:
    xs, vs = xy(rows, x, y)
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


def measured_panel(ax, data: Data, study: str, x: str, y: str, *, ylabel: str, xlabel: str,
                   scale: float = 1.0, group: str | None = None, y_predicted: str | None = None,
                   xlog: int | bool = False) -> None:
    """This machine: measured points, and the predictions of the same workloads if any
    (`y_predicted`: the metric the model reports for what was measured as `y`)."""
    rows = data.get(study, "measured")
    ax.set_title(MEASURED_PANEL, fontsize=9)
    drawn = False
    groups = {}
    for r in rows:
        groups.setdefault(field(r, group) if group else None, []).append(r)
    for g, grows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        name = model_label(grows[0]) if group == "model" else g
        drawn |= measured_points(ax, grows, x, y, scale=scale,
                                 label="measured here" + (f" · {name}" if name is not None else ""))
    pred_here = data.predicted(study, mirrors=True)
    if drawn and pred_here:
        predicted_lines(ax, pred_here, x, y_predicted or y, scale=scale)
    if not drawn:
        return empty(ax)
    label_axes(ax, x=xlabel, y=ylabel, xlog=xlog, legend={"loc": "best"})


def finish(fig, axes_with_legend=()):
    for ax in axes_with_legend:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", ncol=1)
    fig.tight_layout()
    return fig


def figure_legend(fig, axes, ncol: int = 6):
    """One legend under the panels with every entry of `axes` once (panels share hardware)."""
    seen = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    rows = -(-len(seen) // ncol)  # the legend's rows: room under the panels for each
    fig.tight_layout(rect=(0, min(0.45, 0.05 + 0.035 * rows) if seen else 0, 1, 1))
    if seen:
        fig.legend(seen.values(), seen.keys(), loc="lower center", ncol=min(ncol, len(seen)), fontsize=7,
                   frameon=False)
    return fig


def params_of(model: str, resize: dict | None = None) -> float | None:
    """Parameters of a preset (resized as a quick study shrinks it); None for a name the presets
    do not know (a published row's model that llmbench has no preset for)."""
    from llmbench.models.counting import param_count
    from llmbench.point import Workload

    try:
        return param_count(Workload(model=model, resize=resize or {}).spec())
    except (ValueError, KeyError):
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
        key = (r.get("hardware"), r.get("model"), field(r, "batch"), field(r, "seq_len"))
        if sp == 0:
            dense[key] = t
        elif abs(sp - s) < 1e-9:
            sparse[key] = t
    return {(k[0], k[1]): sparse[k] / dense[k] for k in sparse if dense.get(k)}


def gas_ratios(rows) -> dict:
    """(hardware, devices, micro-batch) -> {gas: tokens/s relative to gas 1}. Every row carries
    the global batch; micro-batch and GAS come from Workload.micro_steps (the one batch rule)."""
    from .rows import workload

    table = {}
    for r in rows:
        w, t = workload(r), metric(r, "tokens_per_s")
        if w is None or t is None:
            continue
        d = w.devices or 1
        micro, g = w.micro_steps(dp=d)
        table.setdefault((r.get("hardware"), d, micro), {})[g] = t
    return {k: {g: t / v[1] for g, t in sorted(v.items())} for k, v in table.items() if v.get(1)}
