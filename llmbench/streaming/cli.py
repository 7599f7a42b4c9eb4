"""`llmbench stream train|compare|infer`: the wafer-scale designs as runtimes (docs/stream.md).

    llmbench stream train --model tiny --batch 8 --seq 64 --steps 20 --store disk:/tmp/st --json
    llmbench stream train --model tiny --precision bf16 --store disk:/tmp/st --overwrite
    llmbench stream compare --model tiny --width 256 --batch 8 --seq 256 --steps 6 --json
    torchrun --nproc-per-node 2 -m llmbench stream infer --model gpt2-small --batch 4 --prompt-len 128

Options are the fields of StreamConfig / PipelineConfig (llmbench/streaming/config.py, torch-free),
each default declared there once; the runtimes (torch) load inside the commands.
"""
from __future__ import annotations

from dataclasses import MISSING, fields

from llmbench._cliutil import add_json, emit_json, float_in, int_in, table
from llmbench.units import fmt_metric

#: one line of help per option (the dataclass docstrings say more)
HELP = {
    "model": "preset name or 'tiny' (4 layers, width 64, vocab 256)", "layers": "override n_layers",
    "width": "override d_model (d_ff = 4 x width)", "heads": "override n_heads", "vocab": "override vocab_size",
    "batch": "sequences per step, per rank (infer: concurrent requests)", "seq": "tokens per sequence",
    "steps": "optimizer steps", "store": "where fp32 masters and Adam live: ram | disk:PATH",
    "device": "cpu, cuda, cuda:1, auto ...", "precision": "fp32 | bf16 | fp16 of the streamed weights and compute "
    "(fp32 masters and Adam in the store)", "prefetch": "layers loaded ahead of the computing one",
    "sparsity": "fraction of each weight matrix pruned by magnitude and streamed sparse",
    "device_memory_budget_bytes": "bytes allowed on the device; over it: exit 2",
    "resume": "continue from the disk store", "overwrite": "replace an existing store at the --store path",
    "recompute": "keep only block inputs on the device; recompute each block's forward in the backward",
    "lr": "AdamW learning rate", "seed": "seed of the weights and data", "warmup_steps": "steps left out of tokens_per_s",
    "check_ranks": "data parallel: hash each rank's weights every step",
    "loss_scale_init": "fp16: initial dynamic loss scale", "loss_scale_growth_interval": "fp16: steps before the scale doubles",
    "micro_batches": "micro-batches in flight (default: one per stage)", "prompt_len": "input tokens per request",
    "gen_len": "generated tokens per request (greedy)", "stage_memory_budget_bytes": "bytes each stage may hold",
    "balance": "layers (even split) | decode (the last stage, which runs the LM head, takes fewer layers)",
    "warmup_runs": "untimed generations first",
}
FLAGS = {"device_memory_budget_bytes": "--device-memory-budget", "stage_memory_budget_bytes": "--stage-memory-budget"}
COMPARE = ("model", "layers", "width", "heads", "vocab", "batch", "seq", "steps", "device", "precision", "prefetch",
           "recompute", "lr", "seed", "warmup_steps", "loss_scale_init", "loss_scale_growth_interval")
TRAIN_KEYS = ["model", "params", "world_size", "tokens_per_s", "step_time_s", "streamed_bytes_per_step",
              "streamed_fraction_of_dense", "exposed_stream_s_per_step", "optimizer_s_per_step",
              "exposed_optimizer_s_per_step", "device_weight_bytes_peak", "layer_weight_bytes",
              "embedding_weight_bytes", "store_bytes"]
COMPARE_KEYS = ["model", "tokens_per_step", "resident_tokens_per_s", "streamed_tokens_per_s", "ratio",
                "max_rel_loss_diff", "device_weight_bytes_peak", "layer_weight_bytes", "exposed_stream_s_per_step"]


