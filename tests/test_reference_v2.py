"""The out-of-sample validation set (issue 10, step 4): llmbench/reference/published_v2.csv, the
architectures it needs (needed_models.csv) and the memory hierarchy per accelerator (memory_hierarchy.csv).

    python -m pytest -q tests/test_reference_v2.py
"""
import csv
from pathlib import Path

import pytest

from llmbench.models import ModelSpec, presets
from llmbench.models.counting import param_count

REF = Path(__file__).resolve().parents[1] / "llmbench" / "reference"
COLUMNS = ("id,source,source_url,where,system,model,task,precision,batch,seq_len,gen_len,devices,"
           "tp,pp,dp,zero,recompute,micro_batch,grad_accum,metric,value,unit,notes,"
           # serving columns (issue 21), at the end so readers by position keep working
           "engine,engine_version,kv_precision,concurrency,request_rate,metric_kind").split(",")
METRICS = {"tokens_per_s", "samples_per_s", "step_time_s", "mfu", "achieved_tflops", "time_to_first_token_s",
           "decode_tokens_per_s_per_seq", "latency_s_p50", "scaling_efficiency", "epoch_time_s", "peak_mem_bytes",
           "time_per_output_token_s"}
# metrics of rows carried over unchanged from published.csv (ratios, trends, Megatron Table 1's TFLOP/s)
LEGACY_METRICS = {"epoch_time_h", "trend", "gas4_over_gas1", "s0.9_over_dense", "speedup_over_1_system",
                  "per_device_speedup", "speedup", "devices_needed"}
# catalog names: llmbench/hardware/catalog plus the ones being added in parallel (issue 10 brief)
SYSTEMS = {p.stem for p in (REF.parent / "hardware" / "catalog").glob("*.toml")} | {
    "a100-40gb", "a100-80gb", "h100-sxm", "h200-sxm", "mi250", "gaudi2", "sn30", "bow-ipu", "cs2", "cs3",
    "b200", "gb200-nvl72", "h100-pcie", "l40s", "mi300x", "mi325x", "gaudi3", "tpu-v5e", "tpu-v5p", "tpu-v6e", "sn40l"}
PRECISIONS = {"fp32", "tf32", "fp16", "bf16", "cbf16", "fp8", "fp4"}
INT_COLUMNS = ("batch", "seq_len", "gen_len", "devices", "tp", "pp", "dp", "zero", "micro_batch", "grad_accum",
               "concurrency")


def _read(name: str) -> list[dict]:
    with (REF / name).open(newline="") as f:
        return list(csv.DictReader(f))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


ROWS = _read("published_v2.csv")
NUMERIC = [r for r in ROWS if _is_number(r["value"])]
NEEDED = {r["name"]: r for r in _read("needed_models.csv")}


def test_columns_in_order():
    with (REF / "published_v2.csv").open(newline="") as f:
        assert next(csv.reader(f)) == COLUMNS


def test_every_row_names_its_source_and_workload():
    for r in ROWS:
        for col in ("id", "source", "source_url", "system", "model", "task", "metric", "value"):
            assert r[col].strip(), f"{r['id']}: empty {col}"
        assert r["source_url"].startswith("https://"), r["id"]
        assert r["task"] in ("train", "infer"), r["id"]


def test_ids_unique():
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids))


def test_coverage_targets_of_issue_10():
    assert len(NUMERIC) >= 80
    assert len({r["source"] for r in NUMERIC}) >= 15
    assert len({r["system"] for r in NUMERIC if r["system"] in SYSTEMS}) >= 9
    assert {r["task"] for r in NUMERIC} == {"train", "infer"}


def test_metric_names():
    for r in ROWS:
        assert r["metric"] in METRICS | LEGACY_METRICS, f"{r['id']}: metric {r['metric']!r}"


def test_new_rows_use_the_new_metric_names():
    old = {r["id"] for r in _read("published.csv")}
    for r in NUMERIC:
        if r["id"] not in old:
            assert r["metric"] in METRICS, r["id"]


