"""Why the train suite uses torch's fused AdamW on the CPU too: fused against foreach, GPT-2 small's
parameter shapes (124M), interleaved, wall and process CPU time per optimizer step.

    .venv/bin/python benchmarks/measure_adamw.py
"""
from __future__ import annotations

import statistics
import time

import torch

from llmbench.measure.modeling import build_model
from llmbench.models import get_model


def main(rounds: int = 3) -> None:
    model = build_model(get_model("gpt2-small"))
    params = list(model.parameters())
    for p in params:
        p.grad = torch.randn_like(p)
    opts = {kind: torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, **{kind: True})
            for kind in ("foreach", "fused")}
    for o in opts.values():
        o.step()  # warm-up: allocates the moments
    wall = {k: [] for k in opts}
    cpu = {k: [] for k in opts}
    for _ in range(rounds):
        for kind, o in opts.items():
            c, t = time.process_time(), time.perf_counter()
            o.step()
            wall[kind].append(time.perf_counter() - t)
            cpu[kind].append(time.process_time() - c)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {sum(p.numel() for p in params):,} params")
    for kind in opts:
        print(f"{kind:8s}: step median {statistics.median(wall[kind]):.3f} s wall, "
              f"{statistics.median(cpu[kind]):.3f} s CPU")
    print(f"RESULT fused is {statistics.median(wall['foreach']) / statistics.median(wall['fused']):.1f}x faster "
          f"(wall), {statistics.median(cpu['foreach']) / statistics.median(cpu['fused']):.1f}x (CPU time)")


if __name__ == "__main__":
    main()
