"""Seed 002 Fig. 8, measured: a small GPT pre-trained on the shipped corpus at weight sparsity
0 / 0.6 / 0.8 / 0.9 (static unstructured magnitude masks on every dense-layer weight, re-applied after
each step: measure/sparsity.py), then the 0.9-sparse model fine-tuned dense. Each run's training loss
curve is recorded (study "sparse-loss", source measured) for the report's figure and the fidelity
row 002-34.

    python -m llmbench.studies.sparse_loss --quick        # what `llmbench reproduce` runs (≤ 2 min)
    python -m llmbench.studies.sparse_loss --full         # longer runs at GPT-2 small's width

Same seed, same data order and same initial weights for every sparsity level: the curves differ by
the masks only. CPU runs are fp32 (the house rule); a CUDA device is used when present.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass


@dataclass(frozen=True, kw_only=True)
class LossRun:
    model: str = "gpt2-small"
    n_layers: int = 2
    d_model: int = 128
    n_heads: int = 4
    batch: int = 4
    seq_len: int = 64
    steps: int = 150
    """pre-training steps per sparsity level"""
    finetune_steps: int = 75
    """dense fine-tuning steps of the most sparse model"""
    lr: float = 1e-3
    sparsities: tuple[float, ...] = (0.0, 0.9, 0.6, 0.8)
    """in this order: dense and the seed's 0.9 first, so a run cut short keeps the pair Fig. 8 needs"""
    curve_every: int = 5
    """record the mean loss of every this many steps"""
    seed: int = 0


QUICK = LossRun()
FULL = LossRun(n_layers=4, d_model=768, n_heads=12, batch=8, seq_len=256, steps=600, finetune_steps=300, lr=6e-4)


def _setup(run: LossRun):
    import torch

    from llmbench.data.text import load_tokenizer
    from llmbench.measure.modeling import build_model
    from llmbench.point import Workload

    vocab = load_tokenizer().vocab_size
    spec = Workload(model=run.model, resize={"n_layers": run.n_layers, "d_model": run.d_model,
                                             "n_heads": run.n_heads, "d_ff": 4 * run.d_model,
                                             "vocab_size": vocab, "max_seq_len": run.seq_len}).spec()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # masked weights' optimizer moments decay into subnormal floats, which x86 CPUs compute up to
    # ~100x slower: flush them to zero (their weights are masked to zero after every step anyway)
    torch.set_flush_denormal(True)
    torch.manual_seed(run.seed)
    model = build_model(spec, device=device)
    return spec, model, device


def train_curve(run: LossRun, model, device, spec, steps: int, sparsity: float, seed: int) -> list[float]:
    """Train `model` for `steps` steps with masks at `sparsity` (0: dense); the loss curve."""
    from llmbench.measure.sparsity import Sparsifier
    from llmbench.measure.train import Batches, make_adamw

    sparsifier = Sparsifier.for_run(model, sparsity, "unstructured", device, run.batch * run.seq_len)
    opt = make_adamw(model.parameters(), lr=run.lr)
    data = Batches("corpus", spec.vocab_size, run.batch, run.seq_len, device, seed=seed)
    losses, acc = [], []
    for _ in range(steps):
        x, y = data.next()
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        sparsifier.apply()
        acc.append(float(loss.detach()))
        if len(acc) == run.curve_every:
            losses.append(sum(acc) / len(acc))
            acc = []
    return losses


def run_all(run: LossRun, db=None, log=print) -> list[dict]:
    """Every pre-training run and the dense fine-tune; each recorded in `db` when given."""
    import copy

    out = []
    base_spec, base_model, device = _setup(run)
    init = copy.deepcopy(base_model.state_dict())
    sparse_model = None
    for s in run.sparsities:
        t0 = time.perf_counter()
        base_model.load_state_dict(init)
        curve = train_curve(run, base_model, device, base_spec, run.steps, s, run.seed)
        out.append(_result(run, "pretrain", s, curve, run.steps, time.perf_counter() - t0, device))
        _record(db, out[-1])
        log(f"sparsity {s:g}: loss {curve[0]:.3f} -> {curve[-1]:.3f} in {time.perf_counter() - t0:.1f} s")
        if s == max(run.sparsities):
            sparse_model = copy.deepcopy(base_model)
    if sparse_model is not None and run.finetune_steps:
        t0 = time.perf_counter()
        curve = train_curve(run, sparse_model, device, base_spec, run.finetune_steps, 0.0, run.seed + 1)
        out.append(_result(run, "finetune", max(run.sparsities), curve, run.finetune_steps,
                           time.perf_counter() - t0, device))
        _record(db, out[-1])
        log(f"dense fine-tune of sparsity {max(run.sparsities):g}: loss -> {curve[-1]:.3f}")
    return out


def _record(db, r: dict) -> None:
    """Each run as soon as it finishes: a run stopped at its time budget keeps the finished ones."""
    if db is not None:
        db.record(r["point"], source="measured", study="sparse-loss", metrics=r["metrics"],
                  environment={"command": "python -m llmbench.studies.sparse_loss", "seconds": r["seconds"]})


def _result(run: LossRun, phase: str, s: float, curve: list[float], steps: int, dt: float, device) -> dict:
    cfg = {k: v for k, v in asdict(run).items() if k not in ("sparsities", "steps", "finetune_steps")}
    point = {"suite": "sparse-loss", "phase": phase, "sparsity": s, "steps": steps, "device": device.type,
             **cfg}
    return {"point": point, "seconds": dt,
            "metrics": {"loss_curve": curve, "curve_every": run.curve_every,
                        "tokens": steps * run.batch * run.seq_len}}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m llmbench.studies.sparse_loss", description=__doc__.split("\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="the quick runs (default)")
    g.add_argument("--full", action="store_true", help="longer runs at GPT-2 small's width")
    p.add_argument("--steps", type=int, help="pre-training steps per sparsity level (overrides the mode's)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    a = p.parse_args(argv)
    run = FULL if a.full else QUICK
    if a.steps is not None:
        if a.steps < run.curve_every:
            p.error(f"--steps must be at least {run.curve_every}")
        run = LossRun(**{**asdict(run), "steps": a.steps, "finetune_steps": a.steps // 2})
    from llmbench.results.store import ResultsDB

    with ResultsDB() as db:
        out = run_all(run, db, log=(lambda m: None) if a.json else print)
    if a.json:
        print(json.dumps({"runs": [{**r["point"], "final_loss": r["metrics"]["loss_curve"][-1]} for r in out]}))


if __name__ == "__main__":
    main()
