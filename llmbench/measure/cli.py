"""`llmbench measure ceilings|block|train|infer|genslm|serve` (docs/measure.md, docs/serve.md).

    llmbench measure ceilings --json
    llmbench measure block --model gpt2-xl --batch 1 --seq 1024
    llmbench measure train --model gpt2-small --batch 8 --micro-batch 4 --seq 256
    torchrun --nproc-per-node 2 -m llmbench measure train --model gpt2-small --batch 8 --baseline
    torchrun --nproc-per-node 2 -m llmbench measure train --model gpt2-small --layout fsdp --recompute full
    torchrun --nproc-per-node 2 -m llmbench measure train --model gpt2-small --n-layers 2 --seq 64 --layout auto
    llmbench measure serve --model gpt2-small --n-layers 2 --rate 4 --requests 200 --json

`--batch` is the global batch (all processes, all micro-steps), as everywhere in llmbench;
`--micro-batch` the sequences one process runs per micro-step. No torch at import time. Each
result is printed (a table, or --json: workload, status, metrics, info, error, environment, key)
and recorded in the results DB (--db, else $LLMBENCH_DB, else ./llmbench-results.db) under its
resolved Workload unless --no-record; `info` is stored in the row's environment["info"].
"""
from __future__ import annotations

import os

from llmbench._cliutil import (add_db, add_device, add_fields, add_json, emit_json,
                               int_in, table, values)
from llmbench.layouts import capability
from llmbench.measure.options import RunOptions
from llmbench.point import Workload
from llmbench.units import fmt_flops, fmt_metric, fmt_num, fmt_rate_bytes, label

COMMANDS = {  # suite: (Workload fields, RunOptions fields, per-command defaults, columns shown)
    "block": (("model", "batch", "seq_len", "precision", "hardware"),
              ("device", "repeats", "warmup", "ceiling", "compile"),
              {"model": "gpt2-xl", "batch": 1, "seq_len": 1024},
              ("batch", "fwd_time_s", "fwd_bwd_time_s", "fwd_tflops", "fwd_bwd_tflops", "ceiling_tflops",
               "frac_of_ceiling", "mfu")),
    "train": (("model", "batch", "micro_batch", "grad_accum", "seq_len", "precision", "sparsity", "hardware"),
              ("device", "steps", "warmup_steps", "data", "sparsity_pattern", "compile", "baseline",
               "baseline_tokens_per_s", "seed", "lr"),
              {"model": "gpt2-small", "batch": 4, "seq_len": 256},
              ("batch", "micro_batch", "grad_accum", "devices", "tokens_per_s", "step_time_s",
               "achieved_tflops", "mfu", "peak_mem_bytes", "scaling_efficiency")),
    "infer": (("model", "batch", "seq_len", "gen_len", "precision", "hardware"),
              ("device", "repeats", "warmup", "seed"),
              {"model": "bert-base", "batch": 1, "seq_len": 128, "gen_len": 16, "repeats": 20, "warmup": 2},
              ()),
    "genslm": (("model", "batch", "micro_batch", "grad_accum", "seq_len", "precision", "hardware"),
               ("device", "steps", "warmup_steps", "seed"),
               {"model": "genslm-25m", "batch": 2, "seq_len": 512, "steps": 5},
               ("batch", "tokens_per_s", "step_time_s", "achieved_tflops", "loss_first", "loss_last",
                "peak_mem_bytes")),
}
_LABELS = {"micro_batch": "micro", "grad_accum": "accum", "decode_tokens_per_s_per_seq": "decode tok/s/seq"}  # narrow columns (units.LABELS lacks them)
CEILINGS_RUN = ("device", "repeats", "gemm_size", "save_profile")
DECODER_COLUMNS = ("batch", "prefill_tokens_per_s", "time_to_first_token_s", "decode_tokens_per_s",
                   "decode_tokens_per_s_per_seq", "decode_time_s_per_token", "peak_mem_bytes")
