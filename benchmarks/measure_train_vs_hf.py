"""Must-show: GPT-2 small (124M) training on this CPU, fp32: llmbench's model and loop against
Hugging Face transformers' GPT2LMHeadModel, same batch, seq, steps, optimizer, data, side by side.

    .venv/bin/pip install "transformers>=4.40"     # benchmark-only dependency (bench extra)
    .venv/bin/python benchmarks/measure_train_vs_hf.py [--batch 2] [--seq 128] [--steps 6]

Both: fp32, AdamW (fused, lr 3e-4, betas 0.9/0.95, weight decay 0.1), the same random tokens,
SDPA attention, no dropout (HF's default 0.1 dropout set to 0 so both do the same work), loss on
next-token targets. Steps alternate between the two models (one llmbench step, one HF step, ...)
so that load from other processes on this shared machine hits both alike. Warm-up steps are
excluded. Measurement overhead, measured directly: the cost of the per-step Timer (synchronise +
two clock reads; median of 1000 empty timings) and of recording one result (environment
collection + one SQLite transaction; mean of 20) set against a step's time.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from llmbench.measure import device as dev
from llmbench.measure.modeling import build_model
from llmbench.measure.train import make_adamw
from llmbench.models import get_model, param_count
from llmbench.models.counting import training_flops


def make_ours(spec):
    torch.manual_seed(0)
    model = build_model(spec)

    def step(x, y, opt):
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        return loss
    return model, step


def make_hf(spec):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=spec.vocab_size, n_positions=spec.max_seq_len, n_embd=spec.d_model,
                     n_layer=spec.n_layers, n_head=spec.n_heads, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg)
    model.train()

    def step(x, y, opt):
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=x, labels=x).loss  # HF shifts the labels itself
        loss.backward()
        opt.step()
        return loss
    return model, step


def adamw(model, kind: str = "fused"):
    """Both sides: torch's AdamW, fused kernel (what llmbench's train suite uses, and what HF's
    Trainer picks by default with torch >= 2.8: optim='adamw_torch_fused')."""
    if kind == "fused":
        return make_adamw(model.parameters(), lr=3e-4)
    return torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, foreach=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--optimizer", default="fused", choices=("fused", "foreach"))
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers
    cpu = torch.device("cpu")
    spec = get_model("gpt2-small")
    B, T = args.batch, args.seq
    ours, ours_step = make_ours(spec)
    hf, hf_step = make_hf(spec)
    n_ours = sum(p.numel() for p in ours.parameters())
    n_hf = sum(p.numel() for p in hf.parameters())
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.get_num_threads()} threads, {dev.device_name(cpu)}")
    print(f"params: llmbench {n_ours:,} (counting: {param_count(spec):,}); HF GPT2LMHeadModel {n_hf:,}; "
          f"HF attention: {getattr(hf.config, '_attn_implementation', '?')}")
    opts = {"llmbench": adamw(ours, args.optimizer), "hf": adamw(hf, args.optimizer)}
    print(f"batch {B}, seq {T}, {args.steps} timed steps each after {args.warmup} warm-up, AdamW {args.optimizer}")
    steps = {"llmbench": ours_step, "hf": hf_step}
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, spec.vocab_size, (B, T + 1), generator=gen)
               for _ in range(args.warmup + args.steps)]
    times = {"llmbench": [], "hf": []}
    cpu_times = {"llmbench": [], "hf": []}
    losses = {"llmbench": [], "hf": []}
    for i, xy in enumerate(batches):
        x, y = xy[:, :-1], xy[:, 1:]
        order = ("llmbench", "hf") if i % 2 == 0 else ("hf", "llmbench")  # ABBA: cancels drift
        for name in order:
            c0 = time.process_time()
            with dev.Timer(cpu) as t:
                loss = steps[name](x, y if name == "llmbench" else None, opts[name])
            c1 = time.process_time()
            losses[name].append(float(loss.detach()))
            if i >= args.warmup:
                times[name].append(t.elapsed_s)
                cpu_times[name].append(c1 - c0)
    flops = training_flops(spec, B, T)["model"]
    med = {k: statistics.median(v) for k, v in times.items()}
    for name in ("llmbench", "hf"):
        print(f"{name:9s}: step median {med[name]:.3f} s (min {min(times[name]):.3f}, max {max(times[name]):.3f}) "
              f"= {B * T / med[name]:.0f} tokens/s, {flops / med[name] / 1e9:.1f} GFLOP/s; "
              f"loss {losses[name][0]:.3f} -> {losses[name][-1]:.3f}")
    ratios = [a / b for a, b in zip(times["hf"], times["llmbench"])]
    print(f"RESULT llmbench tokens/s / HF tokens/s: median step ratio {statistics.median(ratios):.3f} "
          f"(per step pair: {', '.join(f'{r:.2f}' for r in ratios)}); ratio of medians {med['hf'] / med['llmbench']:.3f} "
          f"(goal >= 1)")
    cpu_ratios = [a / b for a, b in zip(cpu_times["hf"], cpu_times["llmbench"])]
    print(f"RESULT same in process CPU time (less sensitive to other processes): median step ratio "
          f"{statistics.median(cpu_ratios):.3f}; llmbench {statistics.median(cpu_times['llmbench']):.3f} s, "
          f"HF {statistics.median(cpu_times['hf']):.3f} s CPU per step")
    overhead(ours_step, opts["llmbench"], batches[-1], cpu)


def overhead(step, opt, xy, cpu, n: int = 3) -> None:
    """Cost of our per-step timing: time a Timer around nothing, and compare it with a step."""
    x, y = xy[:, :-1], xy[:, 1:]
    empty = []
    for _ in range(1000):
        with dev.Timer(cpu) as t:
            pass
        empty.append(t.elapsed_s)
    rec = _record_cost()
    t0 = time.perf_counter()
    for _ in range(n):
        step(x, y, opt)
    per_step = (time.perf_counter() - t0) / n
    timer = statistics.median(empty)
    print(f"RESULT overhead: Timer (synchronise + 2 clock reads) {timer * 1e6:.1f} us per step; "
          f"recording one result in the SQLite DB {rec * 1e3:.2f} ms per run; "
          f"step {per_step:.3f} s -> timer {timer / per_step * 100:.4f}% of a step, "
          f"record {rec / per_step * 100:.3f}% of one step (once per run of N steps) (goal < 1%)")


def _record_cost() -> float:
    import tempfile

    from llmbench.results.store import ResultsDB
    with tempfile.TemporaryDirectory() as tmp, ResultsDB(f"{tmp}/o.db") as db:
        db.record({"suite": "train", "warm": True}, metrics={"x": 1.0})
        t0 = time.perf_counter()
        for i in range(20):
            db.record({"suite": "train", "i": i}, metrics={"tokens_per_s": 1.0 * i},
                      environment=dev.collect_environment(torch.device("cpu")))
        return (time.perf_counter() - t0) / 20


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - t0:.1f} s")
