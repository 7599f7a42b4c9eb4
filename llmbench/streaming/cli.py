"""`llmbench stream train|compare|infer`: the wafer-scale designs as runtimes (docs/stream.md).

    llmbench stream train --model tiny --batch 8 --seq 64 --steps 20 --store disk:/tmp/st --json
    llmbench stream train --model tiny --precision bf16 --store disk:/tmp/st --overwrite
    llmbench stream compare --model gpt2-small --batch 8 --seq 256 --steps 20 --json
    torchrun --nproc-per-node 2 -m llmbench stream infer --model gpt2-small --batch 4 --prompt-len 128

train and compare take a Workload (llmbench/point.py: `--batch` is the global batch, split over
the torchrun ranks as in measure and predict; `--layers/--width/--heads/--vocab` resize the model;
`--recompute full`) and StreamOptions (llmbench/streaming/config.py: store, prefetch, steps, lr,
seed, budget); infer takes a PipelineConfig. Every option comes from a dataclass field's metadata
(_cliutil.add_fields), each default declared once; the runtimes (torch) load inside the commands.
"""
from __future__ import annotations

from llmbench._cliutil import add_fields, add_json, emit_json, int_in, table, values
from llmbench.units import fmt_metric

WORKLOAD = {"train": ("model", "batch", "seq_len", "precision", "sparsity", "recompute"),
            "compare": ("model", "batch", "seq_len", "precision", "recompute")}
OPTIONS = {"train": ("device", "store", "prefetch", "steps", "warmup_steps", "lr", "seed",
                     "device_memory_budget_bytes", "resume", "overwrite", "check_ranks", "loss_scale_init",
                     "loss_scale_growth_interval"),
           "compare": ("device", "prefetch", "steps", "warmup_steps", "lr", "seed", "loss_scale_init",
                       "loss_scale_growth_interval")}
#: per-command defaults: the tiny model on the CPU; compare times >= 20 step pairs after 2 warm-up pairs
DEFAULTS = {"train": {"model": "tiny", "batch": 8, "seq_len": 64, "device": "cpu", "store": "ram"},
            "compare": {"model": "tiny", "batch": 8, "seq_len": 64, "device": "cpu", "steps": 20,
                        "warmup_steps": 2}}
RESIZE = {"layers": "n_layers", "width": "d_model (d_ff follows)", "heads": "n_heads", "vocab": "vocab_size"}
TRAIN_KEYS = ["model", "params", "world_size", "batch", "micro_batch", "tokens_per_s", "step_time_s",
              "streamed_bytes_per_step", "streamed_fraction_of_dense", "exposed_stream_s_per_step",
              "optimizer_s_per_step", "exposed_optimizer_s_per_step", "device_weight_bytes_peak",
              "layer_weight_bytes", "embedding_weight_bytes", "store_bytes", "host_heap"]
COMPARE_KEYS = ["model", "tokens_per_step", "pairs", "resident_tokens_per_s", "streamed_tokens_per_s", "ratio",
                "ratio_p10", "ratio_p90", "max_rel_loss_diff", "device_weight_bytes_peak", "layer_weight_bytes",
                "host_heap"]


def register(cli) -> None:
    from llmbench.point import Workload
    from llmbench.streaming.config import RESIZE_HIGH, PipelineConfig, StreamOptions

    g = cli.group("stream", "The wafer-scale designs as runtimes: weight-streaming training (weights and Adam "
                            "state in RAM or on disk, streamed layer by layer) and SRAM-resident pipelined inference.")
    for name, fn in (("train", stream_train), ("compare", stream_compare)):
        p = g.command(name, fn)
        add_fields(p, Workload, WORKLOAD[name], defaults=DEFAULTS[name],
                   help={"model": "preset name, or 'tiny' (GPT-2 small resized: 4 layers, width 64, vocab 256)",
                         "recompute": "full: keep only block inputs, recompute each block's forward in the backward"})
        for flag, what in RESIZE.items():
            p.add_argument(f"--{flag}", type=int_in(1, RESIZE_HIGH[flag], name=flag), help=f"resize: {what}")
        add_fields(p, StreamOptions, OPTIONS[name], defaults=DEFAULTS[name])
        _outputs(p)
    p = g.command("infer", stream_infer)
    add_fields(p, PipelineConfig, [f for f in PipelineConfig.__dataclass_fields__])
    _outputs(p)