def test_every_published_row_is_carried_over_unchanged():
    mine = {r["id"]: r for r in ROWS}
    for r in _read("published.csv"):
        assert r["id"] in mine
        for col in ("system", "model", "task", "metric", "value"):
            assert mine[r["id"]][col] == r[col], (r["id"], col)
        assert mine[r["id"]]["notes"].startswith(r["notes"]), r["id"]  # kept; conversions may append


def test_systems_are_catalog_names():
    for r in NUMERIC:  # legacy ratio rows compare two systems: "sn30 vs a100-40gb"
        for part in r["system"].split(" vs "):
            assert part.split("x ")[-1] in SYSTEMS, f"{r['id']}: system {r['system']!r}"


def test_models_are_presets_or_listed_in_needed_models():
    known = set(presets()) | set(NEEDED)
    for r in NUMERIC:
        assert r["model"] in known, f"{r['id']}: model {r['model']!r}"


def test_layout_columns_are_well_formed():
    for r in NUMERIC:
        for col in INT_COLUMNS:
            if r[col] != "":
                assert r[col].isdigit() and int(r[col]) >= 0, f"{r['id']}: {col}={r[col]!r}"
        assert r["zero"] in ("", "0", "1", "2", "3"), r["id"]
        assert r["recompute"] in ("", "none", "selective", "full"), r["id"]
        assert r["precision"] in PRECISIONS | {""}, r["id"]
        if r["task"] == "infer":
            assert r["zero"] == r["recompute"] == r["grad_accum"] == "", r["id"]


def test_layout_multiplies_out_to_devices_and_batch():
    for r in NUMERIC:
        tp, pp, dp, dev = (int(r[c]) if r[c] else None for c in ("tp", "pp", "dp", "devices"))
        if None not in (tp, pp, dp, dev):  # context parallelism makes tp*pp*dp a divisor of devices
            assert dev % (tp * pp * dp) == 0, r["id"]
        mb, ga, b = (int(r[c]) if r[c] else None for c in ("micro_batch", "grad_accum", "batch"))
        if None not in (mb, ga, dp, b):
            assert mb * ga * dp == b, f"{r['id']}: {mb} x {ga} x {dp} != {b}"


def test_needed_models_build_and_cite_a_source():
    for name, r in NEEDED.items():
        assert r["source"].strip(), name
        spec = ModelSpec(name=name, family=r["family"], n_layers=int(r["n_layers"]), d_model=int(r["d_model"]),
                         n_heads=int(r["n_heads"]), n_kv_heads=int(r["n_kv_heads"]), d_ff=int(r["d_ff"]),
                         vocab_size=int(r["vocab_size"]), max_seq_len=int(r["max_seq_len"]),
                         activation=r["activation"], norm=r["norm"], position=r["position"],
                         tied_embeddings=r["tied_embeddings"] == "true")
        assert param_count(spec) > 0
        assert int(r["moe_experts"]) == int(r["moe_top_k"]) == 0
        # the presets added for these rows (models/presets/{mpt,megatron_core,maxtext}.toml) agree
        pre = presets()[name]  # (biases are the preset's: MaxText's Llama-2 decoder has none)
        for f in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "activation", "norm",
                  "position", "tied_embeddings"):
            assert getattr(pre, f) == getattr(spec, f), (name, f)


@pytest.mark.parametrize("name, seq, num_params", [
    ("mpt-7b", 2048, 6_658_859_008),     # llm-foundry benchmarking README, NumParams column
    ("mpt-70b", 2048, 64_862_437_376),
    ("mpt-1b", 8192, 1_328_533_504),     # learned position table sized to the run's seq_len
])
def test_mpt_shapes_reproduce_the_published_param_counts(name, seq, num_params):
    r = NEEDED[name]
    spec = ModelSpec(name=name, family="gpt", n_layers=int(r["n_layers"]), d_model=int(r["d_model"]),
                     n_heads=int(r["n_heads"]), vocab_size=int(r["vocab_size"]), max_seq_len=seq)
    assert param_count(spec) == num_params


