"""`llmbench serve` and `llmbench plan serve`: serving as people plan it (the simulator).

    llmbench serve --model llama-3.1-8b --hardware h100-sxm --rate 1,2,4,8,16 --slo-ttft-ms 500 --slo-tpot-ms 50
    llmbench serve --model llama-3.1-8b --hardware a100-80gb --max-concurrency 64 --requests 2000 --json
    llmbench serve --model llama-3.1-8b --hardware mi300x --trace llmbench/serve/data/synthetic_mixed.csv --out requests.csv
    llmbench plan serve --model llama-3.1-70b --rate 20 --slo-ttft-ms 500 --slo-tpot-ms 50 --objective cost

Imports nothing heavy at import time (numpy and the simulator load when a command runs).
"""
from __future__ import annotations

import argparse
import math
import re
from dataclasses import fields

from llmbench._cliutil import add_db, add_json, emit_json, float_in, int_in, pairs, table
from llmbench.errors import BadInput

POLICIES = ("continuous", "chunked", "static")
ROUTERS = ("round_robin", "least_outstanding")


def _default(cls, name):
    return {f.name: f.default for f in fields(cls)}[name]


def rates(text: str) -> list[float]:
    """argparse type: one rate or a comma list (requests/s, each > 0; 'inf': all at once)."""
    out = []
    for part in [t.strip() for t in str(text).split(",") if t.strip()] or [""]:
        try:
            v = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be requests/s (a number > 0 or inf), got {part!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be > 0 requests/s, got {part}")
        out.append(v)
    return out


def register(cli) -> None:
    p = cli.command("serve", serve_cmd)
    add_deployment_options(p, hardware_required=True)
    add_load_options(p)
    add_slo_options(p)
    p.add_argument("--out", help="per-request records as CSV (a sweep: one file per rate, -rateR before "
                                 "the suffix)")
    add_json(p)
    add_db(p, help="record each result in this results database (default: not recorded)")
    _register_plan_serve(cli)


def add_deployment_options(p, hardware_required: bool) -> None:
    from llmbench.serve.config import Deployment

    d = lambda n: _default(Deployment, n)  # noqa: E731
    g = p.add_argument_group("what serves")
    g.add_argument("--model", required=True, help="preset name, or a Hugging Face config.json path")
    if hardware_required:
        g.add_argument("--hardware", required=True, help="catalog name (llmbench hardware list)")
    g.add_argument("--devices", type=int_in(1, 65536, "devices"),
                   help="devices in all: replicas = devices / (tp x pp) (default: --replicas)")
    g.add_argument("--tp", type=int_in(1, 64, "tp"), help="tensor-parallel degree of a replica "
                   "(default: the fewest devices that hold the model and one request)")
    g.add_argument("--pp", type=int_in(1, 1024, "pp"), help="pipeline stages of a replica (default 1; wafers: as needed)")
    g.add_argument("--precision", default=None, help="weights' precision (default: the hardware's)")
    g.add_argument("--engine", default=None,
                   help="serving engine: trtllm, vllm (on AMD GPUs: vllm-rocm, AMD's ROCm build; "
                        "vllm-rocm-upstream, one built from the repository), sglang, tgi, "
                        "jetstream, gptfast, native, ideal (default: the hardware family's; docs/predict.md 'Serving')")
    g.add_argument("--kv-precision", default=None, help="KV-cache precision (default: the engine's rule)")
    g.add_argument("--policy", choices=POLICIES, default=None,
                   help="scheduler (default: chunked if the engine chunks prompts, else continuous)")
    g.add_argument("--max-num-seqs", type=int_in(1, 1 << 20, "max-num-seqs"), default=d("max_num_seqs"),
                   help="sequences running at once per replica (default: the engine's on the device: vLLM "
                        "1,024 on a GPU of 70 GiB or more that is not an A100, else 256; other engines 256)")
    g.add_argument("--max-batched-tokens", type=int_in(1, 1 << 24, "max-batched-tokens"), default=None,
                   help="tokens per step (default: the engine's chunk budget on the device (vLLM 8,192, "
                        "2,048 on A100s and GPUs under 70 GiB), else 8192)")
    g.add_argument("--replicas", type=int_in(1, 65536, "replicas"), default=None,
                   help="engine replicas behind the router (default: devices / (tp x pp), else 1)")
    g.add_argument("--router", choices=ROUTERS, default=d("router"), help=f"(default {d('router')})")


def add_load_options(p) -> None:
    from llmbench.serve.config import Load

    d = lambda n: _default(Load, n)  # noqa: E731
    g = p.add_argument_group("what arrives (one of --rate, --max-concurrency, --trace)")
    g.add_argument("--rate", type=rates, default=None,
                   help="requests/s, Poisson (gamma with --burstiness); a comma list sweeps (1,2,4,8,16); inf: all at once")
    g.add_argument("--burstiness", type=float_in(1e-3, 1e3, "burstiness"), default=d("burstiness"),
                   help="gamma shape of the intervals: 1 Poisson, < 1 burstier (default 1)")
    g.add_argument("--max-concurrency", type=_concurrency, default=None,
                   help="at most C requests in flight (with no --rate: the closed loop)")
    g.add_argument("--trace", default=None, help="CSV/JSONL: arrival_s,prompt_tokens,output_tokens, or the Azure "
                   "LLM inference or BurstGPT columns")
    g.add_argument("--requests", type=_requests, default=None,
                   help=f"requests generated (default {d('requests')}), or the first K of --trace")
    g.add_argument("--prompt-len", default=d("prompt_len"),
                   help=f"prompt tokens: N, lognormal:MEAN,SD, uniform:LO,HI, file:PATH (default {d('prompt_len')})")
    g.add_argument("--output-len", default=d("output_len"), help=f"output tokens, same forms (default {d('output_len')})")
    g.add_argument("--seed", type=int_in(0, 2**63, "seed"), default=0, help="seed of the generated trace (default 0)")


def _concurrency(text: str) -> int:
    """requests in flight: an integer >= 1, written as every count is ('64', '1e3')."""
    return int_in(1, None, "max-concurrency")(text)


def _requests(text: str) -> int:
    """A request count in [1, MAX_REQUESTS], written as every count is ('2000', '1e4'): 1e12 is
    refused by the simulator's bound, not as "not an integer"."""
    from llmbench.serve.config import MAX_REQUESTS

    v = int_in(1, None, "requests")(text)
    if v > MAX_REQUESTS:
        raise argparse.ArgumentTypeError(f"{v:,} exceeds the supported {MAX_REQUESTS:,} (the simulator's bound)")
    return v


def add_slo_options(p) -> None:
    g = p.add_argument_group("service-level objectives (goodput: requests/s meeting every one given)")
    for name, what in (("ttft", "time to first token"), ("tpot", "time per output token"),
                       ("e2el", "end-to-end latency")):
        g.add_argument(f"--slo-{name}-ms", type=float, default=None, help=f"{what} [ms]")


def slo_of(a):
    from llmbench.queueing.metrics import Slo

    return Slo(ttft_ms=a.slo_ttft_ms, tpot_ms=a.slo_tpot_ms, e2el_ms=getattr(a, "slo_e2el_ms", None))


def deployment_of(a, hardware: str | None = None):
    from llmbench.serve.config import Deployment

    return Deployment(model=a.model, hardware=hardware or a.hardware, devices=a.devices, tp=a.tp, pp=a.pp,
                      precision=a.precision, engine=a.engine, kv_precision=a.kv_precision, policy=a.policy,
                      max_num_seqs=a.max_num_seqs, max_batched_tokens=a.max_batched_tokens,
                      replicas=a.replicas, router=a.router)


def loads_of(a) -> list:
    """One Load per rate of the sweep (or the one load a concurrency or a trace gives)."""
    from llmbench.serve.config import Load

    if a.trace is not None and a.rate is not None:
        raise BadInput("give --trace or --rate, not both (a trace has its own arrival times)")
    if a.trace is None and a.rate is None and a.max_concurrency is None:
        raise BadInput("give --rate R, --max-concurrency C or --trace FILE")
    common = dict(burstiness=a.burstiness, max_concurrency=a.max_concurrency, trace=a.trace,
                  prompt_len=a.prompt_len, output_len=a.output_len, seed=a.seed)
    if a.requests is not None:
        common["requests"] = a.requests
    if a.trace is not None:
        common["requests"] = a.requests or 1_000_000
    return [Load(rate_per_s=r, **common) for r in (a.rate or [math.inf])]


def serve_cmd(a) -> None:
    """Simulate serving: requests arriving at a rate (or a concurrency, or a trace) on a model,
    hardware, layout and engine; TTFT, TPOT, ITL and E2E percentiles, throughput, goodput under
    SLOs, KV-cache use and preemptions, in vLLM benchmark_serving's keys. A comma list of rates
    sweeps the latency-throughput curve."""
    from llmbench.serve.run import run

    d, slo, loads = deployment_of(a), slo_of(a), loads_of(a)
    _check_out(a, loads)
    if a.db:
        from llmbench.results.safe import check_writable
        check_writable(a.db)
    results = []
    for load in _progress(loads, "serve", len(loads) > 1 and not a.json):
        res = run(d, load, slo)
        if a.out:
            _write_out(a.out, res, load, len(loads) > 1)
        if a.db:
            res["key"] = record(res, load, a.db)
        results.append({k: v for k, v in res.items() if k != "_sim"})
    if a.json:
        return emit_json(results[0] if len(results) == 1 else {"sweep": results})
    _print_header(results[0], d, sweep=len(results) > 1)
    if len(results) == 1:
        return _print_one(results[0])
    _print_sweep(results)


def _progress(items, label: str, show: bool):
    """A rich progress bar on stderr for a long loop (a terminal only), else the items."""
    import sys

    if not show or not sys.stderr.isatty():
        yield from items
        return
    from rich.progress import Progress

    with Progress(transient=True, console=None) as bar:
        task = bar.add_task(label, total=len(items))
        for x in items:
            yield x
            bar.advance(task)


def _out_path(path: str, load, many: bool) -> str:
    """--out, or in a sweep one file per rate (-rateR before the suffix)."""
    from pathlib import Path

    if not many:
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}-rate{load.rate_per_s:g}{p.suffix}"))


