"""Figures about machines: rooflines, the transformer block, inference, time to train, parity,
weight streaming. Each `draw_*(data)` returns a matplotlib Figure."""
from __future__ import annotations

from llmbench.point import precision_for

from . import style
from .plotkit import (
    empty, figure_legend, finish, fmt_num, label_axes, measured_panel, params_of, predicted_lines,
    pyplot,
)
from .rows import Data, ceilings_of, devices_of, field, hw_order, metric, value, workload

#: the TFLOP/s a roofline point is drawn at: all FLOPs executed (recomputation included) per
#: second per device; the block suite measures fwd+bwd of one layer under its own name
ROOF_TFLOPS = {"predicted": "executed_tflops", "measured": "fwd_bwd_tflops"}


def _intensity(r) -> float | None:
    """Training FLOPs / bytes moved (forward + backward) of a row's workload, from models/
    counting: one layer for the block suite, the whole model otherwise."""
    from llmbench.models.counting import layer_ops, model_ops

    w = workload(r)
    if w is None:
        return None
    try:
        spec = w.spec()
        ops = layer_ops if w.suite == "block" else model_ops
        rows = ops(spec, w.batch, w.seq_len, w.precision or "bf16")
    except ValueError:  # a model name the presets do not know
        return None
    flops = sum(o.flops + o.flops_bwd for o in rows)
    moved = sum(o.bytes + o.bytes_bwd for o in rows)
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

    w, lat = workload(r), metric(r, "latency_s_p50")
    if w is None or not lat:
        return None
    try:
        ops = model_ops(w.spec(), w.batch, w.seq_len, w.precision or "bf16")
    except ValueError:
        return None
    flops, moved = sum(o.flops for o in ops), sum(o.bytes for o in ops)
    return (flops / moved, flops / lat / devices_of(r) / 1e12) if moved else None


def _roof_points(ax, rows, *, colour, label, measured=False, marker="s") -> bool:
    pts = []
    for r in rows:
        if r.get("suite") == "infer":
            p = _infer_point(r)
        else:
            ai, y = _intensity(r), metric(r, ROOF_TFLOPS[r["source"]])
            p = (ai, y) if ai and y else None
        if p:
            pts.append(p)
    if not pts:
        return False
    kw = style.measured_kw() if measured else dict(color=colour, marker=marker, markersize=5,
                                                       linestyle="none", markeredgecolor="white")
    ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **kw)
    return True


def draw_roofline(data: Data):
    """One panel per accelerator the block study was predicted for, then this machine."""
    from llmbench.hardware import catalog

    plt = pyplot()
    cat = catalog()
    pred = data.predicted("transformer-block") + data.predicted("dp-scaling", devices=1)
    hws = [h for h in hw_order(data.predicted("transformer-block")) if h in cat]
    n = len(hws) + 1
    cols = 4
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(13, 3.0 * ((n + cols - 1) // cols)),
                             squeeze=False)
    flat = list(axes.flat)
    for ax, h in zip(flat, hws):
        hw = cat[h]
        prec = precision_for(hw)
        mem = hw.device_memory
        _roof(ax, hw.peak(prec), mem.bandwidth_bytes_per_s, "#555555", f"roof {prec} · {mem.name}")
        mine = [r for r in pred if r.get("hardware") == h and field(r, "precision") == prec]
        _roof_points(ax, mine, colour=style.hw_colour(h), label="predicted · GPT-2 XL training")
        inf = [r for r in data.predicted("bert-infer-batch") if r.get("hardware") == h]
        _roof_points(ax, inf, colour=style.hw_colour(h), label="predicted · BERT-base inference", marker="^")
        ax.set_title(style.hw_label(h), fontsize=9)
    _measured_roofline(flat[len(hws)], data)
    for ax in flat[:n]:
        label_axes(ax, x="FLOP / byte", y="TFLOP/s", xlog=True, ylog=True,
                   legend={"loc": "lower right", "fontsize": 6.5})
        ax.set_xlim(0.1, 1e4)
        ax.minorticks_off()  # 11 log-log panels: minor ticks cost seconds to lay out, add little
    for ax in flat[n:]:
        ax.axis("off")
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.06, top=0.96, wspace=0.28, hspace=0.42)
    return fig


def _measured_roofline(ax, data: Data) -> None:
    ax.set_title("this machine (measured ceilings)", fontsize=9)
    peaks, bw = {}, 0.0
    for r in data.get("ceilings", "measured"):
        p, b = ceilings_of(r)
        bw = max(bw, b)
        for dt, v in p.items():
            peaks[dt] = max(v, peaks.get(dt, 0))
    for dt, peak in sorted(peaks.items()):
        _roof(ax, peak, bw, style.SOURCE_STYLE["measured"][0] if dt == "fp32" else "#88bb88",
              f"measured ceiling {dt} · copy {bw / 1e9:.0f} GB/s")
    drawn = _roof_points(ax, data.get("transformer-block", "measured"), colour=None,
                         label="measured here · block", measured=True)
    drawn |= _roof_points(ax, data.get("bert-infer-batch", "measured"), colour=None,
                          label="measured here · BERT inference", measured=True)
    drawn |= _roof_points(ax, data.predicted("transformer-block", mirrors=True),
                          colour=style.hw_colour("cpu"),
                          label="predicted for this CPU")
    if not drawn and not peaks:
        ax.text(0.5, 0.5, "not measured / not available", ha="center", va="center",
                transform=ax.transAxes, color="#888888", style="italic")


