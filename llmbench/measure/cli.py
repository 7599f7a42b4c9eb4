"""`llmbench measure ...`: ceilings, block, train, infer, genslm (docs/measure.md).

    llmbench measure ceilings --json
    llmbench measure block --model gpt2-xl --batch 1 --seq 1024
    torchrun --nproc-per-node 2 -m llmbench measure train --model gpt2-small --baseline

No torch at import time: every command imports the engine inside. Each result is printed (a rich
table, or --json with keys status, metrics, error, environment, point) and recorded in the results
DB (--db, else $LLMBENCH_DB, else ./llmbench-results.db) unless --no-record.
"""
from __future__ import annotations

import os

import typer

DB_HELP = "results DB (default: $LLMBENCH_DB or ./llmbench-results.db)"
_POINT_SKIP = ("device", "save", "repeats", "warmup", "warmup_steps", "steps", "hardware",
               "baseline", "baseline_tokens_per_s", "seed")


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def parse_batches(text: str) -> list[int]:
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--batch must be an integer or a comma-separated list, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise ValueError(f"--batch values must be positive, got {text!r}")
    return values


def make_point(suite: str, config: dict, result: dict) -> dict:
    """What the DB keys a result by: suite, model, hardware and the workload (not run lengths)."""
    env = result.get("environment", {})
    hardware = env.get("profile") or _profile(env)
    point = {"suite": suite, "hardware": hardware}
    point.update({k: v for k, v in config.items() if k not in _POINT_SKIP and v is not None})
    if "devices" not in point:
        point["devices"] = int(env.get("world_size", 1) or 1)
    return point


def _profile(env: dict) -> str:
    if env.get("device_type", "cpu") == "cpu":
        return "cpu"
    slug = "".join(c if c.isalnum() else "-" for c in env.get("device_name", "").lower())
    return "-".join(p for p in slug.split("-") if p) or env.get("device_type", "device")


def record(suite: str, config: dict, result: dict, db: str | None) -> str | None:
    """Store one result; returns its key (None when the results store is unavailable)."""
    try:
        from llmbench.results.store import ResultsDB
    except ImportError:
        return None
    point = make_point(suite, config, result)
    with ResultsDB(db) as store:
        return store.record(point, source="measured", status=result["status"],
                            metrics=result.get("metrics") or {}, environment=result.get("environment"),
                            error=result.get("error"))


LABELS = {"fwd_time_s": "fwd s", "fwd_bwd_time_s": "fwd+bwd s", "fwd_tflops": "fwd TFLOP/s",
          "fwd_bwd_tflops": "fwd+bwd TFLOP/s", "ceiling_tflops": "ceiling TFLOP/s",
          "frac_of_ceiling": "of ceiling", "mfu": "MFU", "tokens_per_s": "tokens/s",
          "step_time_s": "step s", "achieved_tflops": "TFLOP/s", "peak_mem_bytes": "peak mem",
          "world_size": "procs", "scaling_efficiency": "scaling eff", "prefill_tokens_per_s": "prefill tok/s",
          "time_to_first_token_s": "TTFT s", "decode_tokens_per_s": "decode tok/s",
          "decode_time_s_per_token": "decode s/tok", "latency_s_p50": "p50 s", "latency_s_p90": "p90 s",
          "latency_s_p99": "p99 s", "samples_per_s": "samples/s", "loss_first": "loss first",
          "loss_last": "loss last"}


def _fmt_key(key: str, v) -> str:
    if key == "peak_mem_bytes" and isinstance(v, (int, float)):
        return f"{v / 2**20:,.0f} MiB"
    return _fmt(v)


def _fmt(v) -> str:
    if isinstance(v, float):
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e6):
            return f"{v:.4g}"
        return f"{v:.4f}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in list(v.items())[:6])
    return str(v)