def _check_out(a, loads) -> None:
    """Before anything runs: no --out file (one per rate in a sweep) is the results database."""
    from llmbench.results.safe import check_not_db

    for load in loads if a.out else ():
        check_not_db(_out_path(a.out, load, len(loads) > 1), a.db, "--out")


def _write_out(path: str, res: dict, load, many: bool) -> None:
    from llmbench.queueing.metrics import write_records_csv

    write_records_csv(res["_sim"].records, _out_path(path, load, many))


def record(res: dict, load, db) -> str:
    """The result in the results store (serve/run.py result_row: suite serve, source predicted)."""
    from llmbench.results.safe import record_or_save
    from llmbench.serve.run import result_row

    return record_or_save(db, **result_row(res, load))


def _print_header(r: dict, d, sweep: bool = False) -> None:
    from llmbench.perfmodel.provenance import serving_calibration_text

    s = r["scheduler"]
    lay = f"tp {r['tp']} x pp {r['pp']}" + (f", {r['mode']}" if r["mode"] != "resident" else "")
    pairs([("serve", f"{r['model']} on {r['devices']} x {r['hardware']} ({r['replicas']} replica(s) of {lay}), "
                     f"{r['precision']}"),
           ("engine", f"{r['engine']}: {s['policy']} batching, max {s['max_num_seqs']} seqs, "
                      f"{s['max_batched_tokens']:,} tokens/step, KV {r['kv_precision']} in {s['block_tokens']}-token "
                      f"blocks, {r['kv_capacity_tokens']:,} tokens per replica"),
           ("requests", _load_text(r, sweep)),
           ("calibration", serving_calibration_text(r["calibration"]))])