ENCODER_COLUMNS = ("batch", "latency_s_p50", "latency_s_p90", "latency_s_p99", "samples_per_s",
                   "achieved_tflops")


#: --layout names -> Layout knobs for `world` processes (an explicit --tp/--zero/--recompute wins)
LAYOUTS = {"ddp": lambda world: {"tp": 1, "zero": 0}, "zero1": lambda world: {"tp": 1, "zero": 1},
           "zero2": lambda world: {"tp": 1, "zero": 2}, "fsdp": lambda world: {"tp": 1, "zero": 3},
           "tp": lambda world: {"tp": world, "zero": 0},
           "tp+fsdp": lambda world: {"tp": 2 if world % 2 == 0 and world > 2 else world, "zero": 3}}


def register(cli) -> None:
    g = cli.group("measure", "Measure on the hardware at hand (PyTorch): ceilings, block, train, infer, genslm, serve.")
    for suite, (wf, rf, defaults, _) in COMMANDS.items():
        p = g.command(suite, globals()[f"{suite}_cmd"])
        add_fields(p, Workload, wf, defaults=defaults, many=("batch",),
                   help={"hardware": "catalog entry the MFU is taken against (default: detected)"})
        add_fields(p, RunOptions, rf, defaults=defaults)
        if suite in ("train", "infer", "genslm"):
            p.add_argument("--n-layers", type=int_in(1, name="n-layers"),
                           help="fewer layers than the preset (a shrunk model; recorded as resize)")
        if suite == "train":
            p.add_argument("--layout", choices=tuple(LAYOUTS) + ("auto",),
                           help="ddp (default) | zero1 (sharded optimizer) | zero2 / fsdp (FSDP2 without / "
                                "with reshard after forward) | tp (all processes) | tp+fsdp (2-D mesh) | "
                                "auto (the planner's fastest layout that fits these devices)")
            add_fields(p, Workload, tuple(capability("measure.train").knobs))
            p.add_argument("--no-predict", dest="predict", action="store_false",
                           help="do not record the analytical model's prediction beside the measurement")
        _outputs(p)
    p = g.command("ceilings", ceilings_cmd)
    add_fields(p, Workload, ("model", "batch", "seq_len", "precision"),
               defaults={"model": None, "batch": 1, "seq_len": 1024},
               help={"model": "also the GEMM shapes of this model's layer (default: none)",
                     "batch": "batch of the layer shapes", "seq_len": "sequence length of the layer shapes",
                     "precision": "only this precision (default: every one the device has)"})
    add_fields(p, RunOptions, CEILINGS_RUN)
    _outputs(p)
    _register_serve(g)


SERVE_ENGINE = ("max_num_seqs", "max_batched_tokens", "chunked_prefill", "block_tokens", "kv_blocks")
SERVE_SHOWN = ("completed", "duration", "request_throughput", "output_throughput", "mean_ttft_ms",
               "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
               "median_itl_ms", "p99_itl_ms", "median_e2el_ms", "p99_e2el_ms", "request_goodput",
               "kv_cache_utilization", "preemptions")


def _register_serve(g) -> None:
    """`measure serve`: the real continuous-batching runtime (measure/serve.py); what arrives and
    the SLOs take `llmbench serve`'s options (serve/cli.py), with defaults sized for a CPU."""
    from llmbench.measure.serve_config import EngineConfig
    from llmbench.serve.cli import add_load_options, add_slo_options

    p = g.command("serve", serve_cmd)
    add_fields(p, Workload, ("model",), defaults={"model": "gpt2-small"})
    p.add_argument("--n-layers", type=int_in(1, name="n-layers"),
                   help="fewer layers than the preset (a shrunk model; recorded as resize)")
    add_load_options(p)
    p.set_defaults(**SERVE_LOAD_DEFAULTS)
    add_fields(p, EngineConfig, SERVE_ENGINE)
    add_slo_options(p)
    add_device(p)
    p.add_argument("--threads", type=int_in(1, 1024, name="threads"),
                   help="torch CPU threads (default torch's; 1 is steadier on a shared CPU)")
    p.add_argument("--out", help="per-request records as CSV (a rate sweep: -rateR before the suffix)")
    _outputs(p)


