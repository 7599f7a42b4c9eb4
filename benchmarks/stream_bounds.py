"""What a weight-streamed step cannot go below on this machine: the host's AdamW and the link (issue 19).

    PYTHONPATH=$PWD python3 benchmarks/stream_bounds.py [--models gpt2-small,gpt2-medium] [--json out.json]

A streamed step (llmbench/streaming) moves each block's weights to the device in the compute dtype
and its gradient back, and runs AdamW on the fp32 master weights and moments in the store (host
memory). Whatever the overlap, a step takes at least the larger of

  - the host's AdamW over every parameter: timed here on flat fp32 tensors of the model's size,
    torch's fused kernel in place (the least work: read w, m, v and the gradient, write w, m, v),
    and the store's own update (`store._adamw_into`: the committed slot copied into the other one,
    then the fused kernel in place: the two-slot commit a crash-safe store pays);
  - the weights host -> device and the gradients device -> host over the link: pinned copies of
    the model's bf16 bytes timed each way (the directions overlap: the larger counts);

on the threads torch has (`torch.get_num_threads()`). The host's copy bandwidth is printed beside
(one 1 GiB tensor copied: read + write). Dividing a resident step's time by the bound gives the
most a streamed/resident ratio can reach on this machine: `--resident-ms NAME=MS` takes resident
step times measured elsewhere (e.g. `measure train`), and prints that ceiling.
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch

from llmbench.measure import device as dev
from llmbench.models import get_model
from llmbench.models.counting import param_breakdown
from llmbench.streaming.store import AdamConfig, _adamw_into

CPU = torch.device("cpu")


def _median_s(fn, repeats: int, device: torch.device = CPU) -> float:
    """Median seconds of fn after one warm-up call (measure/device.time_fn: synchronised on a GPU)."""
    times, _ = dev.time_fn(fn, device, repeats=repeats, warmup=1)
    return float(statistics.median(times))


def host_copy_gbs(repeats: int) -> float:
    x, y = torch.ones(1 << 28), torch.empty(1 << 28)  # 1 GiB of fp32
    return 2 * x.numel() * 4 / _median_s(lambda: y.copy_(x), repeats) / 1e9


def adamw_s(n: int, repeats: int) -> dict:
    """Seconds of one AdamW step over n parameters: fused in place, and the store's slot update."""
    a = AdamConfig()
    old = [torch.randn(n), torch.zeros(n), torch.zeros(n)]
    new = [torch.empty(n) for _ in range(3)]
    g = torch.randn(n) * 1e-3
    step = [1]

    def fused():
        torch._fused_adamw_([old[0]], [g], [old[1]], [old[2]], [], [torch.tensor(1.0)], lr=a.lr, beta1=a.beta1,
                            beta2=a.beta2, weight_decay=a.weight_decay, eps=a.eps, amsgrad=False, maximize=False)

    def store():
        step[0] += 1
        _adamw_into(a, step[0], old, new, g)

    return {"fused_in_place_s": _median_s(fused, repeats), "store_update_s": _median_s(store, repeats)}


def link_s(n_bytes: int, repeats: int) -> dict:
    """Pinned host <-> device copies of n_bytes each way (None without CUDA)."""
    if not torch.cuda.is_available():
        return {"h2d_s": None, "d2h_s": None}
    h = torch.empty(n_bytes, dtype=torch.uint8).pin_memory()
    d = torch.empty(n_bytes, dtype=torch.uint8, device="cuda")
    gpu = torch.device("cuda")
    return {"h2d_s": _median_s(lambda: d.copy_(h, non_blocking=True), repeats, gpu),
            "d2h_s": _median_s(lambda: h.copy_(d, non_blocking=True), repeats, gpu)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2-small,gpt2-medium")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--resident-ms", action="append", default=[], metavar="NAME=MS",
                    help="a resident step's time (e.g. gpt2-small@8x256=22.1), for the ratio ceiling")
    ap.add_argument("--json")
    a = ap.parse_args()
    resident = {k: float(v) for k, v in (x.split("=", 1) for x in a.resident_ms)}
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {dev}")
    copy = host_copy_gbs(a.repeats)
    print(f"host copy: {copy:.1f} GB/s (read + write)")
    out = {"threads": torch.get_num_threads(), "device": dev, "host_copy_gbs": copy, "models": []}
    for name in a.models.split(","):
        n = int(sum(param_breakdown(get_model(name)).values()))
        opt, link = adamw_s(n, a.repeats), link_s(2 * n, a.repeats)
        row = {"model": name, "params": n, **opt, **link}
        bound = max(opt["fused_in_place_s"], link["h2d_s"] or 0.0, link["d2h_s"] or 0.0)
        row["bound_s"] = bound
        line = (f"{name}: {n / 1e6:.0f}M params; AdamW fused in place {opt['fused_in_place_s'] * 1e3:.1f} ms, the store's "
                f"update {opt['store_update_s'] * 1e3:.1f} ms")
        if link["h2d_s"] is not None:
            line += (f"; bf16 weights H2D {link['h2d_s'] * 1e3:.1f} ms ({2 * n / link['h2d_s'] / 1e9:.1f} GB/s), "
                     f"D2H {link['d2h_s'] * 1e3:.1f} ms")
        print(line + f"; a streamed step >= {bound * 1e3:.1f} ms")
        for k, ms in resident.items():
            if k.split("@")[0] == name:
                row.setdefault("ceilings", {})[k] = ms / 1e3 / max(bound, ms / 1e3)
                print(f"  resident {k}: {ms:.1f} ms a step -> streamed/resident at most "
                      f"{row['ceilings'][k]:.2f}")
        out["models"].append(row)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
