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

from llmbench._cliutil import add_db, add_fields, add_json, emit_json, float_in, int_in, pairs, values
from llmbench.errors import BadInput
from llmbench.perfmodel.plan import OBJECTIVES, layout_text
from llmbench.perfmodel.provenance import band_text, calibration_text
from llmbench.point import LAYOUT_FIELDS, Layout, Workload
from llmbench.units import fmt_bytes, fmt_frac, fmt_time

TRAIN_FIELDS = ("model", "hardware", "batch", "seq_len", "devices", "precision", "micro_batch",
                "grad_accum", "sparsity", "rope_scaling") + LAYOUT_FIELDS
INFER_FIELDS = ("model", "hardware", "batch", "seq_len", "gen_len", "devices", "precision", "rope_scaling", "tp",
                "pp", "mode")


def register(cli) -> None:
    g = cli.group("predict", "Predict training or inference speed on any catalog hardware (analytical model).")
    p = g.command("train", predict_train_cmd)
    add_fields(p, Workload, TRAIN_FIELDS, required=("model", "hardware", "batch", "seq_len"))
    add_calibration(p, memory=True)
    add_json(p)
    add_db(p, DB_HELP)
    p = g.command("infer", predict_infer_cmd)
    add_fields(p, Workload, INFER_FIELDS, required=("model", "hardware"),
               defaults={"seq_len": 128, "gen_len": 128},
               help={"batch": "concurrent requests", "seq_len": "prompt tokens per request"},
               aliases={"seq_len": ["--prompt-len"]})
    add_calibration(p, memory=False)
    add_engine_options(p)
    add_json(p)
    add_db(p, DB_HELP)
    p = cli.command("project", project_cmd)
    add_fields(p, Workload, TRAIN_FIELDS, required=("model", "hardware", "batch", "seq_len"))
    add_calibration(p, memory=True)
    p.add_argument("--dataset", required=True, help="pile | owt | sst2 | a number of tokens")
    p.add_argument("--epochs", type=float_in(low=1e-9, name="epochs"), default=1.0, help="epochs (default 1)")
    add_json(p)
    p = cli.command("calibrate", calibrate_cmd)
    p.add_argument("--published", action="store_true", help="refit the profiles from published.csv")
    p.add_argument("--hardware", help="hardware to fit (with --from; optional with --published)")
    p.add_argument("--from", dest="source", help="CSV/JSON of result rows or a results SQLite DB")
    p.add_argument("--out", help="profile to write (with --from; default llmbench-profile-<hw>.json)")
    p.add_argument("--dry-run", action="store_true", help="fit and report, write nothing")
    p.add_argument("--write-shipped", action="store_true",
                   help="with --published: rewrite the shipped profiles and their leave-one-source-out "
                        "residuals (llmbench/perfmodel/profiles/; a source checkout only): `make profiles`")
    add_json(p)
    add_json(cli.command("validate", validate_cmd))
    p = cli.command("plan", plan_cmd)
    add_fields(p, Workload, TRAIN_FIELDS, required=("model", "hardware", "devices", "batch", "seq_len"),
               help={"devices": "devices available (objective devices / energy / cost: at most this many)"})
    p.add_argument("--objective", choices=OBJECTIVES, default="time",
                   help="time: fastest step; devices: fewest devices, then fastest; energy: fewest J per token "
                        "(power_w); cost: fewest USD per token (price_per_device_hour_usd) (default time)")
    p.add_argument("--top", type=int_in(1, 1000, "top"), default=10, help="layouts shown (default 10)")
    add_calibration(p, memory=True)
    add_json(p)
    add_db(p, DB_HELP + " (the best layout)")


DB_HELP = "also record the prediction in this results database (SQLite; llmbench report --db draws it)"


def _record(a, pred, command: str) -> None:
    """--db: the prediction as a result row (source predicted), as `study predict` records its own."""
    if not getattr(a, "db", None):
        return
    from llmbench.results.safe import check_writable, record_or_save

    check_writable(a.db)
    metrics = {k: (v.item() if hasattr(v, "item") else v) for k, v in pred.to_dict().items() if k != "workload"}
    record_or_save(a.db, pred.workload, source="predicted", metrics=metrics,
                   environment={"command": command, "tool": "llmbench perfmodel"})


