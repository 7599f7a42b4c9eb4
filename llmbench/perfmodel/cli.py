"""`llmbench predict train|infer`, `project`, `calibrate`, `validate`: the analytical model.

    llmbench predict train --model gpt2-xl --hardware a100-40gb --batch 64 --seq 1024 --devices 8
    llmbench predict infer --model llama-3.1-8b --hardware cs3 --batch 1 --prompt-len 128 --gen-len 256
    llmbench project --model gpt3-20b --hardware cs2 --dataset pile --batch 256 --seq 2048
    llmbench calibrate --published --dry-run
    llmbench validate --json
    llmbench plan --model llama-2-13b --hardware a100-80gb --devices 64 --batch 1024 --seq 4096 --top 5

Options and their defaults come from llmbench.point.Workload; nothing heavy loads before a command
runs, and the --json path never imports rich.
"""
from __future__ import annotations

from llmbench._cliutil import add_fields, add_json, emit_json, float_in, int_in, pairs, values
from llmbench.errors import BadInput
from llmbench.perfmodel.plan import OBJECTIVES, layout_text
from llmbench.point import LAYOUT_FIELDS, Layout, Workload
from llmbench.units import fmt_bytes, fmt_frac, fmt_time

TRAIN_FIELDS = ("model", "hardware", "batch", "seq_len", "devices", "precision", "micro_batch",
                "grad_accum", "sparsity") + LAYOUT_FIELDS
INFER_FIELDS = ("model", "hardware", "batch", "seq_len", "gen_len", "devices", "precision", "tp", "pp", "mode")


def register(cli) -> None:
    g = cli.group("predict", "Predict training or inference speed on any catalog hardware (analytical model).")
    p = g.command("train", predict_train_cmd)
    add_fields(p, Workload, TRAIN_FIELDS, required=("model", "hardware", "batch", "seq_len"))
    add_json(p)
    p = g.command("infer", predict_infer_cmd)
    add_fields(p, Workload, INFER_FIELDS, required=("model", "hardware"),
               defaults={"seq_len": 128, "gen_len": 128},
               help={"batch": "concurrent requests", "seq_len": "prompt tokens per request"},
               aliases={"seq_len": ["--prompt-len"]})
    add_engine_options(p)
    add_json(p)
    p = cli.command("project", project_cmd)
    add_fields(p, Workload, TRAIN_FIELDS, required=("model", "hardware", "batch", "seq_len"))
    p.add_argument("--dataset", required=True, help="pile | owt | sst2 | a number of tokens")
    p.add_argument("--epochs", type=float_in(low=1e-9, name="epochs"), default=1.0, help="epochs (default 1)")
    add_json(p)
    p = cli.command("calibrate", calibrate_cmd)
    p.add_argument("--published", action="store_true", help="refit the profiles from published.csv")
    p.add_argument("--hardware", help="hardware to fit (with --from; optional with --published)")
    p.add_argument("--from", dest="source", help="CSV/JSON of result rows or a results SQLite DB")
    p.add_argument("--out", help="profile to write (with --from; default llmbench-profile-<hw>.json)")
    p.add_argument("--dry-run", action="store_true", help="fit and report, write nothing")
    add_json(p)
    add_json(cli.command("validate", validate_cmd))
    p = cli.command("plan", plan_cmd)
    add_fields(p, Workload, TRAIN_FIELDS, required=("model", "hardware", "devices", "batch", "seq_len"),
               help={"devices": "devices available (objective devices / energy / cost: at most this many)"})
    p.add_argument("--objective", choices=OBJECTIVES, default="time",
                   help="time: fastest step; devices: fewest devices, then fastest; energy: fewest J per token "
                        "(power_w); cost: fewest USD per token (price_per_device_hour_usd) (default time)")
    p.add_argument("--top", type=int_in(1, 1000, "top"), default=10, help="layouts shown (default 10)")
    add_json(p)


def add_engine_options(p) -> None:
    """--engine and --kv-precision of a serving prediction (perfmodel/serving.py, engines.toml)."""
    from llmbench.perfmodel.serving import KV_PRECISIONS, engine_names

    p.add_argument("--engine", choices=engine_names(), default=None,
                   help="serving engine (default: TensorRT-LLM on NVIDIA, vLLM on AMD, JetStream on TPU, the "
                        "vendor's own stack ('native') elsewhere; docs/predict.md 'Serving')")
    p.add_argument("--kv-precision", choices=KV_PRECISIONS, default=None,
                   help="KV-cache precision (default: fp8 with fp8/fp4 weights where the engine pairs them, "
                        "else the activations' 16-bit type)")


