"""Figures of the training studies: BERT against batch, scaling, sequence length, GAS, sparsity,
GenSLM. Each `draw_*(data)` returns a matplotlib Figure."""
from __future__ import annotations

from . import style
from .plotkit import (
    empty, finish, gas_ratios, hw_order, measured_panel, model_label, params_of, predicted_lines, pyplot,
    speedups,
)
from .rows import Data, field, metric, xy
from .sweeps import CATALOG


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
        ax.set_xscale("log", base=2)
        ax.set_xlabel("global batch (sequences of 128)")
        ax.set_ylabel("samples/s")
        ax.set_title("BERT training throughput on one CS-2", fontsize=9)
        ax.legend(loc="best")
    else:
        empty(ax)
    measured_panel(axes[1], data, "bert-train-batch", "batch", ("samples_per_s",),
                    ylabel="samples/s", xlabel="batch", group="model")
    if axes[1].get_legend_handles_labels()[0]:
        axes[1].set_xscale("log", base=2)
    return finish(fig)


def draw_bert_latency(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("bert-infer-batch")
    ax = axes[0]
    if predicted_lines(ax, pred, "batch", "latency_s_p50", "time_to_first_token_s", scale=1e3):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences of 128)")
        ax.set_ylabel("latency per batch (ms)")
        ax.set_title("BERT-base classification latency (predicted)", fontsize=9)
        ax.legend(loc="upper left", ncol=2)
    else:
        empty(ax)
    measured_panel(axes[1], data, "bert-infer-batch", "batch", ("latency_s_p50", "latency_s"),
                    ylabel="latency p50 (ms)", xlabel="batch", scale=1e3, group="model")
    if axes[1].get_legend_handles_labels()[0]:
        axes[1].set_xscale("log", base=2)
    return finish(fig)


def draw_scaling(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    pred = data.get("gpt2xl-scaling", "predicted")
    ax0, ax1 = axes
    if predicted_lines(ax0, pred, "devices", "tokens_per_s"):
        ax0.set_xscale("log", base=2)
        ax0.set_yscale("log")
        ax0.set_xlabel("devices (16 sequences of 1024 each)")
        ax0.set_ylabel("tokens/s (GPT-2 XL)")
        ax0.set_title("GPT-2 XL training throughput", fontsize=9)
        ax0.legend(loc="upper left", ncol=2, fontsize=6.5)
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
    ax1.set_xscale("log", base=2)
    ax1.set_ylim(0, top)
    ax1.axhline(1.0, color="#999999", lw=0.8, ls=":")
    ax1.set_xlabel("devices")
    ax1.set_ylabel("scaling efficiency  T(n) / (n·T(1))")
    ax1.set_title("data-parallel scaling efficiency", fontsize=9)
    ax1.legend(loc="lower left", ncol=2, fontsize=6.5)
    return finish(fig)


def draw_seq_length(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("gpt2-seq-length")
    ax = axes[0]
    if predicted_lines(ax, pred, "seq", "tokens_per_s"):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length (16k tokens per batch)")
        ax.set_ylabel("tokens/s (GPT-2 XL, one device)")
        ax.set_title("sequence length (predicted)", fontsize=9)
        ax.legend(loc="lower left", ncol=2, fontsize=6.5)
    else:
        empty(ax)
    measured_panel(axes[1], data, "gpt2-seq-length", "seq", ("tokens_per_s",), ylabel="tokens/s",
                    xlabel="sequence length", group="model")
    return finish(fig)


def draw_gas(data: Data):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ratios = gas_ratios(data.predicted("gas"))
    order = {h: i for i, h in enumerate(CATALOG)}
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
    meas = gas_ratios(data.get("gas", "measured"), global_batch=False)
    for (hw, d, micro), v in gas_ratios(data.predicted("gas", mirrors=True)).items():
        ax.plot(list(v), list(v.values()), label=f"predicted for the measured points · {style.hw_label(hw)}",
                **style.predicted_kw(hw, linestyle=":"))
    for (hw, d, micro), v in meas.items():
        ax.plot(list(v), list(v.values()), label=f"measured here (micro-batch {micro})",
                **style.measured_kw(linestyle="-", linewidth=1))
    if not ratios and not meas:
        empty(ax)
        return finish(fig)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("gradient accumulation steps (GAS)")
    ax.set_ylabel("throughput / throughput at GAS 1")
    ax.set_title("GPT-2 XL: gradient accumulation", fontsize=9)
    ax.legend(loc="upper left", fontsize=6.5, ncol=2)
    return finish(fig)


def draw_sparsity(data: Data):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    sp = speedups(data.predicted("sparsity"), 0.9)
    hws = sorted({h for h, _ in sp}, key=lambda h: CATALOG.index(h) if h in CATALOG else 99)
    for hw in hws:
        pts = sorted((params_of(m), v) for (h, m), v in sp.items() if h == hw and params_of(m))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"predicted · {style.hw_label(hw)}",
                    **style.predicted_kw(hw))
    for r in data.published():
        v = (r.get("metrics") or {}).get("s0.9_over_dense")
        n = params_of(r.get("model") or "")
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
    ax.set_xscale("log")
    ax.set_xlabel("model parameters")
    ax.set_ylabel("speed-up at 90% weight sparsity")
    ax.set_title("unstructured weight sparsity 0.9: speed-up against model size", fontsize=9)
    ax.legend(loc="upper left", fontsize=6.5, ncol=2)
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
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("GenSLM parameters (codon vocabulary, seq 1024)")
        ax.set_ylabel("tokens/s, one device")
        ax.set_title("GenSLM training throughput (predicted)", fontsize=9)
        ax.legend(loc="lower left", ncol=2, fontsize=6.5)
    else:
        empty(ax)
    measured_panel(axes[1], data, "genslm", "batch", ("tokens_per_s",), ylabel="tokens/s",
                    xlabel="batch (codon sequences)", group="model")
    return finish(fig)