#: measure serve replays in real time: fewer and shorter requests than the simulator's defaults
SERVE_LOAD_DEFAULTS = {"requests": 200, "prompt_len": "128", "output_len": "32"}
MAX_RUNTIME_REQUESTS = 100_000


def serve_cmd(a) -> None:
    """Replay requests on a real continuous-batching engine (PyTorch, paged KV, greedy) on the
    device at hand: TTFT, TPOT, ITL and E2E percentiles and throughput in vLLM benchmark_serving's
    keys (defaults: 200 requests, prompts of 128 tokens, 32 out)."""
    from llmbench.errors import BadInput
    from llmbench.measure.serve_config import EngineConfig
    from llmbench.models import get_model
    from llmbench.models.spec import resize
    from llmbench.serve.cli import loads_of, slo_of
    from llmbench.serve.run import make_trace

    cfg = EngineConfig(**values(a, SERVE_ENGINE))
    spec = get_model(a.model)
    spec = resize(spec, n_layers=a.n_layers) if a.n_layers else spec
    slo, loads = slo_of(a), loads_of(a)
    traces = [make_trace(load) for load in loads]
    if max(len(t) for t in traces) > MAX_RUNTIME_REQUESTS:
        raise BadInput(f"measure serve replays in real time: at most {MAX_RUNTIME_REQUESTS:,} requests "
                       "(keep fewer with --requests K)")
    if not a.no_record:
        from llmbench.results.safe import check_not_db, check_writable
        check_not_db(a.out, a.db, "--out")
        check_writable(a.db)
    results = [_serve_one(a, spec, cfg, load, trace, slo, many=len(loads) > 1) for load, trace in zip(loads, traces)]
    if a.json:
        return emit_json(results[0] if len(results) == 1 else results)
    for r in results:
        rows = [(label(k), _fmt_serve(k, r[k])) for k in SERVE_SHOWN if r.get(k) is not None]
        table(f"measure serve: {spec.name} ({spec.n_layers} layers) on {r['info']['device']} "
              f"{r['info']['precision']}, {r['trace']['requests']} requests ({r['point']['trace']})",
              ("metric", "value"), rows, right=("value",))


def _serve_one(a, spec, cfg, load, trace, slo, many: bool) -> dict:
    from llmbench.measure.serve import measure_serve  # torch, only now
    from llmbench.queueing.metrics import summarize, write_records_csv

    replay, info = measure_serve(spec, trace, cfg, device=a.device, seed=a.seed,
                                 max_concurrency=load.max_concurrency, threads=a.threads)
    records = replay.to_records()
    summary = summarize(records, slo=slo, kv_cache_utilization=replay.kv_cache_utilization,
                        preemptions=replay.preemptions)
    if a.out:
        write_records_csv(records, _out_path(a.out, load.rate_per_s) if many else a.out)
    return _serve_result(a, spec, trace, load, cfg, summary, info, records)


def _out_path(path: str, rate: float) -> str:
    stem, dot, suffix = path.rpartition(".")
    return f"{stem}-rate{rate:g}.{suffix}" if dot else f"{path}-rate{rate:g}"