def show(title: str, results: list[tuple[dict, dict]], keys: list[str]) -> None:
    """One row per result: the config columns that vary, then the key metrics."""
    from rich.table import Table

    from llmbench.cli import console
    t = Table(title=title)
    t.add_column("status")
    for k in keys:
        t.add_column(LABELS.get(k, k), justify="right")
    t.add_column("error")
    for cfg, res in results:
        m = res.get("metrics") or {}
        cells = [m.get(k, cfg.get(k)) for k in keys]
        t.add_row(res["status"], *[_fmt_key(k, v) if v is not None else "-" for k, v in zip(keys, cells)],
                  res.get("error") or "")
    console().print(t)


def run_and_report(suite: str, configs: list[dict], keys: list[str], *, json_out: bool,
                   db: str | None, no_record: bool, title: str) -> None:
    from llmbench.measure.suites import run_suite
    results = []
    for cfg in configs:
        res = run_suite(suite, cfg)
        results.append((cfg, res))
        if _rank() == 0 and not no_record:
            res["key"] = record(suite, cfg, res, db)
    if _rank() != 0:
        return
    if json_out:
        from llmbench.cli import emit_json
        out = [{**res, "point": make_point(suite, cfg, res)} for cfg, res in results]
        return emit_json(out[0] if len(out) == 1 else out)
    show(title, results, keys)


def _finish_distributed() -> None:
    try:
        import torch.distributed as tdist
    except ImportError:
        return
    if tdist.is_available() and tdist.is_initialized():
        tdist.destroy_process_group()