def add_calibration(p, memory: bool) -> None:
    """--profile FILE (a profile calibrate wrote, any name) and, for training, --memory-fraction."""
    p.add_argument("--profile", metavar="FILE",
                   help="a calibrated profile (llmbench calibrate --out FILE) instead of the one found in "
                        "$LLMBENCH_PROFILES, $LLMBENCH_HOME/profiles, then the shipped ones")
    if memory:
        from llmbench.perfmodel.frameworks import CHOICES, DEFAULT

        p.add_argument("--framework", choices=CHOICES, default=DEFAULT,
                       help=f"the training stack's mechanisms (default {DEFAULT}: a fused attention, every "
                            "current framework; megatron-2021: unfused, as Megatron-LM in arXiv:2104.04473; "
                            "megatron / nemo: Megatron-Core's tensor-parallel communication overlapped with "
                            "the GEMMs, --tp-comm-overlap)")
        p.add_argument("--memory-fraction", type=float_in(0.05, 1.0, "memory-fraction"), default=None,
                       help="share of device memory a layout may fill (default: GPUs/HPUs/TPUs capacity - "
                            "max(2 GiB, 5%%) for CUDA context, NCCL buffers and fragmentation; wafer, RDU, "
                            "IPU: all of it, compiler-placed)")


def run_params(a, hw) -> dict | None:
    """The parameters --profile and --memory-fraction ask for (None: the profile found by name)."""
    from llmbench.perfmodel.params import read_profile, resolve_params

    over = {}
    if getattr(a, "profile", None):
        try:
            prof = read_profile(a.profile)
        except ValueError as e:
            raise BadInput(str(e)) from None
        if prof.get("hardware") not in (None, hw.name):
            raise BadInput(f"--profile {a.profile} calibrates {prof['hardware']}, not {hw.name}")
        if not prof.get("params"):
            raise BadInput(f"--profile {a.profile} sets no parameters (no 'params' object): not a profile "
                           "llmbench calibrate wrote")
        over.update(prof.get("params", {}))
    if getattr(a, "memory_fraction", None):
        over["memory_fraction"] = a.memory_fraction
    from llmbench.perfmodel.frameworks import FRAMEWORKS

    over.update(FRAMEWORKS.get(getattr(a, "framework", None) or "", {}))
    if not over:
        return None
    return resolve_params(hw, override=over, use_profile=not getattr(a, "profile", None))


def hardware_of(a, pred):
    """The Hardware a prediction ran on: as the user named it (a catalog name or a TOML file's path;
    the prediction's workload holds the file's `name`, which the catalog does not know)."""
    from llmbench.hardware import get_hardware

    return get_hardware(getattr(a, "hardware", None) or pred.workload.hardware)


def calibration_of(a, pred) -> dict:
    """The calibration block (provenance.py) of one prediction."""
    from llmbench.perfmodel.provenance import calibration

    hw = hardware_of(a, pred)
    return calibration(hw.name, hw.kind, pred.workload.suite, pred.tokens_per_s, getattr(a, "profile", None))


MFU_CONVENTION = ("model FLOPs (3 x forward: the dense 6N per token plus attention over the full T x T "
                  "square, Megatron arXiv:2104.04473 Eq. 3; recomputation not counted) / (step time x devices "
                  "x the precision's dense peak); mfu_causal counts half the square (causal, as FlashAttention "
                  "executes it)")


def mfu_causal(pred) -> float | None:
    """MFU with only the causal half of the attention square counted (models.counting)."""
    from llmbench.models.counting import training_flops

    if pred.mfu is None:
        return None
    w = pred.workload
    spec = w.spec()
    full = training_flops(spec, 1, w.seq_len)["model"]
    return pred.mfu * training_flops(spec, 1, w.seq_len, causal_discount=True)["model"] / full


def memory_share(a, pred) -> str:
    """'66.0 GiB, 82.5% of 80.0 GiB (under the reserve: capacity - max(2 GiB, 5%))'."""
    from llmbench.perfmodel.memory import hierarchy
    from llmbench.perfmodel.reserve import default_rule

    hw = hardware_of(a, pred)
    cap = float(hierarchy(hw).resident.capacity_bytes)
    return f"{pred.peak_mem_bytes / cap:.1%} of {fmt_bytes(cap)}; reserve: {default_rule(hw.kind)}"


def with_provenance(a, pred) -> dict:
    """pred.to_dict() with its calibration block and, for training, the MFU convention."""
    d = {**pred.to_dict(), "calibration": calibration_of(a, pred)}
    if pred.workload.suite == "infer":
        from llmbench.perfmodel.provenance import engine_calibration

        d["engine_calibration"] = engine_calibration(d["engine"])
    else:
        d.update(mfu_causal=mfu_causal(pred), mfu_convention=MFU_CONVENTION, framework=framework_text(a))
    return d


