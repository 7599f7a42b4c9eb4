"""Streamed vs resident training speed on this machine, and perfmodel's prediction for it.

    .venv/bin/python benchmarks/stream_speed.py                  # ~2 minutes on 2 CPU cores
    .venv/bin/python benchmarks/stream_speed.py --device cuda --model gpt2-xl --batch 4 --seq 1024 \
        --tokens "" --steps 6 --out docs/results/stream_gpt2xl_h200.json

1. The compute-bound point: `run_compare` (resident then streamed training in one process, the
   resident run freed first; same initial weights and data) at `--batch x --seq` tokens per step.
2. The curve: the same ratio against tokens per step (batch varied at --curve-seq), next to the
   ratio that `perfmodel` predicts in its weight_streaming mode for the same model on the same
   machine (`get_hardware(--hardware)`: the measured profile when `llmbench measure ceilings`
   has saved one) and its predicted crossover (`streaming_crossover_tokens`).
Writes everything (with the environment) as JSON to --out.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def predicted(spec, hw_name: str, batches: list[int], seq: int) -> dict:
    """perfmodel's resident and weight_streaming tokens/s, fp32, for each batch; and the crossover."""
    try:
        import numpy as np

        from llmbench.hardware import get_hardware
        from llmbench.perfmodel.train import streaming_crossover_tokens, sweep_train
    except ImportError as e:  # perfmodel not there: say so rather than model it here
        return {"error": f"perfmodel unavailable: {e}"}
    hw = get_hardware(hw_name)
    B = np.asarray(batches)
    res = sweep_train(spec, hw, batch=B, seq=seq, precision="fp32", mode="resident")
    st = sweep_train(spec, hw, batch=B, seq=seq, precision="fp32", mode="weight_streaming")
    return {"hardware": hw.display_name, "peak_fp32_flops": hw.peak("fp32"),
            "sources": {k: v for k, v in hw.sources.items() if "fp32" in k or "bandwidth" in k},
            "ratio": (st["tokens_per_s"] / res["tokens_per_s"]).tolist(),
            # the same model's terms with the copies NOT hidden behind compute (a CPU: the link
            # and the compute share the cores): resident step / (resident step + stream time)
            "ratio_copies_serial": (res["step_time_s"] / (res["step_time_s"] + st["stream"])).tolist(),
            "stream_s": st["stream"].tolist(),
            "resident_tokens_per_s": res["tokens_per_s"].tolist(),
            "streamed_tokens_per_s": st["tokens_per_s"].tolist(),
            "crossover_tokens": streaming_crossover_tokens(spec, hw, "fp32", seq=seq)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--hardware", default="cpu", help="catalog name of this machine, for perfmodel")
    ap.add_argument("--curve-seq", type=int, default=64)
    ap.add_argument("--tokens", default="64,256,1024,4096", help="tokens per step on the curve ('' for none)")
    ap.add_argument("--out", default="docs/results/stream_speed_cpu.json")
    a = ap.parse_args()

    from llmbench.measure import device as dev
    from llmbench.streaming.run import StreamConfig, resolve_spec, run_compare

    base = dict(model=a.model, layers=a.layers, width=a.width, device=a.device)
    if a.model != "tiny":  # a preset at its own shape unless overridden
        base.update(layers=None, width=None)
    t0 = time.time()
    point = run_compare(StreamConfig(**base, batch=a.batch, seq=a.seq, steps=a.steps))
    print(f"compute-bound point: {point['model']} L={point['n_layers']} d={point['d_model']} "
          f"tokens/step={point['tokens_per_step']}: resident {point['resident_tokens_per_s']:,.0f} "
          f"tok/s, streamed {point['streamed_tokens_per_s']:,.0f} tok/s, ratio {point['ratio']:.3f} "
          f"(of the fastest steps {point['ratio_of_min_steps']:.3f}), "
          f"max rel loss diff {point['max_rel_loss_diff']:.1e}, device weight peak "
          f"{point['device_weight_bytes_peak']:,} B (layer {point['layer_weight_bytes']:,} B)")

    curve = []
    tokens = [int(x) for x in a.tokens.split(",") if x]
    for tok in tokens:
        batch = max(1, tok // a.curve_seq)
        steps = 24 if tok <= 256 else 12 if tok <= 1024 else 8
        r = run_compare(StreamConfig(**base, batch=batch, seq=a.curve_seq, steps=steps, warmup_steps=2))
        curve.append({k: r[k] for k in ("tokens_per_step", "batch", "seq", "resident_tokens_per_s",
                                         "streamed_tokens_per_s", "ratio", "max_rel_loss_diff",
                                         "resident_step_s", "streamed_extra_s_per_step",
                                         "resident_step_min_s", "streamed_step_min_s", "ratio_of_min_steps",
                                         "exposed_stream_s_per_step", "exposed_optimizer_s_per_step")})
    spec = resolve_spec(StreamConfig(**base, seq=a.curve_seq))
    pred = predicted(spec, a.hardware, [c["batch"] for c in curve], a.curve_seq) if curve else {}
    if curve:
        print(f"\ncurve (seq {a.curve_seq}); predicted by perfmodel on {pred.get('hardware', '?')}")
        print(f"{'tokens/step':>11} {'resident tok/s':>14} {'streamed tok/s':>14} {'ratio':>6} "
              f"{'min-step ratio':>14} {'predicted':>9} {'pred. serial':>12} {'extra s/step':>12} "
              f"{'exposed stream s':>16}")
        for i, c in enumerate(curve):
            p = pred["ratio"][i] if "ratio" in pred else float("nan")
            c["predicted_ratio"] = p
            ps = pred["ratio_copies_serial"][i] if "ratio" in pred else float("nan")
            c["predicted_ratio_copies_serial"] = ps
            print(f"{c['tokens_per_step']:>11} {c['resident_tokens_per_s']:>14,.0f} "
                  f"{c['streamed_tokens_per_s']:>14,.0f} {c['ratio']:>6.3f} {c['ratio_of_min_steps']:>14.3f} {p:>9.3f} "
                  f"{ps:>12.3f} "
                  f"{c['streamed_extra_s_per_step']:>12.4f} "
                  f"{c['exposed_stream_s_per_step']:>16.4f}")
        print(f"predicted crossover: {pred.get('crossover_tokens', float('nan')):,.0f} tokens/step")
    out = {"point": point, "curve": curve, "predicted": pred, "wall_s": time.time() - t0,
           "command": "benchmarks/stream_speed.py " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items()),
           "environment": dev.collect_environment(dev.resolve(a.device))}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2, default=str))
    print(f"\nwrote {a.out} ({out['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
