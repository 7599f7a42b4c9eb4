"""Streamed vs resident training speed on this machine (issue 19's targets), and perfmodel's prediction.

    .venv/bin/python benchmarks/stream_speed.py --model gpt2-small --batch 8 --seq 256 --steps 20 --tokens ""
    .venv/bin/python benchmarks/stream_speed.py --model gpt2-medium --batch 16 --seq 256 --steps 20 --tokens ""
    .venv/bin/python benchmarks/stream_speed.py                  # tiny model, and the curve

1. The point, in ONE process (so other load on a shared machine hits every side): `measure train`
   (measure/suites.run_workload) on the Workload, then `run_compare` on the same Workload: its
   resident side is measure train's trainer, interleaved step by step with the streamed side
   (`--warmup-steps` pairs, then `--steps` timed pairs), then `measure train` again. Prints
   measure's tokens/s before and after, the resident side's (issue 19: within 10%),
   streamed/resident (median of the per-pair ratios, p10-p90), the largest relative loss
   difference and the per-phase time of a streamed step.
2. The curve: the same ratio against tokens per step (batch varied at --curve-seq), next to the
   ratio `perfmodel` predicts in its weight_streaming mode for the same model on this machine
   (`get_hardware(--hardware)`) and its predicted crossover (`streaming_crossover_tokens`).
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
        from llmbench.point import Workload
    except ImportError as e:  # perfmodel not there: say so rather than model it here
        return {"error": f"perfmodel unavailable: {e}"}
    hw = get_hardware(hw_name)
    B = np.asarray(batches)
    # one device, each batch in one micro-batch (no accumulation), in each mode
    res, st = (sweep_train(spec, hw, Workload(model=spec.name, hardware=hw.name, seq_len=seq, precision="fp32",
                                              layout={"mode": mode}), batch=B, micro_batch=B)
               for mode in ("resident", "weight_streaming"))
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


def measure_point(w, a) -> dict:
    """`measure train` of the same Workload here: its tokens/s (median step)."""
    from llmbench.measure.options import RunOptions
    from llmbench.measure.suites import run_workload

    _, res = run_workload(w, RunOptions(device=a.device, steps=a.measure_steps))  # measure train's own warm-up
    if res["status"] != "ok":
        raise SystemExit(f"measure train failed: {res['error']}")
    return res["metrics"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--width", type=int, default=None)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20, help="timed step pairs of the compare")
    ap.add_argument("--warmup-steps", type=int, default=2)
    ap.add_argument("--measure-steps", type=int, default=5, help="timed steps of measure train")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--hardware", default="cpu", help="catalog name of this machine, for perfmodel")
    ap.add_argument("--curve-seq", type=int, default=64)
    ap.add_argument("--tokens", default="64,256,1024", help="tokens per step on the curve ('' for none)")
    ap.add_argument("--out", default="docs/results/stream_speed_cpu.json")
    a = ap.parse_args()

    from llmbench.measure import device as dev
    from llmbench.streaming.config import workload_and_options
    from llmbench.streaming.run import run_compare

    base = dict(model=a.model, layers=a.layers, width=a.width, device=a.device)
    t0 = time.time()
    w, opts = workload_and_options(**base, batch=a.batch, seq=a.seq, steps=a.steps, warmup_steps=a.warmup_steps)
    measured = measure_point(w, a)
    point = run_compare(w, opts)
    after = measure_point(w, a)  # again after the compare: the machine's speed can move meanwhile
    point["measure_train_tokens_per_s"] = measured["tokens_per_s"]
    point["measure_train_tokens_per_s_after"] = after["tokens_per_s"]
    res = point["resident_tokens_per_s"]
    print(f"point: {point['model']} L={point['n_layers']} d={point['d_model']} tokens/step={point['tokens_per_step']}: "
          f"measure train {measured['tokens_per_s']:,.1f} tok/s before, {after['tokens_per_s']:,.1f} after; "
          f"compare's resident side {res:,.1f} tok/s ({res / measured['tokens_per_s'] - 1:+.1%} / "
          f"{res / after['tokens_per_s'] - 1:+.1%}), "
          f"streamed {point['streamed_tokens_per_s']:,.1f} tok/s; streamed/resident {point['ratio']:.3f} "
          f"(p10 {point['ratio_p10']:.3f}, p90 {point['ratio_p90']:.3f}, {point['pairs']} pairs); "
          f"max rel loss diff {point['max_rel_loss_diff']:.1e}")
    print("phases of a streamed step (s): " + ", ".join(f"{k} {v:.3f}" for k, v in point["phases_s_per_step"].items()))

    curve = []
    tokens = [int(x) for x in a.tokens.split(",") if x]
    for tok in tokens:
        batch = max(1, tok // a.curve_seq)
        steps = 20
        r = run_compare(*workload_and_options(**base, batch=batch, seq=a.curve_seq, steps=steps, warmup_steps=2))
        curve.append({k: r[k] for k in ("tokens_per_step", "batch", "seq", "resident_tokens_per_s",
                                         "streamed_tokens_per_s", "ratio", "max_rel_loss_diff",
                                         "ratio_p10", "ratio_p90", "resident_step_s", "streamed_extra_s_per_step",
                                         "exposed_stream_s_per_step", "exposed_optimizer_s_per_step")})
    spec = workload_and_options(**base, seq=a.curve_seq)[0].spec()
    pred = predicted(spec, a.hardware, [c["batch"] for c in curve], a.curve_seq) if curve else {}
    if curve:
        print(f"\ncurve (seq {a.curve_seq}); predicted by perfmodel on {pred.get('hardware', '?')}")
        print(f"{'tokens/step':>11} {'resident tok/s':>14} {'streamed tok/s':>14} {'ratio':>6} "
              f"{'p10-p90':>14} {'predicted':>9} {'pred. serial':>12} {'extra s/step':>12} "
              f"{'exposed stream s':>16}")
        for i, c in enumerate(curve):
            p = pred["ratio"][i] if "ratio" in pred else float("nan")
            c["predicted_ratio"] = p
            ps = pred["ratio_copies_serial"][i] if "ratio" in pred else float("nan")
            c["predicted_ratio_copies_serial"] = ps
            print(f"{c['tokens_per_step']:>11} {c['resident_tokens_per_s']:>14,.0f} "
                  f"{c['streamed_tokens_per_s']:>14,.0f} {c['ratio']:>6.3f} {c['ratio_p10']:>6.3f}-{c['ratio_p90']:<7.3f} {p:>9.3f} "
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
