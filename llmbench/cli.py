"""The llmbench command line (typer). Thin: parse, call one function, print.

    llmbench --help

Each area adds its commands through a `register(app)` function in its own `cli` module, which must
not import torch at import time (torch is imported inside the commands that need it), so
`llmbench models ...` and `llmbench predict ...` answer fast.
"""
from __future__ import annotations

import sys

import typer

from llmbench import __version__

app = typer.Typer(
    help="How fast will this LLM train or run on this hardware, and why? Measure, predict, stream.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="Model catalog: presets, Hugging Face config.json import, counting.",
                         no_args_is_help=True)
hardware_app = typer.Typer(help="Hardware catalog: peaks, memory tiers, interconnect, sources.",
                           no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(hardware_app, name="hardware")


from llmbench._cliutil import console, emit_json  # noqa: E402  (re-exported for the areas' commands)


def _fmt_num(x: float) -> str:
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


def _gib(x: float) -> str:
    return f"{x / 2**30:,.1f} GiB"


# ---------------------------------------------------------------- models

def model_summary(spec) -> dict:
    from llmbench.models.counting import (
        flops_per_token, kv_cache_bytes_per_token, param_breakdown, param_count,
        training_memory_bytes,
    )
    mem = training_memory_bytes(spec, "bf16")
    return {
        "name": spec.name, "family": spec.family, "params": param_count(spec),
        "params_breakdown": param_breakdown(spec),
        "n_layers": spec.n_layers, "d_model": spec.d_model, "n_heads": spec.n_heads,
        "n_kv_heads": spec.n_kv_heads, "d_ff": spec.d_ff, "vocab_size": spec.vocab_size,
        "max_seq_len": spec.max_seq_len, "activation": spec.activation, "norm": spec.norm,
        "position": spec.position, "tied_embeddings": spec.tied_embeddings, "head": spec.head,
        "flops_per_token_train": flops_per_token(spec, training=True),
        "flops_per_token_infer": flops_per_token(spec, training=False),
        "flops_seq_len": spec.max_seq_len,
        "training_memory_bytes": mem["total"], "training_memory_breakdown_bytes": mem,
        "kv_cache_bytes_per_token_bf16": kv_cache_bytes_per_token(spec, "bf16"),
        "source": spec.source, "notes": spec.notes,
    }


@models_app.command("list")
def models_list(json_out: bool = typer.Option(False, "--json", help="JSON output")) -> None:
    """List the model presets."""
    from llmbench.models import presets
    from llmbench.models.counting import param_count

    rows = [{"name": s.name, "family": s.family, "params": param_count(s), "n_layers": s.n_layers,
             "d_model": s.d_model, "n_heads": s.n_heads, "vocab_size": s.vocab_size,
             "max_seq_len": s.max_seq_len, "source": s.source} for s in presets().values()]
    if json_out:
        return emit_json(rows)
    from rich.table import Table

    t = Table(title="llmbench models")
    for col in ("name", "family", "params", "layers", "d_model", "heads", "vocab", "context"):
        t.add_column(col, justify="left" if col in ("name", "family") else "right",
                     no_wrap=True)
    for r in rows:
        t.add_row(r["name"], r["family"], _fmt_num(r["params"]), str(r["n_layers"]), str(r["d_model"]),
                  str(r["n_heads"]), str(r["vocab_size"]), str(r["max_seq_len"]))
    console().print(t)


@models_app.command("show")
def models_show(name: str = typer.Argument(..., help="preset name or path to a Hugging Face config.json"),
                json_out: bool = typer.Option(False, "--json", help="JSON output")) -> None:
    """Parameters, FLOPs per token, training memory and KV-cache size of one model."""
    from llmbench.models import get_model

    info = model_summary(get_model(name))
    if json_out:
        return emit_json(info)
    from rich.table import Table

    t = Table(title=info["name"], show_header=False)
    t.add_column("key")
    t.add_column("value")
    for key in ("family", "n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size",
                "max_seq_len", "activation", "norm", "position", "tied_embeddings", "head"):
        t.add_row(key, str(info[key]))
    t.add_row("params", f"{info['params']:,}")
    for part, n in info["params_breakdown"].items():
        if n:
            t.add_row(f"  {part}", f"{n:,}")
    t.add_row(f"train FLOPs/token (T={info['flops_seq_len']})", _fmt_num(info["flops_per_token_train"]))
    t.add_row("infer FLOPs/token (decode at T)", _fmt_num(info["flops_per_token_infer"]))
    t.add_row("training memory (bf16 + fp32 master + Adam)", _gib(info["training_memory_bytes"]))
    t.add_row("KV cache per token (bf16)", f"{info['kv_cache_bytes_per_token_bf16'] / 1024:,.1f} KiB")
    t.add_row("source", info["source"])
    if info["notes"]:
        t.add_row("notes", info["notes"])
    console().print(t)


# ---------------------------------------------------------------- hardware

@hardware_app.command("list")
def hardware_list(json_out: bool = typer.Option(False, "--json", help="JSON output")) -> None:
    """List the hardware catalog."""
    from llmbench.hardware import catalog

    rows = []
    for hw in catalog().values():
        mem = hw.device_memory
        info = hw.to_dict()
        rows.append({"name": hw.name, "display_name": hw.display_name, "kind": hw.kind,
                     "peak_flops": info["peak_flops"], "memory_tiers": info["memory_tiers"],
                     "sources": info["sources"],
                     "peak_bf16_flops": hw.peak("bf16"), "peak_fp32_flops": hw.peak("fp32"),
                     "memory_name": mem.name, "memory_bytes": mem.capacity_bytes,
                     "memory_bandwidth_bytes_per_s": mem.bandwidth_bytes_per_s})
    if json_out:
        return emit_json(rows)
    from rich.table import Table

    t = Table(title="llmbench hardware (dense peaks)")
    for col in ("name", "device", "kind", "bf16 TFLOP/s", "fp32 TFLOP/s", "memory", "GB", "TB/s"):
        t.add_column(col, justify="left" if col in ("name", "device", "kind", "memory") else "right")

    def tf(x):
        return "-" if x is None else f"{x / 1e12:,.2f}" if x < 1e13 else f"{x / 1e12:,.0f}"

    for r in rows:
        t.add_row(r["name"], r["display_name"], r["kind"], tf(r["peak_bf16_flops"]), tf(r["peak_fp32_flops"]),
                  r["memory_name"], f"{r['memory_bytes'] / 1e9:,.1f}",
                  f"{r['memory_bandwidth_bytes_per_s'] / 1e12:,.2f}")
    console().print(t)


@hardware_app.command("show")
def hardware_show(name: str = typer.Argument(..., help="hardware name, e.g. a100-80gb"),
                  json_out: bool = typer.Option(False, "--json", help="JSON output")) -> None:
    """Peaks, memory tiers, interconnect and the source of every number."""
    from llmbench.hardware import get_hardware

    hw = get_hardware(name)
    info = hw.to_dict()
    if json_out:
        return emit_json(info)
    from rich.table import Table

    con = console()
    t = Table(title=f"{hw.display_name} ({hw.name})", show_header=False)
    t.add_column("key")
    t.add_column("value")
    def flops(v):
        return f"{v / 1e12:,.1f} TFLOP/s" if v >= 1e12 else f"{v / 1e9:,.1f} GFLOP/s"

    for dt, v in hw.peak_flops.items():
        t.add_row(f"peak {dt} (dense)", flops(v))
    for dt, v in hw.peak_flops_sparse.items():
        t.add_row(f"peak {dt} (sparse)", flops(v))
    for tier in hw.memory_tiers:
        t.add_row(f"memory {tier.name} ({tier.role})",
                  f"{tier.capacity_bytes / 1e9:,.2f} GB at {tier.bandwidth_bytes_per_s / 1e9:,.0f} GB/s")
    if hw.interconnect:
        ic = hw.interconnect
        t.add_row("interconnect", f"{ic.name}: {ic.bandwidth_bytes_per_s / 1e9:,.0f} GB/s per device, "
                                  f"{ic.latency_s * 1e6:.1f} us, {ic.topology}")
    if hw.power_w:
        t.add_row("power", f"{hw.power_w:,.0f} W")
    t.add_row("skips zero weights", str(hw.skips_zero_weights))
    t.add_row("default modes", f"train {hw.default_mode_train}, infer {hw.default_mode_infer}")
    if getattr(hw, "overlay", None):
        t.add_row("measured/calibrated profile", str(hw.overlay))
    con.print(t)
    s = Table(title="sources")
    s.add_column("field")
    s.add_column("source")
    for k, v in hw.sources.items():
        s.add_row(k, v)
    con.print(s)
    if hw.notes:
        con.print(hw.notes)


# ---------------------------------------------------------------- other areas

def _register_areas() -> None:
    """Each engine adds its commands (its cli module imports no torch)."""
    import importlib

    for mod in ("llmbench.perfmodel.cli", "llmbench.measure.cli", "llmbench.results.cli",
                "llmbench.studies.cli", "llmbench.streaming.cli", "llmbench.report.cli"):
        importlib.import_module(mod).register(app)


@app.command("version")
def version() -> None:
    """Print the llmbench version."""
    typer.echo(__version__)


_register_areas()
def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input is one line on stderr and exit code 2, never a traceback."""
    try:  # newer typer vendors click as typer._click; older typer uses the click package
        from typer._click.exceptions import ClickException, UsageError
    except ImportError:
        from click.exceptions import ClickException, UsageError

    from llmbench._cliutil import BAD_INPUT, fail_one_line

    try:
        rv = app(args=argv, standalone_mode=False, prog_name="llmbench")
        if isinstance(rv, int) and not isinstance(rv, bool) and rv:
            sys.exit(rv)  # a command's typer.Exit(code) comes back as its code here
    except BAD_INPUT as e:
        fail_one_line(e)
    except UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # help was printed: not an error
            sys.exit(0)
        typer.echo(f"error: {e.format_message()}", err=True)
        sys.exit(2)
    except ClickException as e:
        typer.echo(f"error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:  # `llmbench ... | head`
        sys.stderr.close()
        sys.exit(0)