def _fmt_serve(name: str, x) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _serve_result(a, spec, trace, load, cfg, summary: dict, info: dict, records) -> dict:
    """The JSON result (summary keys as `llmbench serve` gives them, at the top level) and its
    row in the results DB: the point names model, layers, trace, load and engine knobs."""
    point = {"suite": "serve", "model": a.model, "resize": {"n_layers": spec.n_layers} if a.n_layers else {},
             "hardware": info["hardware"],
             "precision": info["precision"], "trace": trace.source, "requests": len(trace),
             "request_rate": None if a.trace else load.rate_per_s, "burstiness": load.burstiness,
             "max_concurrency": load.max_concurrency, "engine": "llmbench-runtime", **cfg.to_dict()}
    out = {"point": point, **summary, "info": info, "trace": trace.describe()}
    if not a.no_record:
        per_request = {k: getattr(records, k).tolist() for k in
                       ("arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens", "preemptions")}
        out["key"] = record_point(point, summary, {"info": info, "requests": per_request}, a.db)
    return out


def record_point(point: dict, metrics: dict, environment: dict, db) -> str:
    from llmbench.results.safe import record_or_save

    return record_or_save(db, point, source="measured", status="ok", metrics=metrics, environment=environment)


def _outputs(p) -> None:
    add_json(p)
    add_db(p)
    p.add_argument("--no-record", action="store_true", help="do not write the results DB")


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def record(w, result: dict, db: str | None) -> str:
    """Store one measured result under its resolved workload (info in environment["info"]);
    returns its key. If the DB write fails anyway, the result is printed and saved to a side file
    that the error names (`llmbench results import FILE` records it later): nothing measured is lost."""
    from llmbench.results.safe import record_or_save

    environment = {**(result.get("environment") or {}), "info": result.get("info") or {}}
    try:
        return record_or_save(db, w, source="measured", status=result["status"],
                              metrics=result.get("metrics") or {}, environment=environment,
                              error=result.get("error"))
    except ValueError:
        emit_json({"workload": w.to_dict(), **result})
        raise


def _run(w, run, a) -> dict:
    """Measure, record on rank 0 unless --no-record: the result with its workload first. A
    training result also gets the analytical model's prediction of the same resolved Workload,
    recorded beside it (source predicted, same workload) with the prediction's error. --layout
    auto: the planner chooses the layout first (measure/auto.py); the choice is in result["auto"]
    and in info["auto"]."""
    from llmbench.measure.suites import run_workload

    auto = None
    if getattr(a, "layout", None) == "auto":
        from llmbench.measure.auto import choose_layout
        w, auto = choose_layout(w, run)
    w, res = run_workload(w, run)
    if auto is not None:
        res["info"] = {**(res.get("info") or {}), "auto": auto}
    out = {"workload": w.to_dict(), **({"auto": auto} if auto else {}), **res}
    if w.suite == "train" and getattr(a, "predict", False) and res["status"] == "ok" and _rank() == 0:
        out["prediction"] = _predict_beside(w, res["metrics"], a)
    if _rank() == 0 and not a.no_record:
        out["key"] = record(w, res, a.db)
    return out


def _predict_beside(w, measured: dict, a) -> dict:
    """predict(w) on the hardware it was measured on, with the memory of the runtime that ran it
    (footprint "measure": autocast DDP / ZeroRedundancyOptimizer, FSDP2 from ZeRO 2); recorded
    unless --no-record; its error."""
    from llmbench.perfmodel.predict import predict

    try:
        pred = predict(w, runtime="measure").to_dict()
    except ValueError as e:  # the model has no such hardware or layout: say so, keep the measurement
        return {"error": str(e)}
    out = {k: pred.get(k) for k in ("tokens_per_s", "step_time_s", "peak_mem_bytes", "bound", "fits")}
    out["tokens_per_s_error"] = out["tokens_per_s"] / measured["tokens_per_s"] - 1.0
    out.update(_state_bytes(measured, pred))
    if not a.no_record:
        from llmbench.results.store import ResultsDB

        with ResultsDB(a.db) as store:
            out["key"] = store.record(w, source="predicted", metrics=pred,
                                      environment={"tool": "llmbench.perfmodel", "beside": "measured"})
    return out


STATE = ("weights_bytes", "grads_bytes", "optimizer_bytes")


