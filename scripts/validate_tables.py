"""The validation tables of docs/predict.md ("Validation by kind and engine"), printed from
`llmbench validate --json`, so that the page quotes a run of the current code:

    .venv/bin/llmbench validate --json > /tmp/v.json && python3 scripts/validate_tables.py /tmp/v.json
    .venv/bin/python scripts/validate_tables.py --engines     # the engines' parameters as shipped
"""
from __future__ import annotations

import json
import statistics
import sys


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def sig(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def median_abs(rows, key) -> float | None:
    v = [abs(r[key]) for r in rows if r.get(key) is not None]
    return statistics.median(v) if v else None


def engines_table() -> None:
    """docs/predict.md's table of each engine's parameters as shipped (engines.toml priors)."""
    from llmbench.perfmodel.serving import load_engines

    g = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
    print("| engine | bandwidth_fraction | step_overhead_s | prefill_efficiency | request_overhead_s | "
          "collective_latency_s | kv_mem_fraction (basis) | block_tokens | MLA latent under TP | chunked prefill |\n"
          "|---|---:|---:|---:|---:|---:|---|---:|---|---:|")
    for e in load_engines(fitted=False).values():
        print(f"| {e.name} | {g(e.bandwidth_fraction)} | {g(e.step_overhead_s)} | {g(e.prefill_efficiency)} | "
              f"{g(e.request_overhead_s)} | {g(e.collective_latency_s)} | {g(e.kv_mem_fraction)} ({e.kv_mem_basis}) | "
              f"{e.block_tokens} | {'replicated' if e.mla_replicated_tp else 'split'} | "
              f"{e.chunked_prefill_tokens or '-'} |")


def main(path: str) -> None:
    d = json.load(open(path))
    loso, ins = d["leave_one_source_out"], d["in_sample"]
    print("| kind | rows | median abs error, in-sample | held out (leave one source out) |\n|---|---:|---:|---:|")
    for kind, v in sorted(loso["by_kind"].items(), key=lambda kv: kv[0] != "training"):
        print(f"| {kind} | {v['rows']} | {pct(ins['by_kind'][kind]['median_abs_error'])} | {pct(v['median_abs_error'])} |")
    from llmbench.perfmodel.serving import FITTED

    print(f"\n| engine | rows | sources | held out median | in-sample median | fitted: {', '.join(FITTED)} |"
          "\n|---|---:|---:|---:|---:|---|")
    for eng, v in sorted(d["by_engine"].items()):
        f = d["engines_fitted"].get(eng, {})
        fitted = ", ".join(sig(f.get(k)) for k in FITTED)
        print(f"| {eng} | {v['rows']} | {v['sources']} | {pct(v['leave_one_source_out']['median_abs_error'])} | "
              f"{pct(v['in_sample']['median_abs_error'])} | {fitted} |")
    serving = [r for r in d["rows"] if r.get("kind") == "serving" and r.get("loso_error") is not None]
    print("\n| hardware (serving rows) | rows | held out median | in-sample median |\n|---|---:|---:|---:|")
    for hw in sorted({r["system"] for r in serving}):
        rs = [r for r in serving if r["system"] == hw]
        print(f"| {hw} | {len(rs)} | {pct(median_abs(rs, 'loso_error'))} | {pct(median_abs(rs, 'in_sample_error'))} |")
    within = sum(abs(r["loso_error"]) <= 0.2 for r in serving)
    print(f"\nserving rows: {len(serving)} sources: {len({r['source'] for r in serving})} within 20% held out: {within}")
    print(f"overall held out: {pct(loso['median_abs_error'])} on {loso['rows']} rows, "
          f"beyond 50%: {pct(loso['share_beyond_50pct'])}")


if __name__ == "__main__":
    engines_table() if sys.argv[1:] == ["--engines"] else main(sys.argv[1])