def workload(a, suite: str) -> Workload:
    """The Workload the parsed options describe."""
    names = TRAIN_FIELDS if suite == "train" else INFER_FIELDS
    w = {k: v for k, v in values(a, names).items() if k not in LAYOUT_FIELDS}
    lay = {k: getattr(a, k) for k in LAYOUT_FIELDS if hasattr(a, k)}
    return Workload(suite=suite, **w, layout=Layout(**lay))


def _train(a):
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.plan import refusal
    from llmbench.perfmodel.predict import predict

    w = workload(a, "train")
    pred = predict(w)
    if not pred.fits:  # every knob given and it does not fit: say on how few devices it would
        hw = get_hardware(w.hardware)
        raise BadInput(refusal(pred.workload.spec(), hw, w.with_(precision=pred.workload.precision,
                                                                  devices=pred.devices), None, 1))
    return pred


def memory_text(d: dict) -> str:
    keys = (("weights", "weights_bytes"), ("grads", "grads_bytes"), ("optimizer", "optimizer_bytes"),
            ("activations", "activations_bytes"), ("KV cache", "kv_cache_bytes"))
    return ", ".join(f"{name} {fmt_bytes(d[k])}" for name, k in keys if d.get(k))


def lower_tiers(d: dict) -> str:
    """'; host_dram 9.4 GiB': what the tiers below the device hold (offload, a weight store)."""
    rest = list(d.get("tier_bytes", {}).items())[1:]
    return "".join(f"; {name} {fmt_bytes(v)}" for name, v in rest if v)


def predict_train_cmd(a) -> None:
    """Step time, throughput, TFLOP/s, MFU, bound and memory of one training configuration."""
    pred = _train(a)
    if a.json:
        return emit_json(pred.to_dict())
    d, w = pred.metrics(), pred.workload
    nd = 1 if d["achieved_tflops"] >= 1 else 4
    rows = [("prediction", f"train {w.model} on {w.devices} x {w.hardware}, batch {w.batch} x {w.seq_len}, "
                           f"{w.precision}"),
            ("layout", layout_text(w)), ("step time", fmt_time(d["step_time_s"])),
            ("tokens/s", f"{d['tokens_per_s']:,.0f}"), ("samples/s", f"{d['samples_per_s']:,.2f}"),
            ("TFLOP/s per device", f"{d['achieved_tflops']:,.{nd}f} model, {d['executed_tflops']:,.{nd}f} executed"),
            ("MFU", fmt_frac(d["mfu"])), ("bound", d["bound"]),
            ("memory per device", f"{fmt_bytes(d['peak_mem_bytes'])} ({memory_text(d)}){lower_tiers(d)}")]
    rows += [(f"  {k}", fmt_time(v)) for k, v in d["breakdown_s"].items()]
    pairs(rows)


