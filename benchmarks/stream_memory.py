"""Device memory and link bytes of weight streaming: peak device-resident weights against depth
and prefetch, a model bigger than the device budget, and sparse streaming's bytes.

    .venv/bin/python benchmarks/stream_memory.py        # ~1 minute on 2 CPU cores

Every byte figure is counted by the executor at each allocation/free of a device weight or
gradient buffer and at each copy across the link (llmbench/streaming/executor.py).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="docs/results/stream_memory_cpu.json")
    a = ap.parse_args()

    from llmbench.streaming.config import workload_and_options as S
    from llmbench.streaming.run import run_train

    out = {"depth": [], "budget": {}, "sparse": []}
    print("peak device-resident weights against depth and prefetch (tiny, width 128)")
    print(f"{'layers':>6} {'prefetch':>8} {'peak weight B':>13} {'= layers':>8} {'+ ends B':>9} "
          f"{'all weights B':>13}")
    for layers in (4, 16):
        for prefetch in (0, 1, 2):
            r = run_train(*S(model="tiny", layers=layers, width=128, batch=2, seq=32,
                                       steps=1, prefetch=prefetch))
            n = (r["device_weight_bytes_peak"] - r["embedding_weight_bytes"]) / r["layer_weight_bytes"]
            all_w = r["params"] * 4
            out["depth"].append({k: r[k] for k in ("n_layers", "prefetch", "device_weight_bytes_peak",
                                                   "layer_weight_bytes", "embedding_weight_bytes")}
                                | {"all_weight_bytes": all_w})
            print(f"{layers:>6} {prefetch:>8} {r['device_weight_bytes_peak']:>13,} {n:>8.0f} "
                  f"{r['embedding_weight_bytes']:>9,} {all_w:>13,}")

    cfg = dict(model="tiny", layers=12, width=256, batch=8, seq=32, steps=12)
    probe = run_train(*S(**{**cfg, "steps": 1}))
    budget = int(probe["device_bytes_estimate"] * 1.05)
    r = run_train(*S(**cfg, device_memory_budget_bytes=budget))
    out["budget"] = {k: r[k] for k in ("params", "weights_and_adam_bytes", "device_memory_budget_bytes",
                                       "device_bytes_estimate", "device_weight_bytes_peak",
                                       "device_grad_bytes_peak", "store_bytes", "loss")}
    print(f"\nbigger than the budget: {r['params']:,} params, weights + Adam "
          f"{r['weights_and_adam_bytes']:,} B > budget {budget:,} B; streamed peak weights "
          f"{r['device_weight_bytes_peak']:,} B + grads {r['device_grad_bytes_peak']:,} B")
    print("loss: " + " ".join(f"{x:.3f}" for x in r["loss"]))

    print("\nsparse streaming (tiny, width 256, 4 layers): bytes over the link per step")
    print(f"{'sparsity':>8} {'weights in B':>12} {'grads out B':>11} {'total B':>10} {'of dense':>8}")
    dense = None
    for s in (0.0, 0.5, 0.75, 0.9, 0.95):
        r = run_train(*S(model="tiny", width=256, batch=2, seq=32, steps=2, sparsity=s))
        dense = dense or r["streamed_bytes_per_step"]
        frac = r["streamed_bytes_per_step"] / dense
        out["sparse"].append({"sparsity": s, "weight_bytes_in_per_step": r["weight_bytes_in_per_step"],
                              "grad_bytes_out_per_step": r["grad_bytes_out_per_step"],
                              "streamed_bytes_per_step": r["streamed_bytes_per_step"], "of_dense": frac})
        print(f"{s:>8.2f} {r['weight_bytes_in_per_step']:>12,.0f} {r['grad_bytes_out_per_step']:>11,.0f} "
              f"{r['streamed_bytes_per_step']:>10,.0f} {frac:>8.3f}")
    from llmbench.measure import device as dev

    out["command"] = "benchmarks/stream_memory.py --out " + a.out
    out["environment"] = dev.collect_environment(dev.resolve("cpu"))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2))
    print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
