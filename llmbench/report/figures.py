"""The report's plots (matplotlib, Agg backend): one function per figure, each taking the report's
`Data` and returning a Figure, or None when the database holds nothing for it.

    from llmbench.report.figures import FIGURES
    fig = FIGURES[0].draw(data)

Measured points are green circles, predicted values lines with small squares in the hardware's
colour, published values red stars (`style.py`); every legend entry says which it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import style
from .rows import Data, field, metric, xy
from .sweeps import CATALOG

MEASURED_PANEL = "measured on this machine"


@dataclass(frozen=True)
class FigureSpec:
    id: str
    title: str
    studies: tuple[str, ...]
    """studies whose rows the figure draws (the caption names their commands)"""
    how_to_read: str
    draw: Callable[[Data], object]


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.spines.top": False, "axes.spines.right": False,
                         "legend.fontsize": 7.5, "legend.frameon": False, "svg.hashsalt": "llmbench"})
    return plt


def _empty(ax, text: str = "not measured / not available") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#888888",
            fontsize=10, style="italic")
    ax.set_xticks([])
    ax.set_yticks([])


def _hw_order(rows) -> list[str]:
    have = {r.get("hardware") for r in rows}
    return [h for h in CATALOG if h in have] + sorted(h for h in have - set(CATALOG) if h)


def _lines(ax, rows, x, *ys, scale=1.0, label_suffix="") -> bool:
    """One predicted line per hardware; returns whether anything was drawn."""
    drawn = False
    for hw in _hw_order(rows):
        xs, vs = xy([r for r in rows if r.get("hardware") == hw], x, *ys)
        if xs:
            ax.plot(xs, [v * scale for v in vs], label=f"predicted · {style.hw_label(hw)}{label_suffix}",
                    **style.predicted_kw(hw))
            drawn = True
    return drawn


def _measured(ax, rows, x, *ys, scale=1.0, label="measured here", line=True) -> bool:
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
        n = _params(m, resize)
        return f"{m} shrunk to {n / 1e6:.1f}M params" if n else f"{m} (resized)"
    return m


def _measured_panel(ax, data: Data, study: str, x: str, ys: tuple[str, ...], *, ylabel: str,
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
        drawn |= _measured(ax, grows, x, *ys, scale=scale,
                           label="measured here" + (f" · {name}" if name is not None else ""))
    pred_cpu = data.predicted(study, mirrors=True)
    if drawn and pred_cpu:
        _lines(ax, pred_cpu, x, *ys, scale=scale)
    if not drawn:
        return _empty(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc="best")


def _finish(fig, axes_with_legend=()):
    for ax in axes_with_legend:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", ncol=1)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- roofline

def _intensity(model: str, batch, seq, precision: str, *, block: bool, resize=None) -> float | None:
    """Training FLOPs / bytes moved (forward + backward) from models/ counting."""
    from llmbench.models.counting import layer_ops, model_ops

    from .sweeps import spec_of

    try:
        spec = spec_of(model, resize)
        dt = precision if precision in ("fp32", "tf32", "fp16", "bf16", "cbf16", "fp8") else "bf16"
        ops = layer_ops(spec, int(batch), int(seq), dt) if block or model.endswith("-block") \
            else model_ops(spec, int(batch), int(seq), dt)
    except Exception:  # noqa: BLE001 - a custom model name the presets do not know
        return None
    flops = sum(o.flops + o.flops_bwd for o in ops)
    moved = sum(o.bytes + o.bytes_bwd for o in ops)
    return flops / moved if moved else None


def _roof(ax, peak_flops: float | None, bw: float | None, colour: str, label: str, ls: str = "-") -> None:
    import numpy as np

    if not peak_flops or not bw:
        return
    x = np.logspace(-1, 4, 200)
    ax.plot(x, np.minimum(peak_flops, x * bw) / 1e12, color=colour, lw=1.2, label=label, linestyle=ls)


def _infer_point(r) -> tuple[float, float] | None:
    """(FLOP/byte, TFLOP/s) of a classification forward pass: counting FLOPs over the latency."""
    from llmbench.models.counting import model_ops

    from .sweeps import spec_of

    lat = metric(r, "latency_s", "ttft_s", "latency_s_p50")
    try:
        ops = model_ops(spec_of(r.get("model") or "", field(r, "resize")), int(field(r, "batch") or 1),
                        int(field(r, "seq") or 128), str(field(r, "precision") or "bf16"))
    except Exception:  # noqa: BLE001
        return None
    flops, moved = sum(o.flops for o in ops), sum(o.bytes for o in ops)
    devices = metric(r, "devices") or 1
    return (flops / moved, flops / lat / devices / 1e12) if lat and moved else None


def _roof_points(ax, rows, *, colour, label, measured=False, marker="s") -> bool:
    pts = []
    for r in rows:
        if r.get("suite") == "infer":
            p = _infer_point(r)
            if p:
                pts.append(p)
            continue
        ai = _intensity(r.get("model") or "", field(r, "batch") or 1, field(r, "seq") or 128,
                        str(field(r, "precision") or "bf16"), block=r.get("suite") == "block",
                        resize=field(r, "resize"))
        y = metric(r, "hw_tflops_per_device", "fwd_bwd_tflops", "tflops_per_device", "achieved_tflops")
        if ai and y:
            pts.append((ai, y))
    if not pts:
        return False
    kw = style.measured_kw() if measured else dict(color=colour, marker=marker, markersize=5,
                                                       linestyle="none", markeredgecolor="white")
    ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **kw)
    return True


def draw_roofline(data: Data):
    from llmbench.hardware import catalog

    plt = _plt()
    cat = catalog()
    hws = [h for h in CATALOG if h in cat]
    n = len(hws) + 1
    cols = 4
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(13, 3.0 * ((n + cols - 1) // cols)),
                             squeeze=False)
    flat = list(axes.flat)
    pred = data.predicted("transformer-block") + data.predicted("gpt2xl-scaling", devices=1)
    for ax, h in zip(flat, hws):
        hw = cat[h]
        prec = "bf16" if hw.peak("bf16") else "fp16"
        mem = hw.device_memory
        _roof(ax, hw.peak(prec), mem.bandwidth_bytes_per_s, "#555555", f"roof {prec} · {mem.name}")
        mine = [r for r in pred if r.get("hardware") == h and field(r, "precision") == prec]
        _roof_points(ax, mine, colour=style.hw_colour(h), label="predicted · GPT-2 XL training")
        inf = [r for r in data.predicted("bert-infer-batch") if r.get("hardware") == h]
        _roof_points(ax, inf, colour=style.hw_colour(h), label="predicted · BERT-base inference", marker="^")
        ax.set_title(style.hw_label(h), fontsize=9)
    ax = flat[len(hws)]
    _measured_roofline(ax, data)
    for ax in flat[:n]:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(0.1, 1e4)
        ax.minorticks_off()  # 11 log-log panels: minor ticks cost seconds to lay out, add little
        ax.set_xlabel("FLOP / byte")
        ax.set_ylabel("TFLOP/s")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="lower right", fontsize=6.5)
    for ax in flat[n:]:
        ax.axis("off")
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.06, top=0.96, wspace=0.28, hspace=0.42)
    return fig


def _measured_roofline(ax, data: Data) -> None:
    ax.set_title("this machine (measured ceilings)", fontsize=9)
    from .reproduce import _flat_ceilings

    peaks, bw = {}, 0.0
    for r in data.get("ceilings", "measured"):
        m = {**(r.get("metrics") or {}), **_flat_ceilings(r.get("metrics") or {})}
        bw = max(bw, m.get("copy_bandwidth_bytes_per_s") or 0.0)
        for k, v in m.items():
            if k.startswith("gemm_") and k.endswith("_flops_per_s") and isinstance(v, (int, float)):
                peaks[k[5:-12]] = max(v, peaks.get(k[5:-12], 0))
    for dt, peak in sorted(peaks.items()):
        _roof(ax, peak, bw, style.SOURCE_STYLE["measured"][0] if dt == "fp32" else "#88bb88",
              f"measured ceiling {dt} · copy {bw / 1e9:.0f} GB/s")
    drawn = _roof_points(ax, data.get("transformer-block", "measured"), colour=None,
                         label="measured here · block", measured=True)
    drawn |= _roof_points(ax, data.get("bert-infer-batch", "measured"), colour=None,
                          label="measured here · BERT inference", measured=True)
    drawn |= _roof_points(ax, data.predicted("transformer-block", mirrors=True), colour=style.hw_colour("cpu"),
                          label="predicted for this CPU")
    if not drawn and not peaks:
        ax.text(0.5, 0.5, "not measured / not available", ha="center", va="center",
                transform=ax.transAxes, color="#888888", style="italic")


# ---------------------------------------------------------------- block

def draw_block(data: Data):
    plt = _plt()
    rows = data.predicted("transformer-block")
    precs = [p for p in ("fp32", "fp16", "bf16") if any(field(r, "precision") == p for r in rows)]
    fig, axes = plt.subplots(1, len(precs) + 1, figsize=(4.2 * (len(precs) + 1), 3.6), squeeze=False)
    for ax, p in zip(axes[0], precs):
        _lines(ax, [r for r in rows if field(r, "precision") == p], "batch", "tflops_per_device")
        ax.set_title(f"predicted, {p}", fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences of 1024)")
        ax.set_ylabel("TFLOP/s (fwd+bwd, one layer)")
    if not precs:
        _empty(axes[0][0], "no prediction available")
    _measured_panel(axes[0][-1], data, "transformer-block", "batch",
                    ("fwd_bwd_tflops", "achieved_tflops", "tflops_per_device"),
                    ylabel="TFLOP/s (fwd+bwd)", xlabel="batch", group="precision")
    return _fig_legend(fig, axes[0][:-1])


def _fig_legend(fig, axes):
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


# ---------------------------------------------------------------- BERT on CS-2

def draw_bert_throughput(data: Data):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    ax = axes[0]
    pred = data.predicted("bert-train-batch")
    drawn = False
    for model, ls in (("bert-base", "-"), ("bert-large", "--")):
        for hw in ("cs2",):
            xs, ys = xy([r for r in pred if r.get("hardware") == hw and r.get("model") == model],
                        "batch", "samples_per_s")
            if xs:
                ax.plot(xs, ys, label=f"predicted · {model} on {style.hw_label(hw)}",
                        **style.predicted_kw(hw, linestyle=ls))
                drawn = True
        pub = [r for r in data.published(model=model, hardware="cs2")
               if metric(r, "samples_per_s") is not None]
        xs, ys = xy(pub, "batch", "samples_per_s")
        if xs:
            ax.plot(xs, ys, label=f"published · {model} on CS-2", **style.published_kw(
                marker="*" if model == "bert-large" else "P"))
            drawn = True
    if drawn:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("global batch (sequences of 128)")
        ax.set_ylabel("samples/s")
        ax.set_title("BERT training throughput on one CS-2", fontsize=9)
        ax.legend(loc="best")
    else:
        _empty(ax)
    _measured_panel(axes[1], data, "bert-train-batch", "batch", ("samples_per_s",),
                    ylabel="samples/s", xlabel="batch", group="model")
    if axes[1].get_legend_handles_labels()[0]:
        axes[1].set_xscale("log", base=2)
    return _finish(fig)


def draw_bert_latency(data: Data):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("bert-infer-batch")
    ax = axes[0]
    if _lines(ax, pred, "batch", "latency_s", "ttft_s", scale=1e3):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences of 128)")
        ax.set_ylabel("latency per batch (ms)")
        ax.set_title("BERT-base classification latency (predicted)", fontsize=9)
        ax.legend(loc="upper left", ncol=2)
    else:
        _empty(ax)
    _measured_panel(axes[1], data, "bert-infer-batch", "batch", ("latency_s_p50", "latency_s"),
                    ylabel="latency p50 (ms)", xlabel="batch", scale=1e3, group="model")
    if axes[1].get_legend_handles_labels()[0]:
        axes[1].set_xscale("log", base=2)
    return _finish(fig)


# ---------------------------------------------------------------- scaling

def draw_scaling(data: Data):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    pred = data.get("gpt2xl-scaling", "predicted")
    ax0, ax1 = axes
    if _lines(ax0, pred, "devices", "tokens_per_s"):
        ax0.set_xscale("log", base=2)
        ax0.set_yscale("log")
        ax0.set_xlabel("devices (16 sequences of 1024 each)")
        ax0.set_ylabel("tokens/s (GPT-2 XL)")
        ax0.set_title("GPT-2 XL training throughput", fontsize=9)
        ax0.legend(loc="upper left", ncol=2, fontsize=6.5)
    else:
        _empty(ax0)
    for hw in _hw_order(pred):
        mine = [r for r in pred if r.get("hardware") == hw]
        base = {field(r, "devices"): metric(r, "tokens_per_s") for r in mine}
        if not base.get(1):
            continue
        xs = sorted(d for d in base if d and base[d])
        ax1.plot(xs, [base[d] / (d * base[1]) for d in xs], label=f"predicted · {style.hw_label(hw)}",
                 **style.predicted_kw(hw))
    for r in data.published():
        eff = metric(r, "scaling_efficiency")
        if eff is not None and isinstance(field(r, "devices"), (int, float)):
            ax1.plot([field(r, "devices")], [eff], **style.published_kw())
            ax1.annotate(style.hw_label(r.get("hardware")), (field(r, "devices"), eff), fontsize=7,
                         xytext=(6, -3), textcoords="offset points", color=style.SOURCE_STYLE["published"][0])
    ax1.plot([], [], label="published (arXiv:2310.04607 Tab. II)", **style.published_kw())
    meas = data.get("dp-scaling", "measured")
    effs = [(field(r, "devices"), metric(r, "scaling_efficiency")) for r in meas]
    effs = [(d, e) for d, e in effs if d and e is not None]
    if effs:
        ax1.plot([d for d, _ in effs], [e for _, e in effs], label="measured here (gloo, CPU processes)",
                 **style.measured_kw())
    ax1.set_xscale("log", base=2)
    ax1.set_ylim(0, 1.15)
    ax1.axhline(1.0, color="#999999", lw=0.8, ls=":")
    ax1.set_xlabel("devices")
    ax1.set_ylabel("scaling efficiency  T(n) / (n·T(1))")
    ax1.set_title("data-parallel scaling efficiency", fontsize=9)
    ax1.legend(loc="lower left", ncol=2, fontsize=6.5)
    return _finish(fig)


# ---------------------------------------------------------------- seq length, GAS

def draw_seq_length(data: Data):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("gpt2-seq-length")
    ax = axes[0]
    if _lines(ax, pred, "seq", "tokens_per_s"):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length (16k tokens per batch)")
        ax.set_ylabel("tokens/s (GPT-2 XL, one device)")
        ax.set_title("sequence length (predicted)", fontsize=9)
        ax.legend(loc="lower left", ncol=2, fontsize=6.5)
    else:
        _empty(ax)
    _measured_panel(axes[1], data, "gpt2-seq-length", "seq", ("tokens_per_s",), ylabel="tokens/s",
                    xlabel="sequence length", group="model")
    return _finish(fig)


def _gas_ratios(rows) -> dict:
    """(hardware, devices, micro) -> {gas: tokens/s relative to gas 1}."""
    table = {}
    for r in rows:
        g, d, b, t = field(r, "grad_accum") or 1, field(r, "devices") or 1, field(r, "batch"), \
            metric(r, "tokens_per_s")
        if b is None or t is None:
            continue
        table.setdefault((r.get("hardware"), d, b // (d * g)), {})[g] = t
    return {k: {g: t / v[1] for g, t in sorted(v.items())} for k, v in table.items() if v.get(1)}


def draw_gas(data: Data):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ratios = _gas_ratios(data.predicted("gas"))
    order = {h: i for i, h in enumerate(CATALOG)}
    for (hw, d, micro), v in sorted(ratios.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        ls = "-" if d == 8 else "--"
        ax.plot(list(v), list(v.values()), label=f"predicted · {style.hw_label(hw)} ×{d}, micro-batch {micro}",
                **style.predicted_kw(hw, linestyle=ls))
    for r in data.published():
        y = metric(r, "gas4_over_gas1")
        if y is not None:
            ax.plot([4], [y], **style.published_kw())
            ax.annotate(f"{style.hw_label(r.get('hardware'))} ×{field(r, 'devices')}", (4, y), fontsize=7,
                        xytext=(7, -3), textcoords="offset points", color=style.SOURCE_STYLE["published"][0])
    ax.plot([], [], label="published (arXiv:2310.04607 Fig. 6)", **style.published_kw())
    meas = _gas_ratios(data.get("gas", "measured"))
    for (hw, d, micro), v in meas.items():
        ax.plot(list(v), list(v.values()), label=f"measured here (micro-batch {micro})",
                **style.measured_kw(linestyle="-", linewidth=1))
    if not ratios and not meas:
        _empty(ax)
        return _finish(fig)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("gradient accumulation steps (GAS)")
    ax.set_ylabel("throughput / throughput at GAS 1")
    ax.set_title("GPT-2 XL: gradient accumulation", fontsize=9)
    ax.legend(loc="upper left", fontsize=6.5, ncol=2)
    return _finish(fig)


# ---------------------------------------------------------------- sparsity

def _speedups(rows, s: float) -> dict:
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


def _params(model: str, resize: dict | None = None) -> float | None:
    from llmbench.models.counting import param_count

    from .sweeps import spec_of

    try:
        return param_count(spec_of(model, resize))
    except Exception:  # noqa: BLE001
        return None


def draw_sparsity(data: Data):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    sp = _speedups(data.predicted("sparsity"), 0.9)
    hws = sorted({h for h, _ in sp}, key=lambda h: CATALOG.index(h) if h in CATALOG else 99)
    for hw in hws:
        pts = sorted((_params(m), v) for (h, m), v in sp.items() if h == hw and _params(m))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"predicted · {style.hw_label(hw)}",
                    **style.predicted_kw(hw))
    for r in data.published():
        v = (r.get("metrics") or {}).get("s0.9_over_dense")
        n = _params(r.get("model") or "")
        if v is None or not n:
            continue
        lo, hi = (float(x) for x in v.split("-")) if isinstance(v, str) else (float(v), float(v))
        ax.errorbar([n], [(lo + hi) / 2], yerr=[[(hi - lo) / 2], [(hi - lo) / 2]], capsize=3,
                    **style.published_kw())
    ax.plot([], [], label="published · CS-2 (arXiv:2310.04607 Fig. 7)", **style.published_kw())
    meas = data.get("sparsity", "measured")
    msp = {}
    for r in meas:
        s_ = field(r, "sparsity") or 0
        if s_:
            for (hw, m), v in _speedups(meas, s_).items():
                msp[(m, s_)] = (v, _params(m, field(r, "resize")), r)
    for (m, s_), (v, n, r) in sorted(msp.items(), key=lambda kv: kv[0][1]):
        if n:
            ax.plot([n], [v], label=f"measured here · {model_label(r)}, sparsity {s_:g}",
                    **style.measured_kw(marker="o" if s_ >= 0.9 else "h"))
    if not sp and not msp:
        _empty(ax)
        return _finish(fig)
    ax.axhline(1.0, color="#999999", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("model parameters")
    ax.set_ylabel("speed-up at 90% weight sparsity")
    ax.set_title("unstructured weight sparsity 0.9: speed-up against model size", fontsize=9)
    ax.legend(loc="upper left", fontsize=6.5, ncol=2)
    return _finish(fig)


# ---------------------------------------------------------------- GenSLM

def draw_genslm(data: Data):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("genslm", devices=1)
    ax = axes[0]
    drawn = False
    for hw in _hw_order(pred):
        pts = sorted((_params(r.get("model")), metric(r, "tokens_per_s")) for r in pred
                     if r.get("hardware") == hw and _params(r.get("model")) and metric(r, "tokens_per_s"))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"predicted · {style.hw_label(hw)}",
                    **style.predicted_kw(hw))
            drawn = True
    if drawn:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("GenSLM parameters (codon vocabulary, seq 1024)")
        ax.set_ylabel("tokens/s, one device")
        ax.set_title("GenSLM training throughput (predicted)", fontsize=9)
        ax.legend(loc="lower left", ncol=2, fontsize=6.5)
    else:
        _empty(ax)
    _measured_panel(axes[1], data, "genslm", "batch", ("tokens_per_s",), ylabel="tokens/s",
                    xlabel="batch (codon sequences)", group="model")
    return _finish(fig)


# ---------------------------------------------------------------- parity

def draw_parity(data: Data):
    plt = _plt()
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.2, 5.4))
    rows = [r for r in data.get("validation", "predicted")
            if metric(r, "published") and metric(r, "predicted")]
    if not rows:
        _empty(ax)
        return _finish(fig)
    pub = np.array([metric(r, "published") for r in rows])
    pre = np.array([metric(r, "predicted") for r in rows])
    lo, hi = min(pub.min(), pre.min()) / 2, max(pub.max(), pre.max()) * 2
    x = np.logspace(np.log10(lo), np.log10(hi), 50)
    ax.fill_between(x, x * 0.75, x * 1.25, color="#cccccc", alpha=0.5, label="±25% band")
    ax.plot(x, x, color="#666666", lw=0.8, label="predicted = published")
    for hw in _hw_order(rows):
        idx = [i for i, r in enumerate(rows) if r.get("hardware") == hw]
        ax.plot(pub[idx], pre[idx], label=style.hw_label(hw), color=style.hw_colour(hw), marker="D",
                markersize=6, markeredgecolor=style.SOURCE_STYLE["published"][0], linestyle="none")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published value (x: published)")
    ax.set_ylabel("predicted value (y: predicted)")
    ax.set_title("predicted vs published, every numeric row of published.csv", fontsize=9)
    ax.legend(loc="upper left", fontsize=6.5, ncol=2)
    return _finish(fig)


# ---------------------------------------------------------------- time to train, LLM inference

def draw_time_to_train(data: Data):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    rows = data.get("time-to-train", "predicted")
    for ax, (ds, model, pub_metric, unit, div) in zip(axes, (
            ("pile", "gpt3-20b", "epoch_time_h", "hours", 3600.0),
            ("sst2", "bert-large", "epoch_time_s", "seconds", 1.0))):
        mine = [r for r in rows if field(r, "dataset") == ds]
        hws = _hw_order(mine)
        vals = [metric(next(r for r in mine if r.get("hardware") == h), "epoch_time_s", "time_s") for h in hws]
        pts = [(h, v / div) for h, v in zip(hws, vals) if v]
        if not pts:
            _empty(ax)
            continue
        ax.barh([style.hw_label(h) for h, _ in pts], [v for _, v in pts],
                color=[style.hw_colour(h) for h, _ in pts], label="predicted (one device)")
        for h, v in pts:
            r = next(r for r in mine if r.get("hardware") == h)
            if (r.get("metrics") or {}).get("fits") is False:
                ax.text(v, style.hw_label(h), "  does not fit in memory", va="center", fontsize=7,
                        color="#b00000")
        for r in data.published(model=model):
            v = metric(r, pub_metric)
            if v is not None and r.get("hardware") in hws:
                ax.plot([v], [style.hw_label(r.get("hardware"))], label="published", **style.published_kw())
        from matplotlib.ticker import NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"{unit} per epoch")
        ax.set_title(f"one epoch of {'the Pile' if ds == 'pile' else 'SST-2'}: {model}", fontsize=9)
        ax.set_xlim(right=ax.get_xlim()[1] * 8)  # room for the "does not fit" notes
        handles, labels = ax.get_legend_handles_labels()
        seen = dict(zip(labels, handles))
        ax.legend(seen.values(), seen.keys(), loc="upper right", fontsize=7)
    return _finish(fig)


def draw_llm_inference(data: Data):
    plt = _plt()
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 4.0))
    rows = data.get("llm-inference", "predicted")
    models = sorted({r.get("model") for r in rows}, key=lambda m: _params(m) or 0)
    hws = _hw_order(rows)
    if not rows:
        _empty(ax)
        return _finish(fig)
    w = 0.8 / max(1, len(hws))
    for i, hw in enumerate(hws):
        for j, m in enumerate(models):
            r = next((r for r in rows if r.get("hardware") == hw and r.get("model") == m), None)
            v = metric(r, "decode_tokens_per_s_per_seq") if r else None
            if v:
                ax.bar(j + i * w, v, w, color=style.hw_colour(hw),
                       label=f"predicted · {style.hw_label(hw)}" if j == 0 or not ax.containers else None)
                ax.text(j + i * w, v, f"{int(metric(r, 'devices') or field(r, 'devices') or 0)}",
                        ha="center", va="bottom", fontsize=6.5)
    for r in data.published():
        v = metric(r, "decode_tokens_per_s_per_seq")
        if v is not None and r.get("model") in models and r.get("hardware") in hws:
            j, i = models.index(r.get("model")), hws.index(r.get("hardware"))
            ax.plot([j + i * w], [v], label="published (Cerebras, 2024)", **style.published_kw())
    ax.set_xticks(np.arange(len(models)) + w * (len(hws) - 1) / 2, models)
    ax.set_yscale("log")
    ax.set_ylabel("decode tokens/s per sequence (batch 1)")
    ax.set_title("LLM inference: tokens/s per user; the number on each bar = devices (wafers) needed",
                 fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, l in zip(handles, labels):
        seen.setdefault(l, h)
    ax.legend(seen.values(), seen.keys(), loc="upper right", fontsize=6.5)
    return _finish(fig)


def draw_streaming(data: Data):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    rows = data.get("streaming", "measured")
    if not rows:
        for ax in axes:
            _empty(ax)
        return _finish(fig)
    m = rows[-1].get("metrics") or {}
    c = style.SOURCE_STYLE["measured"][0]
    ax = axes[0]
    for key, label, kw in (("resident_loss", "measured here · resident", dict(marker="s", color="#555555")),
                           ("streamed_loss", "measured here · weight-streamed", dict(marker="o", color=c))):
        ys = m.get(key) or []
        if ys:
            ax.plot(range(1, len(ys) + 1), ys, label=label, linestyle="-", markersize=5, **kw)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    ax.set_title(f"same seed: max relative loss difference {fmt_num(m.get('max_rel_loss_diff'))}", fontsize=9)
    ax.legend(loc="upper right")
    ax = axes[1]
    vals = [m.get("resident_tokens_per_s"), m.get("streamed_tokens_per_s")]
    if all(isinstance(v, (int, float)) for v in vals):
        ax.barh(["resident", "weight-streamed"], vals, color=["#555555", c])
        ax.set_xlabel("tokens/s (measured here)")
        ratio = vals[1] / vals[0] if vals[0] else None
        note = "" if not isinstance(m.get("ratio"), (int, float)) or ratio is None or \
            abs(m["ratio"] / ratio - 1) < 0.05 else f"; stream compare's own ratio {fmt_num(m['ratio'])}"
        ax.set_title(f"streamed / resident tokens/s = {fmt_num(ratio)} ({m.get('n_layers', '?')} layers, "
                     f"width {m.get('d_model', '?')}{note})", fontsize=9)
    else:
        _empty(ax)
    return _finish(fig)


def fmt_num(v) -> str:
    return "n/a" if not isinstance(v, (int, float)) else f"{v:.3g}"


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec("roofline", "Roofline per accelerator", ("ceilings", "transformer-block", "gpt2xl-scaling"),
               "Each panel is one accelerator: the grey line is its roof (dense peak FLOP/s, then the slope "
               "of its device-memory bandwidth at low intensity). Squares are predicted training points "
               "(one GPT-2 XL layer at batch 8-64, and the whole GPT-2 XL model) placed at their "
               "arithmetic intensity from models/ counting, and triangles BERT-base inference at batch "
               "1-1024. The last panel is this machine: measured GEMM and copy ceilings (green line) "
               "with the measured points (green circles). A point far below its roof is losing time "
               "to something the roof does not count: on CS-2/CS-3 that is streaming the weights "
               "from MemoryX (training) and small batches that cannot fill the wafer.",
               draw_roofline),
    FigureSpec("block", "Transformer block by precision and batch", ("transformer-block",),
               "One GPT-2 XL layer (d_model 1600, seq 1024), forward + backward. Left panels: predicted "
               "TFLOP/s per accelerator for each precision as the batch grows; the curve flattens where "
               "the layer becomes compute-bound. Right: what this CPU measured (green), with the "
               "prediction for this CPU as a grey line when present.", draw_block),
    FigureSpec("bert_throughput", "BERT training throughput against batch (CS-2)", ("bert-train-batch",),
               "Left: predicted samples/s of BERT-base (solid) and BERT-large (dashed) on one CS-2, with "
               "the published points (stars: arXiv:2409.00287 peak values and ALCF run logs). Right: "
               "BERT training measured on this machine against batch.", draw_bert_throughput),
    FigureSpec("bert_latency", "BERT inference latency against batch", ("bert-infer-batch",),
               "Predicted latency of one classification batch (sequence 128) per accelerator, log-log: a "
               "flat start means the batch is latency- or memory-bound (the weights are read once per "
               "batch), a slope of 1 means compute-bound. The paper reports CS-2 latency nearly flat in "
               "batch. Right: p50 latency measured here.", draw_bert_latency),
    FigureSpec("scaling", "GPT-2 XL scaling over devices", ("gpt2xl-scaling", "dp-scaling"),
               "Left: predicted GPT-2 XL training tokens/s against device count (16 sequences per "
               "device). Right: scaling efficiency T(n)/(n·T(1)); 1.0 is perfect. Stars are the published "
               "efficiencies of arXiv:2310.04607 Table II at their device counts; green is the "
               "2-process data-parallel run measured here.", draw_scaling),
    FigureSpec("seq_length", "Sequence length", ("gpt2-seq-length",),
               "Tokens/s against sequence length at a constant 16k tokens per batch: the attention "
               "square grows with T, so throughput falls as T grows; how fast depends on how much of "
               "the step is attention.", draw_seq_length),
    FigureSpec("gas", "Gradient accumulation (GAS)", ("gas",),
               "Throughput at GAS g relative to GAS 1, same micro-batch: accumulation spreads one "
               "gradient all-reduce over g micro-batches, so the gain is large where communication "
               "was exposed (many devices, small micro-batch) and about 1 on one device.", draw_gas),
    FigureSpec("sparsity", "Weight sparsity speed-up against model size", ("sparsity",),
               "Speed-up of 90% unstructured weight sparsity over dense, against model size. Only "
               "hardware that skips zero weights (CS-2, CS-3) gains; its gain grows with size because "
               "dense-layer FLOPs grow faster than attention and element-wise work. Stars: "
               "arXiv:2310.04607 Fig. 7 (the GPT-2 XL value is a range).", draw_sparsity),
    FigureSpec("genslm", "GenSLM", ("genslm",),
               "GenSLM (a GPT over codons, vocabulary 71, sequence 1024): predicted tokens/s on one "
               "device against model size, and what this machine measured. The published comparisons "
               "(Table IV of arXiv:2310.04607) are ratios between systems: see the table below.",
               draw_genslm),
    FigureSpec("parity", "Predicted against published", ("validation",),
               "Every numeric row of published.csv: x the published value, y llmbench's prediction for "
               "the same configuration, both axes log. Points inside the grey band are within 25%.",
               draw_parity),
    FigureSpec("time_to_train", "Time to train one epoch", ("time-to-train",),
               "Predicted time for one epoch on one device (bars), against the published CS-2 "
               "projections (stars): the Pile for GPT-3 20B (hours), SST-2 for BERT-large (seconds).",
               draw_time_to_train),
    FigureSpec("llm_inference", "LLM inference: tokens/s per user and devices needed",
               ("llm-inference",),
               "Predicted decode tokens/s per sequence at batch 1 for Llama-3.1 models; the number on a "
               "bar is how many devices (wafers for CS-2/CS-3 in SRAM-pipeline mode) hold the model. "
               "Stars: Cerebras' published 1,800 tokens/s for Llama-3.1-8B on one CS-3.",
               draw_llm_inference),
    FigureSpec("streaming", "Weight streaming on this machine", ("streaming",),
               "The same small GPT trained twice in one process with the same seed: with its weights "
               "resident, and streamed layer by layer from a host-side parameter store (the "
               "MemoryX/SwarmX idea, llmbench/streaming). Left: the two loss curves should lie on top "
               "of each other. Right: tokens/s of each; a ratio near 1 means the streaming is hidden "
               "behind compute.", draw_streaming),
)