def _infer(a):
    """The InferPrediction of the parsed options, with --engine and --kv-precision."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.infer import predict_infer
    from llmbench.point import precision_for

    w = workload(a, "infer")
    hw = get_hardware(w.hardware)
    w = w.with_(precision=w.precision or precision_for(hw))
    return predict_infer(w.spec(), hw, w, engine=a.engine, kv_precision=a.kv_precision)


def predict_infer_cmd(a) -> None:
    """TTFT, decode tokens/s per sequence and in total, latency, devices, bound, KV cache; the
    engine assumed; a batch whose KV cache does not fit is served at the concurrency that does."""
    pred = _infer(a)
    if not pred.fits:
        raise BadInput(f"{pred.workload.model}'s weights ({fmt_bytes(pred.weights_bytes)} per device) leave no room "
                       f"for a KV cache on {pred.devices} x {pred.workload.hardware}; drop --devices to get the "
                       "fewest that hold it")
    if a.json:
        return emit_json(pred.to_dict())
    d, w = pred.metrics(), pred.workload
    rows = [("prediction", f"infer {w.model} on {w.devices} x {w.hardware}, batch {w.batch}, "
                           f"prompt {w.seq_len}, gen {w.gen_len}, {w.precision}"),
            ("engine", f"{d['engine']} (KV cache {d['kv_precision']}, {d['kv_capacity_tokens']:,} tokens per replica)"),
            ("layout", layout_text(w)), ("TTFT", fmt_time(d["time_to_first_token_s"])),
            ("decode tokens/s per seq", f"{d['decode_tokens_per_s_per_seq']:,.1f}"),
            ("tokens/s (batch)", f"{d['tokens_per_s']:,.1f}"), ("latency", fmt_time(d["latency_s_p50"])),
            ("bound", d["bound"]), ("memory per device", f"{fmt_bytes(d['peak_mem_bytes'])} ({memory_text(d)})"
                                                         f"{lower_tiers(d)}")]
    if d["concurrency"] < w.batch:
        rows.append(("concurrency", f"{d['concurrency']} at once: {d['note']}"))
    if d["max_batch_x_context"] is not None:
        rows.append(("max batch x context", f"{d['max_batch_x_context']:,.0f} tokens"))
    pairs(rows)


def project_cmd(a) -> None:
    """Time to train: hours, days and device-hours per epoch of pile | owt | sst2 | TOKENS."""
    from llmbench.perfmodel.project import get_dataset, project

    ds = get_dataset(a.dataset)
    pred = _train(a)
    out = project(ds, pred, epochs=a.epochs)
    if a.json:
        return emit_json({"workload": pred.workload.to_dict(), **out})
    size = f"{ds.tokens:,.0f} tokens" if ds.tokens else f"{ds.samples:,.0f} samples"
    pairs([("data set", f"{ds.name} ({size}) x {a.epochs:g} epoch(s)"), ("source", ds.source),
           ("layout", layout_text(pred.workload)),
           ("throughput", f"{pred.tokens_per_s:,.0f} tokens/s, {pred.samples_per_s:,.1f} samples/s "
                          f"({pred.mode}, bound {pred.bound})"),
           ("time", f"{out['hours']:,.2f} h = {out['days']:,.2f} days ({out['seconds']:,.2f} s)"),
           ("device-hours", f"{out['device_hours']:,.1f}")])


def calibrate_cmd(a) -> None:
    """Fit efficiency parameters by least squares on log error; report points and leave-one-out error."""
    from llmbench.perfmodel import calibrate as cal

    if a.published == bool(a.source):
        raise ValueError("give exactly one of --published or --from FILE")
    if a.published:
        reports = cal.calibrate_published(write=not a.dry_run, only=a.hardware)
        if a.hardware and not reports:
            raise ValueError(f"no published points for hardware {a.hardware!r}")
    else:
        if not a.hardware:
            raise ValueError("--from needs --hardware")
        rep, _ = cal.calibrate_from(a.source, a.hardware)
        path = a.out or f"llmbench-profile-{a.hardware}.json"
        if not a.dry_run:
            cal.write_profile(path, rep, f"llmbench calibrate --from {a.source}")
            rep["written"] = path
        reports = [rep]
    if a.json:
        return emit_json(reports)
    for r in reports:
        loo = "-" if r["loo_mean_abs_error"] is None else f"{r['loo_mean_abs_error']:.1%}"
        fitted = ", ".join(f"{k}={v:.4g}" for k, v in r["params"].items()) or "priors"
        kind = ("held-out error" if r.get("inherited_from") else "fit error" if r["fitted"] else "prior error")
        held = "leave-one-source-out" if r["status"].startswith("pooled") else "leave-one-out"
        print(f"{r['hardware']:<10} points {r['points']:>3}  {r['status']:<44} "
              f"{kind} {r['fit_mean_abs_error']:.1%}  {held} {loo}  [{fitted}]")
        if r.get("written"):
            print(f"  wrote {r['written']} (use it with LLMBENCH_PROFILES=<its folder>)")


def validate_cmd(a) -> None:
    """Every numeric row of published_v2.csv: predicted by the pooled fit on all rows (in-sample)
    and on all rows but its source's (leave-one-source-out), per hardware and overall; trends."""
    from llmbench.perfmodel.validate import run

    res = run()
    if a.json:
        return emit_json(res)
    pct = lambda v: "-" if v is None else f"{v:+.0%}"  # noqa: E731
    print(f"{'id':<42} {'system':<12} {'metric':<22} {'published':>11} {'in-sample':>10} {'error':>6} "
          f"{'held out':>10} {'error':>6}")
    for r in res["rows"]:
        f = lambda v: "-" if v is None else f"{v:,.4g}"  # noqa: E731
        print(f"{r['id'][:42]:<42} {r['system'][:12]:<12} {r['metric'][:22]:<22} {r['published'][:11]:>11} "
              f"{f(r.get('in_sample_predicted')):>10} {pct(r.get('in_sample_error')):>6} "
              f"{f(r.get('loso_predicted')):>10} {pct(r.get('loso_error')):>6}"
              + (f"  refused: {r['problem'][:90]}" if r["problem"] else ""))
    print(f"\n{'system':<22} {'rows':>4} {'sources':>7}   median |error|: {'in-sample':>9} {'held out':>9}   "
          "share > 50%: in-sample, held out")
    rows = list(res["by_hardware"].items()) + [("overall", {**res, "rows": res["in_sample"]["rows"]})]
    for k, s in rows:
        i_, o_ = s["in_sample"], s["leave_one_source_out"]
        m = lambda d, key: "-" if d[key] is None else f"{d[key]:.1%}"  # noqa: E731
        print(f"{k[:22]:<22} {s['rows']:>4} {s['sources']:>7}   {'':>15}{m(i_, 'median_abs_error'):>9} "
              f"{m(o_, 'median_abs_error'):>9}   {'':>13}{m(i_, 'share_beyond_50pct'):>7}, "
              f"{m(o_, 'share_beyond_50pct'):>7}")
    print(f"\nrefused ({len(res['refused'])}): {', '.join(res['refused']) or 'none'}")
    print("assumptions (settings a row leaves open):")
    for r in res["rows"]:
        if r["assumption"]:
            print(f"  {r['id']}: {r['assumption']}")
    for t in res["trends"]:
        print(f"[{'pass' if t['passed'] else 'FAIL'}] {t['id']}: {t['claim']} -- {t['detail']}")
    o = res["leave_one_source_out"]
    print(f"\nleave-one-source-out: median |error| {o['median_abs_error']:.1%}, beyond 50% "
          f"{o['share_beyond_50pct']:.1%} of {o['rows']} rows ({res['sources']} sources); in-sample median "
          f"{res['in_sample']['median_abs_error']:.1%}; trends passed {res['trends_passed']}/{res['trends_total']}")


