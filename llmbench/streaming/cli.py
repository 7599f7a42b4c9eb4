"""`llmbench stream train|compare`: the weight-streaming runtime's commands (docs/stream.md).

    llmbench stream train --model tiny --batch 8 --seq 64 --steps 20 --store disk:/tmp/st --json
    llmbench stream compare --model tiny --width 256 --batch 8 --seq 256 --steps 6 --json

Imports no torch at import time (llmbench.streaming.run is imported inside the commands). An
option left out takes StreamConfig's default (declared there once).
"""
from __future__ import annotations

from llmbench._cliutil import add_json, emit_json, float_in, int_in, table
from llmbench.units import fmt_metric

COMMON = (  # flag, type, help
    ("model", str, "preset name or 'tiny' (4 layers, width 64, vocab 256)"),
    ("layers", int_in(1, name="layers"), "override the number of layers"),
    ("width", int_in(1, name="width"), "override d_model (d_ff = 4 x width)"),
    ("heads", int_in(1, name="heads"), "override the number of heads"),
    ("vocab", int_in(2, name="vocab"), "override the vocabulary size"),
    ("batch", int_in(1, name="batch"), "sequences per step (per rank)"),
    ("seq", int_in(1, name="seq"), "tokens per sequence"),
    ("steps", int_in(1, name="steps"), "optimizer steps"),
    ("device", str, "cpu, cuda, cuda:1, auto ..."),
    ("prefetch", int_in(0, name="prefetch"), "layers loaded ahead of the computing one"),
    ("lr", float_in(0.0, name="lr"), "AdamW learning rate"),
    ("seed", int_in(0, name="seed"), "init and data seed"),
    ("warmup_steps", int_in(0, name="warmup-steps"), "steps left out of tokens_per_s"),
)
TRAIN_ONLY = (
    ("store", str, "ram | disk:PATH"),
    ("sparsity", float_in(0.0, 0.999, name="sparsity"), "fraction of each weight matrix pruned (magnitude) and streamed sparse"),
    ("device_memory_budget", int_in(1, name="device-memory-budget"), "bytes allowed on the device; over it: exit 2"),
)
FLAGS = {"resume": "continue from the disk store", "check_ranks": "data parallel: hash each rank's weights every step",
         "recompute": "keep only block inputs on the device; recompute each block's forward in the backward"}
TRAIN_KEYS = ["model", "params", "world_size", "tokens_per_s", "step_time_s", "streamed_bytes_per_step",
              "streamed_fraction_of_dense", "exposed_stream_s_per_step", "optimizer_s_per_step",
              "exposed_optimizer_s_per_step", "device_weight_bytes_peak", "layer_weight_bytes",
              "embedding_weight_bytes", "store_bytes"]
COMPARE_KEYS = ["model", "tokens_per_step", "resident_tokens_per_s", "streamed_tokens_per_s", "ratio",
                "max_rel_loss_diff", "device_weight_bytes_peak", "layer_weight_bytes", "exposed_stream_s_per_step"]


def register(cli) -> None:
    g = cli.group("stream", "Weight-streaming training: weights and Adam state in host RAM or on disk, "
                            "streamed to the device layer by layer (MemoryX/SwarmX).")
    for name, fn, opts, flags in (("train", stream_train, COMMON + TRAIN_ONLY, FLAGS),
                                  ("compare", stream_compare, COMMON, {"recompute": FLAGS["recompute"]})):
        p = g.command(name, fn)
        for dest, typ, text in opts:
            p.add_argument(f"--{dest.replace('_', '-')}", dest=dest, type=typ, default=None,
                           help=text + " (default: StreamConfig's)")
        for dest, text in flags.items():
            p.add_argument(f"--{dest.replace('_', '-')}", dest=dest, action="store_true", default=None, help=text)
        p.add_argument("--db", help="also record the result in this results database (SQLite)")
        add_json(p)


def _config(a, opts, flags):
    from llmbench.streaming.run import StreamConfig

    given = {k: getattr(a, k) for k, _, _ in opts}
    given.update({k: getattr(a, k) for k in flags})
    return StreamConfig(**{k: v for k, v in given.items() if v is not None})


def stream_train(a) -> None:
    """Train with weights and Adam state in a ParameterStore, streamed layer by layer."""
    from llmbench.streaming.run import record, run_train

    cfg = _config(a, COMMON + TRAIN_ONLY, FLAGS)
    out = run_train(cfg)
    if out["rank"] != 0:
        return
    if a.db:
        out["result_key"] = record(a.db, "stream_train", cfg, out)
    if a.json:
        return emit_json(out)
    _print(out, "stream train", TRAIN_KEYS)
    print("loss: " + " ".join(f"{x:.4f}" for x in out["loss"]))


def stream_compare(a) -> None:
    """Train the same model resident and streamed (same seed and data, steps alternating)."""
    from llmbench.streaming.run import record, run_compare

    cfg = _config(a, COMMON, ("recompute",))
    out = run_compare(cfg)
    if a.db:
        out["result_key"] = record(a.db, "stream_compare", cfg, out)
    if a.json:
        return emit_json(out)
    _print(out, "stream compare", COMPARE_KEYS)


def _print(out: dict, title: str, keys: list[str]) -> None:
    table(title, ("key", "value"), [(k, fmt_metric(k, out[k]) if not isinstance(out[k], int) else f"{out[k]:,}")
                                     for k in keys], right=("value",))