def register(app: typer.Typer) -> None:
    measure_app = typer.Typer(help="Measure on the hardware at hand (PyTorch): ceilings, block, "
                                   "train, infer, genslm.", no_args_is_help=True)
    app.add_typer(measure_app, name="measure")

    @measure_app.command("ceilings")
    def ceilings_cmd(
        device: str = typer.Option("auto", "--device", help="auto | cpu | cuda[:i] | xpu | hpu | mps"),
        model: str = typer.Option(None, "--model", help="also the GEMM shapes of this model's layer"),
        batch: int = typer.Option(1, "--batch", help="batch of the model's layer shapes"),
        seq: int = typer.Option(1024, "--seq", help="sequence length of the model's layer shapes"),
        precision: str = typer.Option(None, "--precision", help="comma list (default: all the device has)"),
        repeats: int = typer.Option(5, "--repeats", help="timed repetitions per GEMM and copy"),
        size: int = typer.Option(None, "--size", help="square GEMM size (default 4096 CPU, 8192 GPU)"),
        save: bool = typer.Option(True, "--save/--no-save", help="save as the local hardware profile"),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        no_record: bool = typer.Option(False, "--no-record", help="do not write the results DB"),
    ) -> None:
        """GEMM FLOP/s per dtype (square, and a model layer's shapes) and copy bandwidth."""
        cfg = {"device": device, "model": model, "batch": batch, "seq": seq, "repeats": repeats,
               "size": size, "save": save,
               "precisions": [p.strip() for p in precision.split(",")] if precision else None}
        from llmbench.measure.suites import run_suite
        res = run_suite("ceilings", cfg)
        if not no_record:
            res["key"] = record("ceilings", cfg, res, db)
        if json_out:
            from llmbench.cli import emit_json
            return emit_json({**res, "point": make_point("ceilings", cfg, res)})
        _show_ceilings(res)

    @measure_app.command("block")
    def block_cmd(
        model: str = typer.Option("gpt2-xl", "--model", help="preset or HF config.json"),
        batch: str = typer.Option("1", "--batch", help="batch size, or a comma list to sweep"),
        seq: int = typer.Option(1024, "--seq"),
        precision: str = typer.Option("fp32", "--precision", help="fp32 | tf32 | fp16 | bf16"),
        device: str = typer.Option("auto", "--device"),
        repeats: int = typer.Option(5, "--repeats"),
        ceiling: str = typer.Option("shapes", "--ceiling", help="shapes (measure now) | profile | none"),
        hardware: str = typer.Option(None, "--hardware", help="catalog entry for MFU (default: detected)"),
        compile_: bool = typer.Option(False, "--compile", help="torch.compile the block"),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        no_record: bool = typer.Option(False, "--no-record"),
    ) -> None:
        """One transformer layer: forward and forward+backward time, TFLOP/s, fraction of ceiling."""
        configs = [{"model": model, "batch": b, "seq": seq, "precision": precision, "device": device,
                    "repeats": repeats, "ceiling": ceiling, "hardware": hardware, "compile": compile_}
                   for b in parse_batches(batch)]
        run_and_report("block", configs, ["batch", "fwd_time_s", "fwd_bwd_time_s", "fwd_tflops",
                                          "fwd_bwd_tflops", "ceiling_tflops", "frac_of_ceiling", "mfu"],
                       json_out=json_out, db=db, no_record=no_record, title=f"block: {model} seq {seq} {precision}")

    @measure_app.command("train")
    def train_cmd(
        model: str = typer.Option("gpt2-small", "--model"),
        batch: str = typer.Option("4", "--batch", help="micro-batch per process, or a comma list"),
        seq: int = typer.Option(256, "--seq"),
        grad_accum: int = typer.Option(1, "--grad-accum", help="micro-batches per optimizer step"),
        steps: int = typer.Option(10, "--steps", help="timed steps (after the warm-up)"),
        warmup_steps: int = typer.Option(2, "--warmup-steps"),
        precision: str = typer.Option("fp32", "--precision", help="fp32 | tf32 | fp16 | bf16 (autocast)"),
        sparsity: float = typer.Option(0.0, "--sparsity", help="fraction of dense-layer weights masked"),
        sparsity_pattern: str = typer.Option("unstructured", "--sparsity-pattern", help="unstructured | 2:4"),
        data: str = typer.Option("synthetic", "--data", help="synthetic | corpus | genome"),
        n_layers: int = typer.Option(None, "--n-layers", help="override the preset's layer count"),
        device: str = typer.Option("auto", "--device"),
        compile_: bool = typer.Option(False, "--compile", help="torch.compile the model"),
        baseline: bool = typer.Option(False, "--baseline", help="under torchrun: also time one process alone"),
        baseline_tps: float = typer.Option(None, "--baseline-tokens-per-s", help="one-process tokens/s"),
        hardware: str = typer.Option(None, "--hardware", help="catalog entry for MFU (default: detected)"),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        no_record: bool = typer.Option(False, "--no-record"),
    ) -> None:
        """AdamW pre-training steps: tokens/s, step time, TFLOP/s, MFU, peak memory."""
        configs = [{"model": model, "batch": b, "seq": seq, "grad_accum": grad_accum, "steps": steps,
                    "warmup_steps": warmup_steps, "precision": precision, "sparsity": sparsity,
                    "sparsity_pattern": sparsity_pattern, "data": data, "n_layers": n_layers,
                    "device": device, "compile": compile_, "baseline": baseline,
                    "baseline_tokens_per_s": baseline_tps, "hardware": hardware}
                   for b in parse_batches(batch)]
        try:
            run_and_report("train", configs, ["batch", "tokens_per_s", "step_time_s", "achieved_tflops",
                                              "mfu", "peak_mem_bytes", "world_size", "scaling_efficiency"],
                           json_out=json_out, db=db, no_record=no_record,
                           title=f"train: {model} seq {seq} {precision}")
        finally:
            _finish_distributed()

    @measure_app.command("infer")
    def infer_cmd(
        model: str = typer.Option("bert-base", "--model"),
        batch: str = typer.Option("1", "--batch", help="batch size, or a comma list to sweep"),
        seq: int = typer.Option(128, "--seq"),
        gen_len: int = typer.Option(16, "--gen-len", help="tokens to decode (decoder models)"),
        precision: str = typer.Option("fp32", "--precision"),
        device: str = typer.Option("auto", "--device"),
        repeats: int = typer.Option(20, "--repeats"),
        hardware: str = typer.Option(None, "--hardware"),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        no_record: bool = typer.Option(False, "--no-record"),
    ) -> None:
        """Latency against batch (encoders: p50/p90/p99); prefill and KV-cache decode (decoders)."""
        configs = [{"model": model, "batch": b, "seq": seq, "gen_len": gen_len, "precision": precision,
                    "device": device, "repeats": repeats, "hardware": hardware}
                   for b in parse_batches(batch)]
        from llmbench.models import get_model
        decoder = get_model(model).head == "lm"
        keys = (["batch", "prefill_tokens_per_s", "time_to_first_token_s", "decode_tokens_per_s",
                 "decode_time_s_per_token", "peak_mem_bytes"] if decoder else
                ["batch", "latency_s_p50", "latency_s_p90", "latency_s_p99", "samples_per_s",
                 "achieved_tflops"])
        run_and_report("infer", configs, keys, json_out=json_out, db=db, no_record=no_record,
                       title=f"infer: {model} seq {seq} {precision}")

    @measure_app.command("genslm")
    def genslm_cmd(
        model: str = typer.Option("genslm-25m", "--model"),
        batch: str = typer.Option("2", "--batch"),
        seq: int = typer.Option(512, "--seq"),
        steps: int = typer.Option(5, "--steps"),
        precision: str = typer.Option("fp32", "--precision"),
        n_layers: int = typer.Option(None, "--n-layers"),
        device: str = typer.Option("auto", "--device"),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
        db: str = typer.Option(None, "--db", help=DB_HELP),
        no_record: bool = typer.Option(False, "--no-record"),
    ) -> None:
        """GenSLM: a GPT over codons trained on the shipped genome sample."""
        configs = [{"model": model, "batch": b, "seq": seq, "steps": steps, "precision": precision,
                    "n_layers": n_layers, "device": device} for b in parse_batches(batch)]
        try:
            run_and_report("genslm", configs, ["batch", "tokens_per_s", "step_time_s", "achieved_tflops",
                                               "loss_first", "loss_last", "peak_mem_bytes"],
                           json_out=json_out, db=db, no_record=no_record, title=f"genslm: {model} seq {seq}")
        finally:
            _finish_distributed()