def _state_bytes(measured: dict, pred: dict) -> dict:
    """Weights, gradients and optimizer state of the largest rank, measured exactly from its
    tensors (sharded and split layouts), beside the model's per-device figure, kind by kind (a
    right sum of wrong kinds shows) and summed; {} where not measured."""
    if any(measured.get(k) is None for k in STATE) or any(pred.get(k) is None for k in STATE):
        return {}
    m, p = sum(measured[k] for k in STATE), sum(pred[k] for k in STATE)
    out = {"state_bytes_measured": m, "state_bytes_predicted": p, "state_bytes_error": p / m - 1.0}
    for k in STATE:
        out[f"{k}_predicted"] = pred[k]
        out[f"{k}_error"] = pred[k] / measured[k] - 1.0 if measured[k] else None
    return out


def _layout_knobs(a, world: int) -> dict:
    """Layout knobs from --layout and --tp/--zero/--recompute (explicit knobs win; under --layout
    auto they constrain the planner's search)."""
    layout = getattr(a, "layout", None)
    knobs = LAYOUTS[layout](world) if layout and layout != "auto" else {}  # auto: measure/auto.py
    knobs.update({k: getattr(a, k) for k in ("tp", "zero", "recompute") if getattr(a, k, None) is not None})
    return knobs


def _measure(suite: str, a) -> None:
    from llmbench.point import Layout

    wf, rf, _, columns = COMMANDS[suite]
    run = RunOptions(**values(a, rf))
    base = {k: v for k, v in values(a, wf).items() if k != "batch"}
    resize = {"n_layers": a.n_layers} if getattr(a, "n_layers", None) else {}
    layout = Layout(**_layout_knobs(a, int(os.environ.get("WORLD_SIZE", "1"))))
    if _rank() == 0 and not a.no_record:
        from llmbench.results.safe import check_writable
        check_writable(a.db)  # before the work: an unusable DB is found now, not after the measurement
    from llmbench.models import get_model

    get_model(a.model)  # the model (a config.json's heads, layers, ...) checked before torch is imported
    try:
        results = [_run(Workload(suite=suite, batch=batch, resize=resize, layout=layout, **base), run, a)
                   for batch in a.batch]
    finally:
        _finish_distributed()
    if _rank() != 0:
        return
    if a.json:
        return emit_json(results[0] if len(results) == 1 else results)
    if not columns:
        from llmbench.models import get_model
        columns = DECODER_COLUMNS if get_model(a.model).head == "lm" else ENCODER_COLUMNS
    w = results[0]["workload"]
    show(f"{suite}: {a.model} seq {a.seq_len} {w['precision']} on {w['hardware']}", results, columns)
    for r in results:
        if r.get("auto"):
            print(auto_line(r))


def auto_line(r: dict) -> str:
    """The planner's choice under --layout auto, its prediction and the measured error."""
    from llmbench.units import fmt_bytes

    c = r["auto"]
    line = (f"auto: {c['layout']} (the fastest of {c['fit']} layouts that fit {fmt_bytes(c['memory_per_device_bytes'])} "
            f"per device [{c['memory_from']}], {c['searched']} searched); predicted {fmt_num(c['predicted_tokens_per_s'])} tok/s")
    measured = (r.get("metrics") or {}).get("tokens_per_s")
    if r["status"] == "ok" and measured:
        line += f", measured {fmt_num(measured)} tok/s: error {c['predicted_tokens_per_s'] / measured - 1:+.0%}"
    return line


def _fmt(name: str, x) -> str:
    """A rate as a number (its column label names the unit: units.fmt_metric would read a name
    ending in "_per_s" as seconds); anything else by units.fmt_metric."""
    rate = name.endswith(("_per_s", "_per_seq", "tflops"))
    return fmt_num(x) if rate else fmt_metric(name, x)