def _outputs(p) -> None:
    p.add_argument("--db", help="also record the result in this results database (SQLite)")
    add_json(p)


def workload_of(a, command: str):
    """The Workload the options describe (the tiny model and --layers ... as `resize`)."""
    from llmbench.point import Layout
    from llmbench.streaming.config import stream_workload

    kw = {k: v for k, v in values(a, WORKLOAD[command]).items() if k != "recompute"}
    return stream_workload(**kw, **{k: getattr(a, k) for k in RESIZE}, layout=Layout(recompute=a.recompute))


def _emit(a, out: dict, record) -> dict | None:
    """Record on rank 0 (--db), print --json; the output for a table, or None when nothing is
    left to print (another rank, or --json)."""
    if out.get("rank", 0) != 0:
        return None
    if a.db:
        out["result_keys"] = record(a.db, out)
    if a.json:
        emit_json(out)
        return None
    return out


def _check_db(a) -> None:
    if a.db:
        from llmbench.results.safe import check_writable
        check_writable(a.db)  # before the work, not after it


def stream_train(a) -> None:
    """Train with fp32 masters and Adam state in a ParameterStore, streamed layer by layer."""
    from llmbench.streaming.config import StreamOptions
    from llmbench.streaming.run import record, run_train

    w, opts = workload_of(a, "train"), StreamOptions(**values(a, OPTIONS["train"]))
    _check_db(a)
    out = _emit(a, run_train(w, opts), record)
    if out is not None:
        _print(out, "stream train", TRAIN_KEYS)
        print("loss: " + " ".join(f"{x:.4f}" for x in out["loss"]))


def stream_compare(a) -> None:
    """Train one Workload streamed and resident (measure train's trainer), same initial weights and
    data, step pairs interleaved: the ratio is the median of the per-pair ratios, with p10-p90."""
    from llmbench.streaming.config import StreamOptions
    from llmbench.streaming.run import record, run_compare

    w, opts = workload_of(a, "compare"), StreamOptions(**values(a, OPTIONS["compare"]))
    _check_db(a)
    out = _emit(a, run_compare(w, opts), record)
    if out is not None:
        _print(out, "stream compare", COMPARE_KEYS)
        print("phases of a streamed step (s): " + ", ".join(f"{k} {v:.3f}" for k, v in out["phases_s_per_step"].items()))


def stream_infer(a) -> None:
    """Pipelined inference under torchrun: one stage per process, its layers' weights and KV cache
    resident, requests micro-batched so every stage works every step (seed 004's wafer pipeline)."""
    from llmbench.streaming.config import PipelineConfig, spec_of

    cfg = PipelineConfig(**values(a, PipelineConfig.__dataclass_fields__))
    spec_of(cfg, cfg.prompt_len + cfg.gen_len)  # the model's positions, before torch is imported
    _check_db(a)
    from llmbench.streaming.pipeline import record, run_pipeline  # torch, only now

    out = _emit(a, run_pipeline(cfg), lambda db, out: record(db, cfg, out))
    if out is not None:
        keys = ("model", "stages", "batch", "micro_batches", "time_to_first_token_s",
                "decode_tokens_per_s_per_seq", "decode_tokens_per_s", "max_batch_x_context")
        _print(out, "stream infer (pipelined)", list(keys))


def _print(out: dict, title: str, keys: list[str]) -> None:
    table(title, ("key", "value"), [(k, fmt_metric(k, out[k]) if not isinstance(out[k], int) else f"{out[k]:,}")
                                     for k in keys if k in out], right=("value",))