def _show_ceilings(res: dict) -> None:
    from rich.table import Table

    from llmbench.cli import console
    if res["status"] != "ok":
        typer.echo(f"{res['status']}: {res['error']}")
        return
    m = res["metrics"]
    t = Table(title=f"ceilings: {m['device']} ({m['repeats']} repetitions)")
    for c in ("what", "precision", "shape", "min", "median", "max", "unit"):
        t.add_column(c, justify="right" if c in ("min", "median", "max") else "left")
    for p, r in m["gemm"].items():
        if "skipped" in r:
            t.add_row("GEMM", p, "-", "-", "-", "-", r["skipped"])
            continue
        t.add_row("GEMM square", p, "x".join(map(str, r["shape"])), *(f"{r[k]:.3f}" for k in
                  ("min", "median", "max")), "TFLOP/s")
    for p, r in m["layer"].items():
        t.add_row(f"GEMM {r['model']} layer", p, f"B={r['batch']} T={r['seq']}", "", 
                  f"{r['ceiling_tflops']:.3f}", "", "TFLOP/s (time-weighted, fwd+bwd)")
    c = m["copy"]
    t.add_row("copy", "-", f"{c['bytes'] / 2**20:.0f} MiB", *(f"{c[k]:.1f}" for k in ("min", "median", "max")),
              "GB/s (read+write)")
    console().print(t)
    if m.get("saved_to"):
        typer.echo(f"saved profile: {m['saved_to']}")