def show(title: str, results: list[dict], columns) -> None:
    """One row per result: the workload columns, then the key metrics (a column no result has is
    left out: MFU without a datasheet, scaling efficiency without a baseline)."""
    columns = [c for c in columns if any((r.get("metrics") or {}).get(c, r["workload"].get(c)) is not None
                                         for r in results)]
    rows, extra = [], ()
    for r in results:
        m, w = r.get("metrics") or {}, r["workload"]
        row = [r["status"]] + [_fmt(k, m.get(k, w.get(k))) for k in columns]
        if w["suite"] == "train":  # the layout as run, and the prediction beside the measurement
            lay, pred = w["layout"], r.get("prediction") or {}
            err = pred.get("tokens_per_s_error")
            row += [f"tp{lay['tp']}/z{lay['zero']}/{str(lay['recompute'])[:3]}",
                    _fmt("tokens_per_s", pred.get("tokens_per_s")), "-" if err is None else f"{err:+.0%}"]
            extra = ("layout", "predicted tok/s", "pred. error")
        rows.append(row + [r.get("error") or ""])
    errors = ("error",) if any(r.get("error") for r in results) else ()
    rows = [row if errors else row[:-1] for row in rows]
    labels = tuple(_LABELS.get(c) or label(c) for c in columns)
    table(title, ("status",) + labels + extra + errors, rows, right=labels + extra[1:])


def _finish_distributed() -> None:
    try:
        import torch.distributed as tdist
    except ImportError:
        return
    if tdist.is_available() and tdist.is_initialized():
        tdist.destroy_process_group()


def block_cmd(a) -> None:
    """One transformer layer: forward and forward+backward time, TFLOP/s, fraction of ceiling."""
    _measure("block", a)


def train_cmd(a) -> None:
    """AdamW pre-training steps: tokens/s, step time, TFLOP/s, MFU, peak memory."""
    _measure("train", a)


def infer_cmd(a) -> None:
    """Latency against batch (encoders: p50/p90/p99); prefill and KV-cache decode (decoders)."""
    _measure("infer", a)


def genslm_cmd(a) -> None:
    """GenSLM: a GPT over codons trained on the shipped genome sample."""
    _measure("genslm", a)


def ceilings_cmd(a) -> None:
    """GEMM FLOP/s per precision (square, and a model layer's shapes) and copy bandwidth; saved as
    the local hardware profile."""
    w = Workload(suite="ceilings", model=a.model or "-", batch=a.batch, seq_len=a.seq_len, precision=a.precision)
    res = _run(w, RunOptions(**values(a, CEILINGS_RUN)), a)
    if a.json:
        return emit_json(res)
    _show_ceilings(res)


def _show_ceilings(res: dict) -> None:
    if res["status"] != "ok":
        print(f"{res['status']}: {res['error']}")
        return
    m, info, w = res["metrics"], res["info"], res["workload"]
    shape = "x".join(map(str, info["gemm_shape"]))
    rows = [("GEMM square", p, shape, *(fmt_flops(r[k]) for k in ("min", "median", "max")))
            for p, r in m["gemm_flops_per_s"].items()]
    rows += [("GEMM skipped", p, why, "-", "-", "-") for p, why in info["skipped"].items()]
    rows += [(f"GEMM {w['model']} layer fwd+bwd", p, f"B={w['batch']} T={w['seq_len']}", "", fmt_flops(rate), "")
             for p, rate in m["layer_gemm_flops_per_s"].items()]
    c = m["copy_bytes_per_s"]
    rows.append(("copy (read+write)", "-", f"{info['copy_bytes'] / 2**20:.0f} MiB",
                 *(fmt_rate_bytes(c[k]) for k in ("min", "median", "max"))))
    table(f"ceilings: {info['device']} ({info['repeats']} repetitions)",
          ("what", "precision", "shape", "min", "median", "max"), rows, right=("min", "median", "max"))
    if info.get("saved_to"):
        print(f"saved profile: {info['saved_to']}")