def framework_text(a) -> str:
    from llmbench.perfmodel.frameworks import DEFAULT, DESCRIBE

    fw = getattr(a, "framework", None) or DEFAULT
    return f"{fw}: {DESCRIBE[fw]}"


def add_engine_options(p) -> None:
    """--engine and --kv-precision of a serving prediction (perfmodel/serving.py, engines.toml). The
    engine's name is checked where it is used (serving.engine names the choices): listing them here
    would read engines.toml for every command of this area."""
    from llmbench.footprint import KV_PRECISIONS

    p.add_argument("--engine", default=None,
                   help="serving engine: trtllm, vllm (on AMD GPUs: vllm-rocm, AMD's ROCm build; "
                        "vllm-rocm-upstream, one built from the repository), sglang, tgi, "
                        "jetstream, gptfast, native, ideal "
                        "(default: TensorRT-LLM on NVIDIA, vLLM on AMD, JetStream on TPU, the vendor's own "
                        "stack ('native') elsewhere; docs/predict.md 'Serving')")
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
    hw = get_hardware(w.hardware) if w.hardware else None
    params = run_params(a, hw) if hw else None
    pred = predict(w, params)
    if not pred.fits:  # every knob given and it does not fit: say on how few devices it would
        raise BadInput(refusal(pred.workload.spec(), hw, w.with_(precision=pred.workload.precision,
                                                                  devices=pred.devices), params, 1))
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
    _record(a, pred, "llmbench predict train")
    if a.json:
        return emit_json(with_provenance(a, pred))
    d, w, cal = pred.metrics(), pred.workload, calibration_of(a, pred)
    nd = 1 if d["achieved_tflops"] >= 1 else 4
    rows = [("prediction", f"train {w.model} on {w.devices} x {w.hardware}, batch {w.batch} x {w.seq_len}, "
                           f"{w.precision}"),
            ("layout", layout_text(w)), ("step time", fmt_time(d["step_time_s"])),
            ("tokens/s", f"{d['tokens_per_s']:,.0f} {band_text(cal)}"), ("samples/s", f"{d['samples_per_s']:,.2f}"),
            ("TFLOP/s per device", f"{d['achieved_tflops']:,.{nd}f} model, {d['executed_tflops']:,.{nd}f} executed"),
            ("MFU", f"{fmt_frac(d['mfu'])} (full T x T attention counted; causal half: {fmt_frac(mfu_causal(pred))})"),
            ("bound", d["bound"]),
            ("memory per device", f"{fmt_bytes(d['peak_mem_bytes'])} ({memory_text(d)}){lower_tiers(d)}"),
            ("", memory_share(a, pred)), ("calibration", calibration_text(cal)),
            ("framework", framework_text(a))]
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
    return predict_infer(w.spec(), hw, w, params=run_params(a, hw), engine=a.engine, kv_precision=a.kv_precision)


def link_text(w) -> str:
    """What moves a token's activations between a replica's devices."""
    tp, pp = w.layout.tp or 1, w.layout.pp or 1
    return " and ".join(x for x in (f"2 all-reduces a layer over tp {tp}" if tp > 1 else "",
                                     f"{pp - 1} pipeline hop{'s' * (pp > 2)}" if pp > 1 else "") if x)


def predict_infer_cmd(a) -> None:
    """TTFT, decode tokens/s per sequence and in total, latency, devices, bound, KV cache; the
    engine assumed; a batch whose KV cache does not fit is served at the concurrency that does."""
    pred = _infer(a)
    if not pred.fits:
        raise BadInput(f"{pred.workload.model}'s weights ({fmt_bytes(pred.weights_bytes)} per device) leave no room "
                       f"for a KV cache on {pred.devices} x {pred.workload.hardware}; drop --devices to get the "
                       "fewest that hold it")
    _record(a, pred, "llmbench predict infer")
    if a.json:
        return emit_json(with_provenance(a, pred))
    from llmbench.perfmodel.provenance import engine_calibration, engine_text

    d, w, cal = pred.metrics(), pred.workload, calibration_of(a, pred)
    rows = [("prediction", f"infer {w.model} on {w.devices} x {w.hardware}, batch {w.batch}, "
                           f"prompt {w.seq_len}, gen {w.gen_len}, {w.precision}"),
            ("engine", f"{d['engine']} ({kv_text(d)}); {engine_text(engine_calibration(d['engine']))}"),
            ("layout", layout_text(w)), ("TTFT", fmt_time(d["time_to_first_token_s"])),
            ("decode tokens/s per seq", f"{d['decode_tokens_per_s_per_seq']:,.1f}"),
            ("tokens/s (batch)", f"{d['tokens_per_s']:,.1f} {band_text(cal)}"),
            ("latency", fmt_time(d["latency_s_p50"])),
            ("bound", d["bound"]), ("memory per device", f"{fmt_bytes(d['peak_mem_bytes'])} ({memory_text(d)})"
                                                         f"{lower_tiers(d)}")]
    if d["link_bytes_per_token"]:
        rows.append(("between devices", f"{fmt_bytes(d['link_bytes_per_token'])} per token ({link_text(w)}; "
                                        f"{fmt_bytes(d['weights_bytes'])} of weights per device)"))
    if d["concurrency"] < w.batch:
        rows.append(("concurrency", f"{d['concurrency']} at once: {d['note']}"))
    if d["max_batch_x_context"] is not None and not no_kv(d):
        rows.append(("max batch x context", f"{d['max_batch_x_context']:,.0f} tokens"))
    pairs(rows + [("calibration", calibration_text(cal))])


