"""Seed claims answered by a measurement on this machine (the results database), for
studies/fidelity.py: the sparse-vs-dense loss curves (seed 002 Fig. 8, `studies/sparse_loss.py`)
and the weight-streaming run (`llmbench stream compare`, seed 001)."""
from __future__ import annotations

from llmbench.studies.fidelity_judge import judged
from llmbench.studies.verdict import Outcome, fmt


def _rows(ctx, study: str) -> list[dict]:
    if ctx.db is None:
        return []
    return [r for r in ctx.db.query(study=study, source="measured") if r.get("status", "ok") == "ok"]


def final_losses(rows: list[dict]) -> dict[float, float]:
    """{sparsity: mean of the last 10 % of the pre-training loss curve} of sparse-loss rows."""
    out = {}
    for r in rows:
        p, m = r.get("point") or {}, r.get("metrics") or {}
        curve = m.get("loss_curve") or []
        if p.get("phase") == "pretrain" and curve:
            tail = curve[-max(1, len(curve) // 10):]
            out[float(p["sparsity"])] = sum(tail) / len(tail)
    return out


def sparse_loss(c, ctx) -> Outcome:
    """Fig. 8: the 0.9-sparse model's final loss over the dense one's, minus 1 (seed: ~0.15). A
    reproduction needs the losses to rise with sparsity and the 0.9 gap within the claim's stated
    tolerance and factor (fidelity_judge.judge_loss_gap: the ones the table displays); a sparse model
    that ends at or below the dense one contradicts the seed."""
    rows = _rows(ctx, c["study"])
    fl = final_losses(rows)
    if 0.0 not in fl or 0.9 not in fl:
        return Outcome(value="—", verdict="missing", source="measured",
                       detail="no sparse-loss run in the database (llmbench reproduce measures it)")
    gap = fl[0.9] / fl[0.0] - 1.0
    levels = sorted(fl)
    rising = all(fl[b] >= fl[a] for a, b in zip(levels, levels[1:]))
    ft = [r for r in rows if (r.get("point") or {}).get("phase") == "finetune"]
    rec = ""
    if ft:
        curve = (ft[0].get("metrics") or {}).get("loss_curve") or []
        if curve:
            tail = curve[-max(1, len(curve) // 10):]
            rec = f"; dense fine-tune of the 0.9 model ends at {sum(tail) / len(tail):.3f} (dense {fl[0.0]:.3f})"
    value = f"{gap:+.1%} (" + ", ".join(f"s={s:g}: {v:.3f}" for s, v in sorted(fl.items())) + ")"
    tokens = (rows[0].get("metrics") or {}).get("tokens")
    out = judged("loss_gap", c, (gap, rising), "measured",
                 f"final loss (mean of the last 10 % of steps), {fmt(float(tokens or 0))} tokens per run" + rec)
    return Outcome(**{**out.__dict__, "value": value})


def streaming(c, ctx) -> Outcome:
    rows = [r for r in _rows(ctx, c["study"]) if isinstance((r.get("metrics") or {}).get("ratio"), (int, float))]
    if not rows:
        return Outcome(value="—", verdict="missing", source="measured",
                       detail="no stream compare run in the database")
    ratio = float(rows[-1]["metrics"]["ratio"])
    return judged("number", c, ratio, "measured", "streamed / resident tokens/s")


MEASURED = {"sparse_loss": sparse_loss, "streaming": streaming}
