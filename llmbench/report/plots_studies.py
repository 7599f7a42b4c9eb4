"""Figures of the training studies: BERT against batch, scaling, sequence length, GAS, sparsity,
GenSLM. Each `draw_*(data)` returns a matplotlib Figure."""
from __future__ import annotations

from llmbench.published import parse_range

from . import style
from .plotkit import (
    empty, finish, gas_ratios, hollow, label_axes, mark_unfit, measured_panel, params_of, predicted_lines,
    pyplot, unfit,
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
                mark_unfit(ax, [r for r in pred if r.get("hardware") == hw and r.get("model") == model],
                           "batch", "samples_per_s", hw=hw)
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
        bad = sorted(field(r, "devices") for r in mine if unfit(r) and base.get(field(r, "devices")))
        if bad:
            hollow(ax1, bad, [base[d] / (d * base[1]) for d in bad], hw)
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
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.2))
    pred = data.predicted("gpt2-seq-length")
    ax = axes[0]
    if predicted_lines(ax, [r for r in pred if r.get("model") == "gpt2-xl"], "seq_len", "tokens_per_s"):
        predicted_lines(ax, [r for r in pred if r.get("model") != "gpt2-xl"], "seq_len", "tokens_per_s",
                        label_suffix=" · GPT-3 13B, batch 1", linestyle="--")
        label_axes(ax, x="sequence length (GPT-2 XL: 16k tokens per batch, positions extended)",
                   y="tokens/s, one device", xlog=2, ylog=True,
                   title="Table III: sequence length (predicted)",
                   legend={"loc": "upper center", "bbox_to_anchor": (0.5, -0.18), "ncol": 3, "fontsize": 6})
    else:
        empty(ax)
    measured_panel(axes[1], data, "gpt2-seq-length", "seq_len", "tokens_per_s", ylabel="tokens/s",
                   xlabel="sequence length", group="model")
    return finish(fig)


def _gas_panel(r: dict) -> str:
    """Which panel of Fig. 6 a predicted GAS row belongs to: (b) SN30 local batches, (c) POD16, (a)."""
    if r.get("hardware") == "sn30" and field(r, "micro_batch") is not None:
        return "b"
    return "c" if r.get("hardware") == "bow-ipu" and field(r, "pp") == 4 else "a"


def draw_gas(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    pred = data.predicted("gas")
    panel = _gas_panel
    _gas_a(axes[0], data, [r for r in pred if panel(r) == "a"])
    ax = axes[1]
    b = [r for r in pred if panel(r) == "b"]
    for m, ls in ((1, "-"), (4, "--"), (16, ":")):
        predicted_lines(ax, [r for r in b if field(r, "micro_batch") == m], "grad_accum", "samples_per_s",
                        label_suffix=f" ×8, local batch {m}", linestyle=ls)
    if b:
        label_axes(ax, x="GAS", y="samples/s", xlog=2, title="(b) SN30, 8 RDUs: local batch and GAS",
                   legend={"loc": "upper left", "fontsize": 6.5})
    else:
        empty(ax)
    ax = axes[2]
    c = [r for r in pred if panel(r) == "c"]
    if predicted_lines(ax, c, "grad_accum", "samples_per_s", label_suffix=" POD16 (4 × 4 IPUs)"):
        label_axes(ax, x="GAS", y="samples/s", xlog=2, title="(c) Graphcore POD16: GAS 16-2048",
                   legend={"loc": "lower right", "fontsize": 6.5})
    else:
        empty(ax)
    return finish(fig)


def _gas_a(ax, data: Data, pred: list[dict]) -> None:
    ratios = gas_ratios(pred)
    order = {h: i for i, h in enumerate(hw_order(pred))}
    for (hw, d, micro), v in sorted(ratios.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        ls = "-" if d == 8 else "--"
        label = f"predicted · {style.hw_label(hw)} ×{d}, micro-batch {micro}"
        ax.plot(list(v), list(v.values()), label=label, **style.predicted_kw(hw, linestyle=ls))
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
        return empty(ax)
    label_axes(ax, x="gradient accumulation steps (GAS)", y="throughput / throughput at GAS 1", xlog=2,
               title="(a) GPT-2 XL: GAS 1-8", legend={"loc": "upper left", "fontsize": 5.5, "ncol": 2})


SPARSE_MODELS = ("gpt2-xl", "gpt3-6.7b", "gpt3-30b")


def draw_sparsity(data: Data):
    """Fig. 7's axes: throughput relative to dense against sparsity 0 / 0.6 / 0.8 / 0.9, one panel
    per model of the seed, one line per hardware; the published speed-up at 0.9 as a star."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(15, 4.0))
    pred = data.predicted("sparsity")
    pub = {r.get("model"): parse_range(value(r, "s0.9_over_dense")) for r in data.published()
           if value(r, "s0.9_over_dense") is not None}
    for ax, model in zip(axes, SPARSE_MODELS):
        rows = [r for r in pred if r.get("model") == model]
        drawn = False
        for hw in hw_order(rows):
            mine = [r for r in rows if r.get("hardware") == hw]
            dense = next((metric(r, "tokens_per_s") for r in mine if not field(r, "sparsity")), None)
            xs, ys = xy(mine, "sparsity", "tokens_per_s")
            if dense and xs:
                ax.plot(xs, [y / dense for y in ys], label=f"predicted · {style.hw_label(hw)}",
                        **style.predicted_kw(hw))
                bad = [(x, y / dense) for x, y in zip(xs, ys) if any(unfit(r) for r in mine
                                                                   if field(r, "sparsity", 0.0) == x)]
                if bad:
                    hollow(ax, *zip(*bad), hw)
                drawn = True
        if pub.get(model):
            lo, hi = pub[model]
            ax.errorbar([0.9], [(lo + hi) / 2], yerr=[[(hi - lo) / 2], [(hi - lo) / 2]], capsize=3,
                        label="published · CS-2 (Fig. 7)", **style.published_kw())
        if not drawn:
            empty(ax)
            continue
        ax.axhline(1.0, color="#999999", lw=0.8, ls=":")
        label_axes(ax, x="weight sparsity", y="tokens/s over dense", title=f"{model}, batch 112",
                   legend={"loc": "upper left", "fontsize": 6.5})
        ax.set_xticks([0, 0.6, 0.8, 0.9])
    measured_panel(axes[3], data, "sparsity", "sparsity", "tokens_per_s", ylabel="tokens/s",
                   xlabel="weight sparsity", group="model")
    return finish(fig)


def draw_genslm(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    pred = data.predicted("genslm", devices=1)
    ax = axes[0]
    drawn = False
    for hw in hw_order(pred):
        mine = [r for r in pred if r.get("hardware") == hw and params_of(r.get("model"))
                and metric(r, "tokens_per_s")]
        pts = sorted((params_of(r.get("model")), metric(r, "tokens_per_s"), unfit(r)) for r in mine)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"predicted · {style.hw_label(hw)}",
                    **style.predicted_kw(hw))
            bad = [p[:2] for p in pts if p[2]]
            if bad:
                hollow(ax, *zip(*bad), hw)
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
