"""Figures that exist only in the seeds: 002 Fig. 8, sparse against dense training loss, measured here
(studies/sparse_loss.py records the curves as study "sparse-loss")."""
from __future__ import annotations

from .plotkit import empty, finish, label_axes, pyplot
from .rows import Data, metric, value

SPARSITY_COLOURS = {0.0: "#1a9641", 0.6: "#fdae61", 0.8: "#f46d43", 0.9: "#a50026"}


def _curve(row: dict) -> tuple[list[float], list[float]]:
    """(tokens, loss) of a sparse-loss row: one point per `curve_every` steps."""
    p, curve = row.get("point") or {}, value(row, "loss_curve") or []
    every = int(metric(row, "curve_every") or 1)
    per_step = int(p.get("batch", 1)) * int(p.get("seq_len", 1))
    return [(i + 1) * every * per_step for i in range(len(curve))], list(curve)


def draw_sparse_loss(data: Data):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    rows = data.get("sparse-loss", "measured")
    pre = sorted((r for r in rows if (r.get("point") or {}).get("phase") == "pretrain"),
                 key=lambda r: r["point"]["sparsity"])
    ft = [r for r in rows if (r.get("point") or {}).get("phase") == "finetune"]
    if not pre:
        empty(axes[0], "not measured: llmbench reproduce runs it (python -m llmbench.studies.sparse_loss)")
        axes[1].set_visible(False)
        return finish(fig)
    for r in pre:
        s = float(r["point"]["sparsity"])
        x, y = _curve(r)
        axes[0].plot(x, y, color=SPARSITY_COLOURS.get(s, "#555555"), lw=1.4,
                     label=f"measured here · sparsity {s:g}")
    p = pre[0]["point"]
    label_axes(axes[0], x="training tokens", y="training loss (nats)",
               title=f"pre-training, GPT {p['n_layers']} layers x {p['d_model']}, shipped corpus",
               legend={"loc": "upper right"})
    ax = axes[1]
    dense = next((r for r in pre if r["point"]["sparsity"] == 0.0), None)
    sparse = max(pre, key=lambda r: r["point"]["sparsity"])
    if dense is not None:
        ax.plot(*_curve(dense), color=SPARSITY_COLOURS[0.0], lw=1.2, label="measured here · dense")
    x, y = _curve(sparse)
    s = sparse["point"]["sparsity"]
    ax.plot(x, y, color=SPARSITY_COLOURS.get(s, "#555555"), lw=1.2, label=f"measured here · sparsity {s:g}")
    if ft:
        fx, fy = _curve(ft[0])
        ax.plot([x[-1] + t for t in fx], fy, color="#2b5fad", lw=1.4, ls="--",
                label=f"measured here · then dense fine-tuning of the {s:g} model")
        ax.axvline(x[-1], color="#999999", lw=0.8, ls=":")
    label_axes(ax, x="training tokens", y="training loss (nats)", title="sparse pre-training, dense fine-tuning",
               legend={"loc": "upper right"})
    return finish(fig)