def plan_cmd(a) -> None:
    """The top layouts of a training workload (tp, pp, ZeRO, recompute, micro-batch, offload, mode),
    searched among those that fit and ranked by --objective; knobs you give constrain the search."""
    from llmbench.perfmodel.train import plan_report

    res = plan_report(workload(a, "train"), a.objective, a.top)
    if a.json:
        return emit_json(res)
    w = res["workload"]
    print(f"plan: train {w['model']} on {w['devices']} x {w['hardware']}, batch {w['batch']} x {w['seq_len']}, "
          f"{w['precision']}; {res['fitting']:,} of {res['searched']:,} layouts fit; ranked by {res['objective']} "
          "(within 1% the simpler layout first)")
    if res["note"]:
        print(f"note: {res['note']}")
    cols = ["#", "layout", "step", "tokens/s", "MFU", "memory/device: weights / grads / optimizer / activations",
            "bound"]
    extra = {"energy": ("J/token", "energy_j_per_token", 1.0), "cost": ("USD/Mtoken", "cost_usd_per_token", 1e6)}
    if res["objective"] in extra:
        cols.append(extra[res["objective"]][0])
    rows = []
    for i, p in enumerate(res["layouts"], 1):
        d = p.metrics()
        mem = " / ".join(fmt_bytes(d[k]) for k in ("weights_bytes", "grads_bytes", "optimizer_bytes",
                                                   "activations_bytes"))
        row = [str(i), layout_text(p.workload), fmt_time(d["step_time_s"]), f"{d['tokens_per_s']:,.0f}",
               fmt_frac(d["mfu"]), f"{fmt_bytes(d['peak_mem_bytes'])} ({mem}){lower_tiers(d)}", d["bound"]]
        if res["objective"] in extra:
            _, key, scale = extra[res["objective"]]
            row.append("unknown" if d[key] is None else f"{d[key] * scale:.3g}")
        rows.append(row)
    text_table(cols, rows)
    print(f"memory: {res['memory_rule']}")


def text_table(cols, rows) -> None:
    """Columns aligned with spaces (plain text: fast, no rich)."""
    widths = [max(len(str(c)), *(len(r[j]) for r in rows)) for j, c in enumerate(cols)]
    for r in [cols] + rows:
        print("  ".join(str(v).ljust(widths[j]) for j, v in enumerate(r)).rstrip())
