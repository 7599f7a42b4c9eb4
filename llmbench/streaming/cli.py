"""`llmbench stream train|compare`: the weight-streaming runtime's commands (docs/stream.md).

    llmbench stream train --model tiny --batch 8 --seq 64 --steps 20 --store disk:/tmp/st --json
    llmbench stream compare --model tiny --width 256 --batch 8 --seq 256 --steps 6 --json

Imports no torch at import time (llmbench.streaming.run is imported inside the commands); the
defaults come from StreamConfig (llmbench/streaming/config.py, torch-free).
"""
from __future__ import annotations

import typer

from llmbench.streaming.config import StreamConfig, defaults

D = {k: str(v) if k == "store" else v for k, v in defaults(StreamConfig).items()}

stream_app = typer.Typer(help="Weight-streaming training: weights and Adam state in host RAM or on "
                              "disk, streamed to the device layer by layer (MemoryX/SwarmX).",
                         no_args_is_help=True)


def _config(**kw):
    return StreamConfig(**kw)


_model = typer.Option(D["model"], "--model", help="preset name or 'tiny' (4 layers, width 64, vocab 256)")
_layers = typer.Option(None, "--layers", help="override the number of layers")
_width = typer.Option(None, "--width", help="override d_model (d_ff = 4 x width)")
_heads = typer.Option(None, "--heads", help="override the number of heads")
_vocab = typer.Option(None, "--vocab", help="override the vocabulary size")
_batch = typer.Option(D["batch"], "--batch", help="sequences per step (per rank)")
_seq = typer.Option(D["seq"], "--seq", help="tokens per sequence")
_steps = typer.Option(D["steps"], "--steps", help="optimizer steps")
_device = typer.Option(D["device"], "--device", help="cpu, cuda, cuda:1, auto ...")
_prefetch = typer.Option(D["prefetch"], "--prefetch", help="layers loaded ahead of the computing one")
_lr = typer.Option(D["lr"], "--lr", help="AdamW learning rate")
_seed = typer.Option(D["seed"], "--seed", help="init and data seed")
_warm = typer.Option(D["warmup_steps"], "--warmup-steps", help="steps left out of tokens_per_s")
_json = typer.Option(False, "--json", help="JSON output")
_db = typer.Option(None, "--db", help="also record the result in this results database (SQLite)")
_precision = typer.Option(D["precision"], "--precision", help="fp32 | bf16 | fp16: weights streamed "
                          "to the device and its compute (fp32 masters and Adam in the store)")
_recompute = typer.Option(False, "--recompute", help="keep only block inputs on the device; "
                          "recompute each block's forward in the backward")


@stream_app.command("train")
def train(model: str = _model, layers: int = _layers, width: int = _width, heads: int = _heads,
          vocab: int = _vocab, batch: int = _batch, seq: int = _seq, steps: int = _steps,
          store: str = typer.Option(D["store"], "--store", help="ram | disk:PATH"),
          device: str = _device, prefetch: int = _prefetch, precision: str = _precision,
          sparsity: float = typer.Option(D["sparsity"], "--sparsity", help="fraction of each weight "
                                         "matrix pruned (magnitude) and streamed sparse"),
          device_memory_budget: int = typer.Option(None, "--device-memory-budget",
                                                   help="bytes allowed on the device; over it: exit 2"),
          resume: bool = typer.Option(False, "--resume", help="continue from the disk store"),
          overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing store at "
                                         "the --store path"),
          check_ranks: bool = typer.Option(False, "--check-ranks", help="data parallel: hash each "
                                           "rank's weights every step"),
          recompute: bool = _recompute, lr: float = _lr, seed: int = _seed,
          warmup_steps: int = _warm, db: str = _db, json_out: bool = _json) -> None:
    """Train with weights and Adam state in a ParameterStore, streamed layer by layer."""
    cfg = _config(model=model, layers=layers, width=width, heads=heads, vocab=vocab, batch=batch,
                  seq=seq, steps=steps, store=store, device=device, prefetch=prefetch,
                  sparsity=sparsity, device_memory_budget_bytes=device_memory_budget, resume=resume,
                  overwrite=overwrite, precision=precision, check_ranks=check_ranks, recompute=recompute, lr=lr, seed=seed,
                  warmup_steps=warmup_steps)
    from llmbench.streaming.run import run_train

    out = run_train(cfg)
    if out["rank"] != 0:
        return
    if db:
        from llmbench.streaming.run import record
        out["result_key"] = record(db, "stream_train", cfg, out)
    if json_out:
        from llmbench.cli import emit_json
        return emit_json(out)
    _print(out, "stream train", ["model", "params", "world_size", "tokens_per_s", "step_time_s",
                                 "streamed_bytes_per_step", "streamed_fraction_of_dense",
                                 "exposed_stream_s_per_step", "optimizer_s_per_step",
                                 "exposed_optimizer_s_per_step", "device_weight_bytes_peak", "layer_weight_bytes",
                                 "embedding_weight_bytes", "store_bytes"])
    typer.echo("loss: " + " ".join(f"{x:.4f}" for x in out["loss"]))


@stream_app.command("compare")
def compare(model: str = _model, layers: int = _layers, width: int = _width, heads: int = _heads,
            vocab: int = _vocab, batch: int = _batch, seq: int = _seq, steps: int = _steps,
            device: str = _device, prefetch: int = _prefetch, recompute: bool = _recompute,
            precision: str = _precision,
            lr: float = _lr, seed: int = _seed, warmup_steps: int = _warm, db: str = _db,
            json_out: bool = _json) -> None:
    """Train the same model resident and streamed (same seed and data, steps alternating)."""
    cfg = _config(model=model, layers=layers, width=width, heads=heads, vocab=vocab, batch=batch,
                  seq=seq, steps=steps, device=device, prefetch=prefetch, recompute=recompute,
                  precision=precision, lr=lr, seed=seed, warmup_steps=warmup_steps)
    from llmbench.streaming.run import run_compare

    out = run_compare(cfg)
    if db:
        from llmbench.streaming.run import record
        out["result_key"] = record(db, "stream_compare", cfg, out)
    if json_out:
        from llmbench.cli import emit_json
        return emit_json(out)
    _print(out, "stream compare", ["model", "tokens_per_step", "resident_tokens_per_s",
                                   "streamed_tokens_per_s", "ratio", "max_rel_loss_diff",
                                   "device_weight_bytes_peak", "layer_weight_bytes",
                                   "exposed_stream_s_per_step"])


def _print(out: dict, title: str, keys: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, show_header=False)
    t.add_column("key")
    t.add_column("value", justify="right")
    for k in keys:
        v = out[k]
        t.add_row(k, f"{v:,.4g}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v))
    Console().print(t)


def register(app: typer.Typer) -> None:
    app.add_typer(stream_app, name="stream")
