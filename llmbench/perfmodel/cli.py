"""CLI of the analytical model: predict train|infer, project, calibrate, validate.

    llmbench predict train --model gpt2-xl --hardware a100-40gb --batch 64 --seq 1024 --devices 8
    llmbench predict infer --model llama-3.1-8b --hardware cs3 --batch 1 --prompt-len 128 --gen-len 256
    llmbench project --model gpt3-20b --hardware cs2 --dataset pile --batch 256 --seq 2048
    llmbench calibrate --published
    llmbench validate --json

predict and project parse their options with argparse in llmbench/perfmodel/commands.py (the
console script reaches them without typer, see llmbench/entry.py); they are registered here too
so that `llmbench --help` lists them. Imports nothing heavy at import time.
"""
from __future__ import annotations

import typer

from llmbench.perfmodel.commands import _emit, predict_infer_main, predict_train_main, project_main

def register(app: typer.Typer) -> None:
    predict_app = typer.Typer(help="Predict training or inference speed on any catalog hardware (analytical model).",
                              no_args_is_help=True)
    app.add_typer(predict_app, name="predict")

    fast = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}

    @predict_app.command("train", context_settings=fast, add_help_option=False)
    def predict_train_cmd(ctx: typer.Context) -> None:
        """Step time, throughput, TFLOP/s, MFU, bound and memory of one training configuration
        (--model --hardware --batch --seq [--devices ...]; --help lists all options)."""
        predict_train_main(ctx.args)

    @predict_app.command("infer", context_settings=fast, add_help_option=False)
    def predict_infer_cmd(ctx: typer.Context) -> None:
        """TTFT, decode tokens/s per sequence and in total, latency, devices, bound, KV cache
        (--model --hardware --batch --prompt-len --gen-len [--devices --precision --mode]; --help)."""
        predict_infer_main(ctx.args)

    @app.command("project", context_settings=fast, add_help_option=False)
    def project_cmd(ctx: typer.Context) -> None:
        """Time to train: hours, days and device-hours per epoch of pile | owt | sst2 | TOKENS
        (--model --hardware --dataset --batch --seq [--epochs and every predict-train option]; --help)."""
        project_main(ctx.args)

    @app.command("calibrate")
    def calibrate_cmd(
        published: bool = typer.Option(False, "--published", help="refit the shipped profiles from published.csv"),
        hardware: str = typer.Option(None, "--hardware", help="hardware to fit (with --from; optional with --published)"),
        source: str = typer.Option(None, "--from", help="CSV/JSON of result rows or a results SQLite DB"),
        out: str = typer.Option(None, "--out", help="profile to write (with --from; default llmbench-profile-<hw>.json)"),
        dry_run: bool = typer.Option(False, "--dry-run", help="fit and report, write nothing"),
        json_out: bool = typer.Option(False, "--json", help="JSON output"),
    ) -> None:
        """Fit efficiency parameters by least squares on log error; report points and leave-one-out error."""
        from llmbench.perfmodel import calibrate as cal

        if published == bool(source):
            raise ValueError("give exactly one of --published or --from FILE")
        if published:
            reports = cal.calibrate_published(write=not dry_run, only=hardware)
            if hardware and not reports:
                raise ValueError(f"no published points for hardware {hardware!r}")
        else:
            if not hardware:
                raise ValueError("--from needs --hardware")
            rep, _ = cal.calibrate_from(source, hardware)
            path = out or f"llmbench-profile-{hardware}.json"
            if not dry_run:
                cal.write_profile(path, rep, f"llmbench calibrate --from {source}")
                rep["written"] = path
            reports = [rep]
        if json_out:
            return _emit(reports)
        for r in reports:
            loo = "-" if r["loo_mean_abs_error"] is None else f"{r['loo_mean_abs_error']:.1%}"
            fitted = ", ".join(f"{k}={v:.4g}" for k, v in r["params"].items()) or "priors"
            kind = ("held-out error" if r.get("inherited_from") else "fit error" if r["fitted"]
                    else "prior error")
            typer.echo(f"{r['hardware']:<10} points {r['points']:>3}  {r['status']:<44} "
                       f"{kind} {r['fit_mean_abs_error']:.1%}  leave-one-out {loo}  [{fitted}]")
            if r.get("written"):
                typer.echo(f"  wrote {r['written']} (use it with LLMBENCH_PROFILES=<its folder>)")

    @app.command("validate")
    def validate_cmd(json_out: bool = typer.Option(False, "--json", help="JSON output")) -> None:
        """Every numeric row of published.csv predicted vs published; per-system summary; trends pass/fail."""
        from llmbench.perfmodel.validate import run

        res = run()
        if json_out:
            return _emit(res)
        typer.echo(f"{'id':<28} {'system':<20} {'metric':<28} {'published':>10} {'predicted':>11} {'error':>8}")
        for r in res["rows"]:
            pred = "-" if r["predicted"] is None else f"{r['predicted']:,.4g}"
            err = r["problem"] or "-" if r["error"] is None else f"{r['error']:+.1%}"
            flag = "" if r["within_tolerance"] else "  !"
            typer.echo(f"{r['id']:<28} {r['system']:<20} {r['metric']:<28} {r['published']:>10} {pred:>11} {err:>8}{flag}")
        typer.echo(f"\n{'system':<22} {'rows':>4} {'mean':>8} {'median':>8} {'max':>8}   (absolute error)")
        for k, s in res["summary"].items():
            typer.echo(f"{k:<22} {s['rows']:>4} {s['mean_abs_error']:>8.1%} {s['median_abs_error']:>8.1%} "
                       f"{s['max_abs_error']:>8.1%}")
        typer.echo("\nassumptions (settings a row leaves open):")
        for r in res["rows"]:
            if r["assumption"]:
                typer.echo(f"  {r['id']}: {r['assumption']}")
        typer.echo("")
        for t in res["trends"]:
            typer.echo(f"[{'pass' if t['passed'] else 'FAIL'}] {t['id']}: {t['claim']} -- {t['detail']}")
        typer.echo(f"\nnumeric rows within {res['tolerances']['numeric']:.0%}: {res['numeric_within_tolerance']}"
                   f"/{res['numeric_rows']}; trends passed {res['trends_passed']}/{res['trends_total']}; "
                   f"Megatron Table 1 mean abs error {res['megatron_mean_abs_error']:.1%} "
                   f"(tolerance {res['tolerances']['megatron_mean']:.0%})")