def _load_text(r: dict, sweep: bool = False) -> str:
    t = r["trace"]
    src = re.sub(r"rate=\S+ ", "rate as listed, ", t["source"]) if sweep else t["source"]
    conc = f", at most {r['max_concurrency']} in flight" if r["max_concurrency"] else ""
    return (f"{t['requests']:,} ({src}){conc}; mean prompt {t['mean_prompt_tokens']:,.0f}, "
            f"output {t['mean_output_tokens']:,.0f} tokens")


#: (label, key, format) in benchmark_serving's printout order
SHOWN = (("Successful requests", "completed", "{:,}"), ("Failed requests", "failed", "{:,}"),
         ("Benchmark duration (s)", "duration", "{:,.2f}"),
         ("Total input tokens", "total_input_tokens", "{:,}"),
         ("Total generated tokens", "total_output_tokens", "{:,}"),
         ("Request throughput (req/s)", "request_throughput", "{:,.2f}"),
         ("Request goodput (req/s)", "request_goodput", "{:,.2f}"),
         ("Output token throughput (tok/s)", "output_throughput", "{:,.1f}"),
         ("Total token throughput (tok/s)", "total_token_throughput", "{:,.1f}"))


def _print_one(r: dict) -> None:
    rows = [(label, fmt.format(r[k])) for label, k, fmt in SHOWN if r.get(k) is not None]
    for name, title in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency")):
        vals = [f"{stat} {r[f'{stat}_{name}_ms']:,.2f}" for stat in ("mean", "median", "p90", "p99")
                if r.get(f"{stat}_{name}_ms") is not None]
        if vals:
            rows.append((f"{title} (ms)", ", ".join(vals)))
    rows.append(("KV cache", f"{r['kv_cache_utilization']:.1%} of blocks in use on average, "
                             f"{r['max_kv_cache_utilization']:.1%} at most; {r['preemptions']:,} preemptions"))
    if r["rejected"]:
        rows.append(("rejected", f"{r['rejected']:,} requests longer than a replica's KV cache"))
    pairs(rows)