def draw_block(data: Data):
    plt = pyplot()
    rows = data.predicted("transformer-block")
    precs = [p for p in ("fp32", "fp16", "bf16") if any(field(r, "precision") == p for r in rows)]
    fig, axes = plt.subplots(1, len(precs) + 1, figsize=(4.2 * (len(precs) + 1), 3.6), squeeze=False)
    for ax, p in zip(axes[0], precs):
        predicted_lines(ax, [r for r in rows if field(r, "precision") == p], "batch", "achieved_tflops")
        label_axes(ax, x="batch (sequences of 1024)", y="TFLOP/s (fwd+bwd, one layer)", xlog=2, ylog=True,
                   title=f"predicted, {p}")
    if not precs:
        empty(axes[0][0], "no prediction available")
    measured_panel(axes[0][-1], data, "transformer-block", "batch", "fwd_bwd_tflops",
                   y_predicted="achieved_tflops", ylabel="TFLOP/s (fwd+bwd)", xlabel="batch",
                   group="precision")
    return figure_legend(fig, axes[0][:-1])


def draw_parity(data: Data):
    plt = pyplot()
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.2, 5.4))
    rows = [r for r in data.get("validation", "predicted")
            if metric(r, "published") and metric(r, "predicted")]
    if not rows:
        empty(ax)
        return finish(fig)
    pub = np.array([metric(r, "published") for r in rows])
    pre = np.array([metric(r, "predicted") for r in rows])
    lo, hi = min(pub.min(), pre.min()) / 2, max(pub.max(), pre.max()) * 2
    x = np.logspace(np.log10(lo), np.log10(hi), 50)
    ax.fill_between(x, x * 0.75, x * 1.25, color="#cccccc", alpha=0.5, label="±25% band")
    ax.plot(x, x, color="#666666", lw=0.8, label="predicted = published")
    for hw in hw_order(rows):
        idx = [i for i, r in enumerate(rows) if r.get("hardware") == hw]
        ax.plot(pub[idx], pre[idx], label=style.hw_label(hw), color=style.hw_colour(hw), marker="D",
                markersize=6, markeredgecolor=style.SOURCE_STYLE["published"][0], linestyle="none")
    label_axes(ax, x="published value (x: published)", y="predicted value (y: predicted)", xlog=True,
               ylog=True, title="predicted vs published, every numeric row of published.csv",
               legend={"loc": "upper left", "fontsize": 6.5, "ncol": 2})
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    return finish(fig)


def draw_time_to_train(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    rows = data.predicted("time-to-train")
    for ax, (ds, model, pub_metric, unit, div) in zip(axes, (
            ("pile", "gpt3-20b", "epoch_time_h", "hours", 3600.0),
            ("sst2", "bert-large", "epoch_time_s", "seconds", 1.0))):
        mine = [r for r in rows if (r.get("environment") or {}).get("dataset") == ds]
        hws = hw_order(mine)
        vals = [metric(next(r for r in mine if r.get("hardware") == h), "epoch_time_s") for h in hws]
        pts = [(h, v / div) for h, v in zip(hws, vals) if v]
        if not pts:
            empty(ax)
            continue
        ax.barh([style.hw_label(h) for h, _ in pts], [v for _, v in pts],
                color=[style.hw_colour(h) for h, _ in pts], label="predicted (one device)")
        for h, v in pts:
            r = next(r for r in mine if r.get("hardware") == h)
            if value(r, "fits") is False:
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
    return finish(fig)


def draw_llm_inference(data: Data):
    plt = pyplot()
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 4.0))
    rows = data.predicted("llm-inference")
    models = sorted({r.get("model") for r in rows}, key=lambda m: params_of(m) or 0)
    hws = hw_order(rows)
    if not rows:
        empty(ax)
        return finish(fig)
    w = 0.8 / max(1, len(hws))
    for i, hw in enumerate(hws):
        for j, m in enumerate(models):
            r = next((r for r in rows if r.get("hardware") == hw and r.get("model") == m), None)
            v = metric(r, "decode_tokens_per_s_per_seq") if r else None
            if v:
                ax.bar(j + i * w, v, w, color=style.hw_colour(hw),
                       label=f"predicted · {style.hw_label(hw)}" if j == 0 or not ax.containers else None)
                ax.text(j + i * w, v, f"{devices_of(r)}", ha="center", va="bottom", fontsize=6.5)
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
    return finish(fig)


def draw_streaming(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    rows = data.get("streaming", "measured")
    if not rows:
        for ax in axes:
            empty(ax)
        return finish(fig)
    r = rows[-1]
    c = style.SOURCE_STYLE["measured"][0]
    ax = axes[0]
    for key, label, kw in (("resident_loss", "measured here · resident", dict(marker="s", color="#555555")),
                           ("streamed_loss", "measured here · weight-streamed", dict(marker="o", color=c))):
        ys = value(r, key) or []
        if ys:
            ax.plot(range(1, len(ys) + 1), ys, label=label, linestyle="-", markersize=5, **kw)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    ax.set_title(f"same seed: max relative loss difference {fmt_num(metric(r, 'max_rel_loss_diff'))}", fontsize=9)
    ax.legend(loc="upper right")
    ax = axes[1]
    vals = [metric(r, "resident_tokens_per_s"), metric(r, "streamed_tokens_per_s")]
    if all(isinstance(v, (int, float)) for v in vals):
        ax.barh(["resident", "weight-streamed"], vals, color=["#555555", c])
        ax.set_xlabel("tokens/s (measured here)")
        ratio = vals[1] / vals[0] if vals[0] else None
        own = metric(r, "ratio")
        note = "" if own is None or ratio is None or abs(own / ratio - 1) < 0.05 \
            else f"; stream compare's own ratio {fmt_num(own)}"
        ax.set_title(f"streamed / resident tokens/s = {fmt_num(ratio)} ({value(r, 'n_layers') or '?'} layers, "
                     f"width {value(r, 'd_model') or '?'}{note})", fontsize=9)
    else:
        empty(ax)
    return finish(fig)