def test_memory_hierarchy_rows_are_sourced():
    rows = _read("memory_hierarchy.csv")
    assert {"sn30", "bow-ipu", "cs2", "cs3", "h100-sxm", "a100-80gb", "h200-sxm", "mi250", "gaudi2"} <= {
        r["system"] for r in rows}
    for r in rows:
        assert r["system"] in SYSTEMS and r["tier"] and r["holds"] and r["source"].strip(), r
        for col in ("capacity_bytes", "bandwidth_bytes_per_s"):
            assert r[col] == "" or r[col].isdigit(), (r["system"], r["tier"], col)


# --- serving rows (issue 21, build item 4) ---------------------------------------------------------------
SERVING = [r for r in NUMERIC if r["task"] == "infer"]
ENGINES = {"trtllm", "vllm", "sglang", "tgi", "jetstream", "nim", "deepspeed-mii", "gpt-fast", "cerebras", "optimum-habana",
           "sambaflow", "synapseai", "llama.cpp", "saxml", "lmdeploy"}
#: unit of each serving metric: a row's number means nothing without it
SERVING_UNITS = {"tokens_per_s": "tokens/s", "decode_tokens_per_s_per_seq": "tokens/s", "time_to_first_token_s": "s",
                 "latency_s_p50": "s", "devices_needed": "count", "time_per_output_token_s": "s",
                 "samples_per_s": "samples/s"}


def serving_problems(rows: list[dict]) -> list[str]:
    """Every serving row names its engine, model, hardware, metric with its unit, and a source URL;
    a precision it states is a known one (the weights' precision, or the KV cache's)."""
    out = []
    for r in rows:
        for col in ("engine", "model", "system", "metric", "unit", "source_url", "where"):
            if not r[col].strip():
                out.append(f"{r['id']}: empty {col}")
        if r["engine"] and r["engine"] not in ENGINES:
            out.append(f"{r['id']}: engine {r['engine']!r}")
        if SERVING_UNITS.get(r["metric"]) != r["unit"]:
            out.append(f"{r['id']}: metric {r['metric']} in {r['unit']!r}")
        if r["kv_precision"] not in PRECISIONS | {""}:
            out.append(f"{r['id']}: kv_precision {r['kv_precision']!r}")
    return out


def test_every_serving_row_names_engine_model_hardware_metric_unit_and_url():
    assert serving_problems(SERVING) == []


def test_the_serving_check_catches_a_bad_row():
    good = dict(SERVING[0])
    assert serving_problems([good]) == []
    for col, bad in (("engine", ""), ("engine", "magic"), ("unit", "ms"), ("source_url", ""), ("kv_precision", "int3")):
        assert serving_problems([{**good, col: bad}]), (col, bad)


def test_serving_coverage_of_issue_21():
    assert len(SERVING) >= 85  # 45 rows before issue 21, >= 40 added
    assert len({r["source"] for r in SERVING}) >= 18  # 8 sources before, >= 10 added
    systems = {r["system"] for r in SERVING}
    assert {"a100-80gb", "h100-sxm", "h200-sxm", "b200", "mi300x", "gaudi2", "gaudi3", "cs3", "sn40l"} <= systems
    assert len({r["engine"] for r in SERVING}) >= 6
    # batch 1 through saturation, with batch-1 decode on A100 and H100
    assert any(r["batch"] == "1" and r["system"] == "a100-80gb" and r["metric"] == "decode_tokens_per_s_per_seq"
               for r in SERVING)
    assert any(r["batch"] == "1" and r["system"] == "h100-sxm" for r in SERVING)
    assert max(int(r["batch"]) for r in SERVING if r["batch"]) >= 256


def test_serving_rows_state_a_concurrency_that_matches_the_batch():
    for r in SERVING:
        if r["concurrency"] and r["batch"]:
            assert r["concurrency"] == r["batch"], r["id"]
        if r["request_rate"]:
            assert float(r["request_rate"]) > 0, r["id"]