def _print_sweep(results: list[dict]) -> None:
    cols = ("rate/s", "req/s", "goodput/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms",
            "TPOT p99 ms", "KV use", "preempt")
    f = lambda v, fmt: "-" if v is None else fmt.format(v)  # noqa: E731
    rows = [(f(r["request_rate"], "{:g}"), f(r["request_throughput"], "{:,.2f}"), f(r["request_goodput"], "{:,.2f}"),
             f(r["output_throughput"], "{:,.0f}"), f(r["median_ttft_ms"], "{:,.1f}"), f(r["p99_ttft_ms"], "{:,.1f}"),
             f(r["median_tpot_ms"], "{:,.2f}"), f(r["p99_tpot_ms"], "{:,.2f}"),
             f(r["kv_cache_utilization"], "{:.0%}"), f(r["preemptions"], "{:,}")) for r in results]
    table(None, cols, rows, right=cols)


# ---------------------------------------------------------------- plan serve

def _register_plan_serve(cli) -> None:
    """`plan serve` under the training planner's `plan` command (perfmodel/cli.py)."""
    plan = cli._sub.choices.get("plan")
    if plan is None:
        return
    _required_unless_serve(plan)
    sub = plan.add_subparsers(metavar="serve", title="serving", dest="plan_what",
                              description="llmbench plan serve --help: deployments meeting SLOs at a rate")
    doc = plan_serve_cmd.__doc__.strip()
    p = sub.add_parser("serve", help=doc.split("\n\n")[0].replace("\n", " "), description=doc)
    p.set_defaults(_fn=plan_serve_cmd, _parser=p)
    add_deployment_options(p, hardware_required=False)
    for act in p._actions:  # what plan serve searches: refused when given (plan_serve_cmd), not ignored
        if act.dest in PLAN_SEARCHES:
            act.default, act.help = None, f"not accepted: {PLAN_SEARCHES[act.dest]}"
        elif act.dest == "router":
            act.default = None
            act.help = "how the simulated replicas share the load (default least_outstanding)"
    p.add_argument("--hardware", default=None,
                   help="catalog names, comma-separated (default: every accelerator with a price)")
    add_load_options(p)
    add_slo_options(p)
    p.add_argument("--objective", choices=("cost", "devices", "energy"), default="cost",
                   help="rank the layouts meeting the SLOs by USD per million tokens, devices, or J per token "
                        "(default cost)")
    p.add_argument("--top", type=int_in(1, 1000, "top"), default=10, help="layouts shown (default 10)")
    add_json(p)
    add_db(p, help="record the plan in this results database (default: not recorded)")


#: deployment options plan serve chooses itself: refused when given
PLAN_SEARCHES = {"devices": "plan serve searches the devices (replicas x tp x pp)",
                 "tp": "plan serve searches tp", "pp": "plan serve searches pp",
                 "replicas": "plan serve searches the replicas",
                 "max_num_seqs": "plan serve searches max-num-seqs"}


def _required_unless_serve(plan) -> None:
    """The training planner's required options (--model, --devices, ...) are checked when it
    runs, so that `plan serve` (a subcommand with its own options) parses without them."""
    required = [act for act in plan._actions if act.required and act.option_strings]
    for act in required:
        act.required, act.default = False, None
    train_fn = plan.get_default("_fn")

    def plan_train(a):
        missing = [act.option_strings[0] for act in required if getattr(a, act.dest, None) is None]
        if missing:
            raise BadInput(f"llmbench plan: the following arguments are required: {', '.join(missing)} "
                           "(or: llmbench plan serve ...)")
        return train_fn(a)
    plan_train.__doc__ = train_fn.__doc__
    plan.set_defaults(_fn=plan_train)


