"""The serving study of `llmbench reproduce`: latency-throughput curves of one seed model on a few
catalog accelerators, and the capacity plan of a larger one over the catalog, recorded in the
results store (studies "serving" and "serving-plan") for the report's serving page.

    python -m llmbench.studies.serving --db out/results.db      # what reproduce runs (~30-60 s)

Seed 004 (wafer-scale inference) serves Llama-3.1 8B and 70B; the sweep serves Llama-3.1-8B at
1-32 requests/s (prompts lognormal mean 1,000 sd 500 tokens, outputs mean 250 sd 150) on an H100,
an A100, an MI300X and a CS-3 (sram_pipeline), each under its default engine; the plan finds the
deployments of Llama-3.1-70B meeting p99 TTFT <= 500 ms and p99 TPOT <= 50 ms at 10 requests/s.
"""
from __future__ import annotations

import argparse
import time

SWEEP_MODEL = "llama-3.1-8b"
SWEEP_HARDWARE = ("h100-sxm", "a100-80gb", "mi300x", "cs3")
SWEEP_RATES = (1, 2, 4, 8, 16, 32)
SWEEP_REQUESTS = 400
LENGTHS = {"prompt_len": "lognormal:1000,500", "output_len": "lognormal:250,150"}
SLO = {"ttft_ms": 500.0, "tpot_ms": 50.0}
PLAN_MODEL = "llama-3.1-70b"
PLAN_RATE = 10.0
PLAN_TOP = 5


def record_serving(db, *, budget_s: float = 90.0, log=print) -> dict:
    """Run the sweep (cut at its budget, plan included) and the plan; record them; a timing row."""
    from llmbench.serve.config import Deployment, Load
    from llmbench.queueing.metrics import Slo
    from llmbench.serve.run import result_row, run

    t0 = time.monotonic()
    slo, done = Slo(**SLO), 0
    cmd = (f"llmbench serve --model {SWEEP_MODEL} --hardware HW --rate {','.join(map(str, SWEEP_RATES))} "
           f"--requests {SWEEP_REQUESTS} --prompt-len {LENGTHS['prompt_len']} --output-len {LENGTHS['output_len']} "
           f"--slo-ttft-ms {SLO['ttft_ms']:g} --slo-tpot-ms {SLO['tpot_ms']:g}")
    for hw in SWEEP_HARDWARE:
        for rate in SWEEP_RATES:
            if time.monotonic() - t0 > 0.7 * budget_s:  # keep the rest for the plan
                break
            load = Load(rate_per_s=rate, requests=SWEEP_REQUESTS, **LENGTHS)
            row = result_row(run(Deployment(model=SWEEP_MODEL, hardware=hw), load, slo), load)
            row["environment"]["command"] = cmd.replace("HW", hw)
            row["environment"].pop("requests")  # the curves need the summary only
            db.record(row.pop("point"), study="serving", **row)
            done += 1
    plan = _plan(db)
    status = f"{done} of {len(SWEEP_HARDWARE) * len(SWEEP_RATES)} sweep points, plan: {plan}"
    log(f"  serving: {status}")
    return {"step": "serving", "seconds": time.monotonic() - t0, "status": status}


def _plan(db) -> str:
    from llmbench.serve.config import Load
    from llmbench.queueing.metrics import Slo
    from llmbench.serve.plan import plan_serve

    load = Load(rate_per_s=PLAN_RATE, **LENGTHS)
    res = plan_serve(PLAN_MODEL, load, Slo(**SLO), objective="cost", top=PLAN_TOP)
    point = {"suite": "serve-plan", "model": PLAN_MODEL, "hardware": "catalog", "request_rate": PLAN_RATE,
             "slo": res["slo"], "objective": "cost"}
    cmd = (f"llmbench plan serve --model {PLAN_MODEL} --rate {PLAN_RATE:g} --slo-ttft-ms {SLO['ttft_ms']:g} "
           f"--slo-tpot-ms {SLO['tpot_ms']:g} --prompt-len {LENGTHS['prompt_len']} --output-len "
           f"{LENGTHS['output_len']} --top {PLAN_TOP}")
    db.record(point, source="predicted", metrics=res, study="serving-plan", environment={"command": cmd})
    return f"{res['searched']:,} candidates, {len(res['layouts'])} simulated layouts meet the SLOs"


def main() -> None:
    from llmbench.results.store import ResultsDB

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=None)
    ap.add_argument("--budget", type=float, default=90.0, help="seconds for the sweep and the plan")
    a = ap.parse_args()
    with ResultsDB(a.db) as db:
        record_serving(db, budget_s=a.budget)


if __name__ == "__main__":
    main()
