"""Figures of the training studies: BERT against batch, scaling, sequence length, GAS, sparsity,
GenSLM. Each `draw_*(data)` returns a matplotlib Figure."""
from __future__ import annotations

from llmbench.results.published import parse_range

from . import style
from .plotkit import (
    empty, finish, gas_ratios, label_axes, measured_panel, model_label, params_of, predicted_lines,
    pyplot, speedups,
)
from .rows import Data, field, hw_order, metric, value, xy


def draw_bert_throughput(data: Data):
    plt = pyplot()
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
        label_axes(ax, x="global batch (sequences of 128)", y="samples/s", xlog=2,
                   title="BERT training throughput on one CS-2", legend={"loc": "best"})
    else:
        empty(ax)
    measured_panel(axes[1], data, "bert-train-batch", "batch", "samples_per_s",
                   ylabel="samples/s", xlabel="global batch", group="model", xlog=2)
    return finish(fig)


def draw_bert_latency(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("bert-infer-batch")
    ax = axes[0]
    if predicted_lines(ax, pred, "batch", "latency_s_p50", scale=1e3):
        label_axes(ax, x="batch (sequences of 128)", y="latency per batch (ms)", xlog=2, ylog=True,
                   title="BERT-base classification latency (predicted)",
                   legend={"loc": "upper left", "ncol": 2})
    else:
        empty(ax)
    measured_panel(axes[1], data, "bert-infer-batch", "batch", "latency_s_p50",
                   ylabel="latency p50 (ms)", xlabel="batch", scale=1e3, group="model", xlog=2)
    return finish(fig)


def draw_scaling(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    pred = data.predicted("dp-scaling")
    ax0, ax1 = axes
    if predicted_lines(ax0, pred, "devices", "tokens_per_s"):
        label_axes(ax0, x="devices (16 sequences of 1024 each)", y="tokens/s (GPT-2 XL)", xlog=2,
                   ylog=True, title="GPT-2 XL training throughput",
                   legend={"loc": "upper left", "ncol": 2, "fontsize": 6.5})
    else:
        empty(ax0)
    for hw in hw_order(pred):
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
    top = 1.3  # efficiencies above this are off the scale: drawn at the top edge with their value
    for d, e in effs:
        y = min(e, top - 0.05)
        ax1.plot([d], [y], label="measured here (gloo, CPU processes)",
                 **style.measured_kw(marker="o" if e == y else "^"))
        ax1.annotate(f"{e:.2f}" + ("" if e == y else " (off scale)"), (d, y), fontsize=7, xytext=(6, 4),
                     textcoords="offset points", color=style.SOURCE_STYLE["measured"][0])
    ax1.set_ylim(0, top)
    ax1.axhline(1.0, color="#999999", lw=0.8, ls=":")
    label_axes(ax1, x="devices", y="scaling efficiency  T(n) / (n·T(1))", xlog=2,
               title="data-parallel scaling efficiency", legend={"loc": "lower left", "ncol": 2, "fontsize": 6.5})
    return finish(fig)


def draw_seq_length(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("gpt2-seq-length")
    ax = axes[0]
    if predicted_lines(ax, pred, "seq_len", "tokens_per_s"):
        label_axes(ax, x="sequence length (16k tokens per batch)", y="tokens/s (GPT-2 XL, one device)",
                   xlog=2, ylog=True, title="sequence length (predicted)",
                   legend={"loc": "lower left", "ncol": 2, "fontsize": 6.5})
    else:
        empty(ax)
    measured_panel(axes[1], data, "gpt2-seq-length", "seq_len", "tokens_per_s", ylabel="tokens/s",
                   xlabel="sequence length", group="model")
    return finish(fig)


def draw_gas(data: Data):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ratios = gas_ratios(data.predicted("gas"))
    order = {h: i for i, h in enumerate(hw_order(data.predicted("gas")))}
    for (hw, d, micro), v in sorted(ratios.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        ls = "-" if d == 8 else "--"
        label = f"predicted · {style.hw_label(hw)} ×{d}, micro-batch {micro}"
        ax.plot(list(v), list(v.values()), label=label,
                **style.predicted_kw(hw, linestyle=ls))
    for r in data.published():
        y = metric(r, "gas4_over_gas1")
        if y is not None:
            ax.plot([4], [y], **style.published_kw())
            ax.annotate(f"{style.hw_label(r.get('hardware'))} ×{field(r, 'devices')}", (4, y), fontsize=7,
                        xytext=(7, -3), textcoords="offset points", color=style.SOURCE_STYLE["published"][0])
    ax.plot([], [], label="published (arXiv:2310.04607 Fig. 6)", **style.published_kw())
    meas = gas_ratios(data.get("gas", "measured"))
    for (hw, d, micro), v in gas_ratios(data.predicted("gas", mirrors=True)).items():
        ax.plot(list(v), list(v.values()), label=f"predicted for the measured points · {style.hw_label(hw)}",
                **style.predicted_kw(hw, linestyle=":"))
    for (hw, d, micro), v in meas.items():
        ax.plot(list(v), list(v.values()), label=f"measured here (micro-batch {micro})",
                **style.measured_kw(linestyle="-", linewidth=1))
    if not ratios and not meas:
        empty(ax)
        return finish(fig)
    label_axes(ax, x="gradient accumulation steps (GAS)", y="throughput / throughput at GAS 1", xlog=2,
               title="GPT-2 XL: gradient accumulation", legend={"loc": "upper left", "fontsize": 6.5, "ncol": 2})
    return finish(fig)


def draw_sparsity(data: Data):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    sp = speedups(data.predicted("sparsity"), 0.9)
    hws = [h for h in hw_order(data.predicted("sparsity")) if any(k[0] == h for k in sp)]
    for hw in hws:
        pts = sorted((params_of(m), v) for (h, m), v in sp.items() if h == hw and params_of(m))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"predicted · {style.hw_label(hw)}",
                    **style.predicted_kw(hw))
    for r in data.published():
        rng = parse_range(value(r, "s0.9_over_dense")) if value(r, "s0.9_over_dense") is not None else None
        n = params_of(r.get("model") or "")
        if rng is None or not n:
            continue
        lo, hi = rng
        ax.errorbar([n], [(lo + hi) / 2], yerr=[[(hi - lo) / 2], [(hi - lo) / 2]], capsize=3,
                    **style.published_kw())
    ax.plot([], [], label="published · CS-2 (arXiv:2310.04607 Fig. 7)", **style.published_kw())
    meas = data.get("sparsity", "measured")
    msp = {}
    for r in meas:
        s_ = field(r, "sparsity") or 0
        if s_:
            for (hw, m), v in speedups(meas, s_).items():
                msp[(m, s_)] = (v, params_of(m, field(r, "resize")), r)
    for (m, s_), (v, n, r) in sorted(msp.items(), key=lambda kv: kv[0][1]):
        if n:
            ax.plot([n], [v], label=f"measured here · {model_label(r)}, sparsity {s_:g}",
                    **style.measured_kw(marker="o" if s_ >= 0.9 else "h"))
    if not sp and not msp:
        empty(ax)
        return finish(fig)
    ax.axhline(1.0, color="#999999", lw=0.8, ls=":")
    label_axes(ax, x="model parameters", y="speed-up at 90% weight sparsity", xlog=True,
               title="unstructured weight sparsity 0.9: speed-up against model size",
               legend={"loc": "upper left", "fontsize": 6.5, "ncol": 2})
    return finish(fig)


def draw_genslm(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("genslm", devices=1)
    ax = axes[0]
    drawn = False
    for hw in hw_order(pred):
        pts = sorted((params_of(r.get("model")), metric(r, "tokens_per_s")) for r in pred
                     if r.get("hardware") == hw and params_of(r.get("model")) and metric(r, "tokens_per_s"))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"predicted · {style.hw_label(hw)}",
                    **style.predicted_kw(hw))
            drawn = True
    if drawn:
        label_axes(ax, x="GenSLM parameters (codon vocabulary, seq 1024)", y="tokens/s, one device",
                   xlog=True, ylog=True, title="GenSLM training throughput (predicted)",
                   legend={"loc": "lower left", "ncol": 2, "fontsize": 6.5})
    else:
        empty(ax)
    measured_panel(axes[1], data, "genslm", "batch", "tokens_per_s", ylabel="tokens/s",
                   xlabel="batch (codon sequences)", group="model")
    return finish(fig)