def register(cli) -> None:
    from llmbench.streaming.config import PipelineConfig, StreamConfig

    g = cli.group("stream", "The wafer-scale designs as runtimes: weight-streaming training (weights and Adam "
                            "state in RAM or on disk, streamed layer by layer) and SRAM-resident pipelined inference.")
    for name, fn, cls, names in (("train", stream_train, StreamConfig, None),
                                 ("compare", stream_compare, StreamConfig, COMPARE),
                                 ("infer", stream_infer, PipelineConfig, None)):
        p = g.command(name, fn)
        p.set_defaults(_config=cls, _names=names)
        _options(p, cls, names)
        p.add_argument("--db", help="also record the result in this results database (SQLite)")
        add_json(p)


def _options(p, cls, names) -> None:
    """One option per dataclass field, typed by its default; the default itself stays in the
    dataclass (an option left out is not passed)."""
    for f in fields(cls):
        if names is not None and f.name not in names:
            continue
        default = f.default if f.default is not MISSING else None
        flag = FLAGS.get(f.name, "--" + f.name.replace("_", "-"))
        text = HELP.get(f.name, f.name) + ("" if default is None or isinstance(default, bool) else f" (default {default})")
        if isinstance(default, bool):
            p.add_argument(flag, dest=f.name, action="store_true", default=None, help=text)
            continue
        typ = {int: int_in(0 if f.name in ("prefetch", "seed", "warmup_steps", "warmup_runs") else 1, name=f.name),
               float: float_in(0.0, name=f.name)}.get(type(default), str)
        if f.name in ("layers", "width", "heads", "vocab", "micro_batches") or f.name.endswith("_bytes"):
            typ = int_in(1, name=f.name)
        p.add_argument(flag, dest=f.name, type=typ, default=None, help=text)


def _config(a):
    names = [f.name for f in fields(a._config) if a._names is None or f.name in a._names]
    return a._config(**{k: getattr(a, k) for k in names if getattr(a, k) is not None})


def _run(a, run, record) -> dict | None:
    """Check --db is writable before the work, run, record on rank 0, print --json; the output
    for a table, or None when nothing is left to print (another rank, or --json)."""
    cfg = _config(a)
    if a.db:
        from llmbench.results.safe import check_writable
        check_writable(a.db)  # before the work, not after it
    out = run(cfg)
    if out.get("rank", 0) != 0:
        return None
    if a.db:
        out["result_keys"] = record(a.db, cfg, out)
    if a.json:
        emit_json(out)
        return None
    return out


def stream_train(a) -> None:
    """Train with fp32 masters and Adam state in a ParameterStore, streamed layer by layer."""
    from llmbench.streaming.run import record, run_train

    out = _run(a, run_train, record)
    if out is not None:
        _print(out, "stream train", TRAIN_KEYS)
        print("loss: " + " ".join(f"{x:.4f}" for x in out["loss"]))


def stream_compare(a) -> None:
    """Train the same model resident, then streamed, from the same initial state and data."""
    from llmbench.streaming.run import record, run_compare

    out = _run(a, run_compare, record)
    if out is not None:
        _print(out, "stream compare", COMPARE_KEYS)


def stream_infer(a) -> None:
    """Pipelined inference under torchrun: one stage per process, its layers' weights and KV cache
    resident, requests micro-batched so every stage works every step (seed 004's wafer pipeline)."""
    from llmbench.streaming.pipeline import record, run_pipeline

    out = _run(a, run_pipeline, record)
    if out is not None:
        keys = ("model", "stages", "batch", "micro_batches", "time_to_first_token_s",
                "decode_tokens_per_s_per_seq", "decode_tokens_per_s", "max_batch_x_context")
        _print(out, "stream infer (pipelined)", list(keys))


def _print(out: dict, title: str, keys: list[str]) -> None:
    table(title, ("key", "value"), [(k, fmt_metric(k, out[k]) if not isinstance(out[k], int) else f"{out[k]:,}")
                                     for k in keys if k in out], right=("value",))