def no_kv(d: dict) -> bool:
    """The model keeps no KV cache (an encoder): its capacity is footprint.NO_KV_BOUND."""
    from llmbench.footprint import NO_KV_BOUND

    return d["kv_capacity_tokens"] >= NO_KV_BOUND


def kv_text(d: dict) -> str:
    """The engine line's KV cache: its precision and the tokens a replica holds, or none kept."""
    if no_kv(d):
        return "no KV cache: the model keeps none"
    return f"KV cache {d['kv_precision']}, {d['kv_capacity_tokens']:,} tokens per replica"


def project_cmd(a) -> None:
    """Time to train: hours, days and device-hours per epoch of pile | owt | sst2 | TOKENS."""
    from llmbench.perfmodel.project import get_dataset, project

    ds = get_dataset(a.dataset)
    pred = _train(a)
    out = project(ds, pred, epochs=a.epochs)
    cal = calibration_of(a, pred)
    if cal["tokens_per_s_low"]:  # the band of the throughput, as hours (slow end: most hours)
        out.update(hours_low=out["hours"] * pred.tokens_per_s / cal["tokens_per_s_high"],
                   hours_high=out["hours"] * pred.tokens_per_s / cal["tokens_per_s_low"])
    out["prediction"] = with_provenance(a, pred)
    if a.json:
        return emit_json({"workload": pred.workload.to_dict(), **out, "calibration": cal})
    size = f"{ds.tokens:,.0f} tokens" if ds.tokens else f"{ds.samples:,.0f} samples"
    pairs([("data set", f"{ds.name} ({size}) x {a.epochs:g} epoch(s)"), ("source", ds.source),
           ("layout", layout_text(pred.workload)),
           ("throughput", f"{pred.tokens_per_s:,.0f} tokens/s, {pred.samples_per_s:,.1f} samples/s "
                          f"({pred.mode}, bound {pred.bound})"),
           ("time", f"{out['hours']:,.2f} h = {out['days']:,.2f} days ({out['seconds']:,.2f} s)"
                    + (f" ({_span_h(out['hours_low'], out['hours_high'])}, {band_text(cal).split(', ', 1)[1]}"
                       if "hours_low" in out else "")),
           ("device-hours", f"{out['device_hours']:,.1f}"), ("calibration", calibration_text(cal))])


def _span_h(low: float, high: float) -> str:
    """A band of hours, in hours from one hour up ('3,561-7,122 h'), else as times ('12.3 s-19.8 s')."""
    if low >= 1.0:
        return f"{low:,.0f}-{high:,.0f} h"
    return f"{fmt_time(low * 3600)}-{fmt_time(high * 3600)}"


