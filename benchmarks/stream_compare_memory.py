"""`stream compare` of GPT-2 medium at 4,096 tokens per step fits in 24 GiB: peak RSS of each phase.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/stream_compare_memory.py          # ~1 h on 2 loaded cores

Before the memory-lean compare (issue 14) this command was killed by the kernel's OOM killer on the
24 GiB machine: it held the initial state, the resident trainer and the two-slot store at once
(about 44 bytes per parameter) plus activations. Now the resident run is freed before the streamed
one is built. The script refuses to start unless the machine has the memory the run needs
(estimated below from models/counting), so it cannot push a shared machine into the OOM killer.

Printed: the training state of each phase in bytes per parameter, the activations estimate, the
peak RSS after the resident phase and at the end (VmHWM: the process's high-water mark), and
the compare's losses and speeds.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

GiB = 2 ** 30


def estimate_bytes(spec, batch: int, seq: int) -> dict:
    """What each phase holds at its peak: state + activations (+ the streamed layers)."""
    from llmbench.models.counting import activation_bytes_per_layer, param_count

    p = param_count(spec)
    acts = activation_bytes_per_layer(spec, batch, seq, "fp32", "none") * spec.n_layers \
        + 3 * batch * seq * spec.vocab_size * 4
    return {"params": p, "activations": acts, "resident": 16 * p + acts, "streamed": 24 * p + acts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt2-medium")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--margin-gib", type=float, default=2.0, help="free memory kept for others")
    ap.add_argument("--out", default="docs/results/stream_compare_memory_cpu.json")
    a = ap.parse_args()

    from llmbench.measure import hostmem as memory
    from llmbench.streaming.config import workload_and_options

    cfg = workload_and_options(model=a.model, batch=a.batch, seq=a.seq, steps=a.steps)
    est = estimate_bytes(cfg[0].spec(), a.batch, a.seq)
    # since issue 19 the compare interleaves its sides: it holds both at once
    need = est["resident"] + est["streamed"] + a.margin_gib * GiB
    avail = memory.available_bytes()
    print(f"{a.model}: {est['params']:,} params, {a.batch} x {a.seq} = {a.batch * a.seq:,} tokens/step")
    print(f"estimate: resident state 16 B/param = {16 * est['params'] / GiB:.2f} GiB, store 24 B/param = "
          f"{24 * est['params'] / GiB:.2f} GiB, activations {est['activations'] / GiB:.2f} GiB")
    print(f"machine: MemTotal {memory.total_bytes() / GiB:.1f} GiB, MemAvailable {avail / GiB:.1f} GiB; "
          f"this run needs ~{need / GiB:.1f} GiB (with a {a.margin_gib} GiB margin)")
    if avail is not None and avail < need:
        raise SystemExit("not started: not enough free memory on this machine now")

    from llmbench.streaming.run import run_compare

    t0 = time.time()
    out = run_compare(*cfg)
    report(out, time.time() - t0)
    from llmbench.measure import device as dev

    out.update(estimate=est, command=f"benchmarks/stream_compare_memory.py --model {a.model} --batch "
               f"{a.batch} --seq {a.seq} --steps {a.steps}",
               environment=dev.collect_environment(dev.resolve("cpu")))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {a.out}")


def report(out: dict, wall_s: float) -> None:
    p = out["params"]
    print(f"\npeak RSS after the resident phase: {out['peak_rss_after_resident_bytes'] / GiB:.2f} GiB "
          f"({out['peak_rss_after_resident_bytes'] / p:.1f} B/param, state {out['resident_state_bytes'] / p:.0f})")
    print(f"peak RSS of the whole compare:     {out['peak_rss_bytes'] / GiB:.2f} GiB "
          f"({out['peak_rss_bytes'] / p:.1f} B/param, store {out['store_bytes'] / p:.0f})"
          f" -> {'fits' if out['peak_rss_bytes'] < 24 * GiB else 'does NOT fit'} in 24 GiB")
    print("resident loss:", " ".join(f"{x:.6f}" for x in out["resident_loss"]))
    print("streamed loss:", " ".join(f"{x:.6f}" for x in out["streamed_loss"]),
          f"(max rel diff {out['max_rel_loss_diff']:.1e})")
    print(f"tokens/s resident {out['resident_tokens_per_s']:,.1f}, streamed {out['streamed_tokens_per_s']:,.1f}, "
          f"ratio {out['ratio']:.3f}; step times resident {out['resident_step_times_s']}, "
          f"streamed {out['streamed_step_times_s']}; {wall_s:,.0f} s in all")


if __name__ == "__main__":
    main()