def plan_serve_cmd(a) -> None:
    """The cheapest (or fewest-device, or lowest-energy) deployments meeting TTFT and TPOT SLOs at
    a request rate: hardware x tp x pp x replicas x max-num-seqs searched, the best simulated."""
    from llmbench.serve.plan import plan_serve

    for dest, what in PLAN_SEARCHES.items():
        if getattr(a, dest) is not None:
            raise BadInput(f"--{dest.replace('_', '-')}: {what}; use llmbench serve to run one layout")
    if a.rate is None or len(a.rate) != 1 or math.isinf(a.rate[0]):
        raise BadInput("plan serve needs one finite --rate R (requests/s)")
    slo = slo_of(a)
    if slo.ttft_ms is None or slo.tpot_ms is None:
        raise BadInput("plan serve needs --slo-ttft-ms and --slo-tpot-ms")
    load = loads_of(a)[0]
    hws = [h.strip() for h in a.hardware.split(",") if h.strip()] if a.hardware else None
    res = plan_serve(a.model, load, slo, hardware=hws, objective=a.objective, top=a.top,
                     precision=a.precision, engine=a.engine, kv_precision=a.kv_precision, policy=a.policy,
                     max_batched_tokens=a.max_batched_tokens, router=a.router, show_progress=not a.json)
    if a.db:
        from llmbench.results.safe import record_or_save
        point = {"suite": "serve-plan", "model": a.model, "hardware": ",".join(res["hardware"]),
                 "request_rate": load.rate_per_s, "slo": res["slo"], "objective": a.objective,
                 "trace": res["trace"], "max_concurrency": load.max_concurrency, "top": a.top,
                 **{k: getattr(a, k) for k in ("precision", "engine", "kv_precision", "policy",  # every input
                                               "max_batched_tokens", "router")}}  # that moves the answer
        res["key"] = record_or_save(a.db, point, source="predicted", status="ok", metrics=res)
    if a.json:
        return emit_json(res)
    print_plan(res)


def print_plan(res: dict) -> None:
    """The plan as text: the top layouts (simulated) and the best of each hardware (screened)."""
    slo = res["slo"]
    t = res["trace"]
    print(f"plan serve: {res['model']} at {res['request_rate']:g} requests/s (mean prompt {t['mean_prompt_tokens']:,.0f}, "
          f"output {t['mean_output_tokens']:,.0f} tokens), p99 TTFT <= {slo['ttft_ms']:g} ms and p99 TPOT <= "
          f"{slo['tpot_ms']:g} ms; {res['searched']:,} candidates screened, {res['screened_feasible']:,} feasible, "
          f"{res['simulated']} simulated, ranked by {res['objective']} ({res['elapsed_s']:.1f} s)")
    cols = ("#", "hardware", "engine", "replica", "replicas", "devices", "max seqs", "p99 TTFT ms", "p99 TPOT ms",
            "USD/M out tok", "J/out tok")
    rows = [(str(i), c["hardware"], c["engine"], _lay(c), str(c["replicas"]), str(c["devices"]), str(c["max_num_seqs"]),
             f"{c['simulated']['p99_ttft_ms']:,.0f}", f"{c['simulated']['p99_tpot_ms']:,.1f}", _f(c["usd_per_mtok_output"]),
             _f(c["j_per_output_token"])) for i, c in enumerate(res["layouts"], 1)]
    if rows:
        table("meeting the SLOs (simulated)", cols, rows, right=cols[4:])
    else:
        print(f"no layout met the SLOs in the simulator ({res['simulated']} simulated): loosen the SLOs, "
              "lower the rate, or add --hardware")
    cols = ("hardware", "engine", "replica", "replicas", "devices", "max seqs", "req/s per replica", "USD/M out tok",
            "J/out tok")
    rows = [(c["hardware"], c["engine"], _lay(c), str(c["replicas"]), str(c["devices"]), str(c["max_num_seqs"]),
             f"{c['screen_rate_per_replica']:,.2f}", _f(c["usd_per_mtok_output"]), _f(c["j_per_output_token"]))
            for c in res["best_per_hardware"]]
    if rows:
        table("best of each hardware (screen, not simulated)", cols, rows, right=cols[3:])
    if res["no_candidate"]:
        print(f"no layout meets the SLOs on: {', '.join(res['no_candidate'])}")
    print("cost: the catalog's price per device-hour (source in each hardware file); 'no price': none listed")


def _lay(c: dict) -> str:
    return f"{c['pp']} wafers" if c["mode"] == "sram_pipeline" else f"tp{c['tp']} pp{c['pp']}"


def _f(x) -> str:
    return "no price" if x is None else f"{x:.3g}"