def calibrate_cmd(a) -> None:
    """Fit efficiency parameters by least squares on log error; report points and leave-one-out error."""
    from llmbench.perfmodel import calibrate as cal

    if a.published == bool(a.source):
        raise ValueError("give exactly one of --published or --from FILE")
    if a.out and not a.source:
        raise ValueError("--out names the profile a --from fit writes; --published writes one profile per "
                         "hardware into the profile folder")
    if a.write_shipped and (not a.published or a.dry_run or a.hardware):
        raise ValueError("--write-shipped rewrites every shipped profile: use it with --published alone")
    if a.published:
        reports = cal.calibrate_published(write=not a.dry_run, only=a.hardware, ship=a.write_shipped)
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
        if "residuals" in r:
            print(f"wrote {r['residuals']} (every row's leave-one-source-out error: the bands predict prints)")
            continue
        if "frameworks" in r:
            print(f"wrote {r['frameworks']} (the fitted framework terms: --framework)")
            continue
        if "engines" in r:
            for name, e in r["engines"].items():
                vals = ", ".join(f"{k}={v:.4g}" for k, v in e["params"].items())
                print(f"engine {name:<9} rows {e['rows']:>3}  [{vals}]")
            if r.get("written"):
                print(f"  wrote {r['written']} (the serving engines as fitted: predict, serve and plan run them)")
            continue
        loo = "-" if r["loo_mean_abs_error"] is None else f"{r['loo_mean_abs_error']:.1%}"
        fitted = ", ".join(f"{k}={v:.4g}" for k, v in r["params"].items()) or "priors"
        kind = ("held-out error" if r.get("inherited_from") else "fit error" if r["fitted"] else "prior error")
        held = "leave-one-source-out" if r["status"].startswith("pooled") else "leave-one-out"
        print(f"{r['hardware']:<10} points {r['points']:>3}  {r['status']:<44} "
              f"{kind} {r['fit_mean_abs_error']:.1%}  {held} {loo}  [{fitted}]")
        if r.get("skipped"):
            first = "; ".join(f"{x['row']}: {x['reason']}" for x in r["skipped"][:3])
            more = f" (+{len(r['skipped']) - 3} more, --json lists all)" if len(r["skipped"]) > 3 else ""
            print(f"  skipped {len(r['skipped'])} rows: {first}{more}")
        if r.get("written"):
            hint = "" if a.published else (f" (use it with --profile {r['written']}, or "
                                            "LLMBENCH_PROFILES=<that file or its folder>)")
            print(f"  wrote {r['written']}{hint}")


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
              + (f"  {'' if r.get('skipped') else 'refused: '}{r['problem'][:90]}" if r["problem"] else ""))
    print(f"\n{'system':<22} {'rows':>4} {'sources':>7}   median |error|: {'in-sample':>9} {'held out':>9}   "
          "share > 50%: in-sample, held out")
    rows = list(res["by_hardware"].items()) + [("overall", {**res, "rows": res["in_sample"]["rows"]})]
    for k, s in rows:
        i_, o_ = s["in_sample"], s["leave_one_source_out"]
        m = lambda d, key: "-" if d[key] is None else f"{d[key]:.1%}"  # noqa: E731
        print(f"{k[:22]:<22} {s['rows']:>4} {s['sources']:>7}   {'':>15}{m(i_, 'median_abs_error'):>9} "
              f"{m(o_, 'median_abs_error'):>9}   {'':>13}{m(i_, 'share_beyond_50pct'):>7}, "
              f"{m(o_, 'share_beyond_50pct'):>7}")
    for line in serving_lines(res):
        print(line)
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


def serving_lines(res: dict) -> list[str]:
    """Leave-one-source-out median |error| by kind (training, serving) and per serving engine."""
    o = res.get("leave_one_source_out", {})
    out = ["\nheld out, by kind and serving engine:"]
    for group in ("by_kind", "by_engine"):
        for k, v in o.get(group, {}).items():
            med = "-" if v["median_abs_error"] is None else f"{v['median_abs_error']:.1%}"
            out.append(f"  {k:<12} {v['rows']:>4} rows   median |error| {med:>6}")
    return out


def plan_cmd(a) -> None:
    """The top layouts of a training workload (tp, pp, ZeRO, recompute, micro-batch, offload, mode),
    searched among those that fit and ranked by --objective; knobs you give constrain the search."""
    from llmbench.perfmodel.train import plan_report

    from llmbench.hardware import get_hardware

    w0 = workload(a, "train")
    res = plan_report(w0, a.objective, a.top, params=run_params(a, get_hardware(w0.hardware)) if w0.hardware else None)
    if res["layouts"]:
        _record(a, res["layouts"][0], f"llmbench plan --objective {a.objective}")
    cal = calibration_of(a, res["layouts"][0])
    if a.json:
        return emit_json({**res, "calibration": cal, "framework": framework_text(a), "mfu_convention": MFU_CONVENTION})
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
    print(f"memory: {res['memory_rule']}; #1 {memory_share(a, res['layouts'][0])}")
    print(f"#1 tokens/s {res['layouts'][0].tokens_per_s:,.0f} {band_text(cal)}")
    print(f"calibration: {calibration_text(cal)}")
    print(f"framework: {framework_text(a)}")
    print("MFU: full T x T attention counted (--json: mfu_causal, mfu_convention)")


def text_table(cols, rows) -> None:
    """Columns aligned with spaces (plain text: fast, no rich)."""
    widths = [max(len(str(c)), *(len(r[j]) for r in rows)) for j, c in enumerate(cols)]
    for r in [cols] + rows:
        print("  ".join(str(v).ljust(widths[j]) for j, v in enumerate(r)).rstrip())
