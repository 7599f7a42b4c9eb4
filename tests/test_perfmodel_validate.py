"""The model against published numbers (llmbench/reference/published.csv), calibration, and the CLI.

Tolerances (docs/predict.md): Megatron Table 1 (arXiv:2104.04473) hw TFLOP/s with full recompute
and the table's TP/PP, mean abs error <= 5%; every other numeric row within 25% except KNOWN_MISSES,
which docs/predict.md explains one by one; trend rows pass except KNOWN_FAILING_TRENDS.
"""
from __future__ import annotations

import json
import sqlite3

import pytest

from llmbench.errors import BadInput
from llmbench.perfmodel import calibrate as cal
from llmbench.perfmodel.params import PARAMS, PROFILE_DIR, SIDE_FILES, defaults
from llmbench.perfmodel.validate import TOL_NUMERIC, predict_row, run
from llmbench.point import Workload

KNOWN_MISSES = {
    "cs2-bert-large-8192",        # inconsistent with the ALCF logs at 512-2048 under one efficiency curve
    "cs2-gpt3-20b-pile-epoch",    # implies 18% MFU where BERT-large reaches 40%+ on the same wafer
    "emani-sparsity-6.7b",        # model: 2.7x (GPT-2 XL 1.8x, 30B 3.1x): the trend holds, this point is high
    "emani-genslm-sn30",          # 5.7x per device: beyond any peak ratio of the two datasheets
    "emani-genslm-cs2",           # 19x one CS-2 over eight A100: same
    "gaudi2-llama2-70b-train",    # 2 Gaudi2 points only: priors, not fitted
}
#: on the planner's layouts (the micro-batch that fits the SRAM, gradient accumulation for the rest):
#: no mechanism makes BERT-base fall after 2048, and BERT-large's samples/s level off from the
#: micro-batch cap at 2048 instead of rising to 8192 (fidelity 000-3, 000-5)
KNOWN_FAILING_TRENDS = {"cs2-bert-trend-base", "cs2-bert-large-rising"}


@pytest.fixture(scope="module")
def result():
    return run(loso=False)  # raw predictions (shipped profiles); the pooled fit: test_validate_loso.py


#: issue 20's goal for Megatron Table 1 under the shipped (pooled) fit: mean |error| <= 5%. Met since
#: 2026-12-05 at 2.7% in-sample (3.1% with the paper held out) by a mechanism, not a fit: Megatron-LM
#: 2021 had no sequence parallelism, so every TP rank repeats the norms and residual adds (frameworks.py);
#: before it 5.3%, the error rising with tp (tp 1: -7%, tp 8: +5%). A regression past 5% fails here
MEGATRON_GUARD = 0.05


def test_megatron_table1_mean_error_guard(result):
    rows = [r for r in result["rows"] if r["id"].startswith("megatron-t1")]
    assert len(rows) == 10
    mae = sum(abs(r["error"]) for r in rows) / len(rows)
    assert mae <= MEGATRON_GUARD, mae


#: published configurations the memory rules still refuse (docs/predict.md, "Validation"): torchtitan's
#: per-op selective recompute keeps less than Megatron's selective rule; MaxText's Llama-3.1-70B on 256
#: v6e offloads its decoder-layer inputs (offload "activations"), yet its fp32 logits and the layer
#: rebuilt in its backward exceed the chip (its 405B sibling is predicted since offload "activations")
KNOWN_REFUSED = {"tt-a100-llama2-70b-ac-op", "tpurecipes-v6e-llama31-70b"} | {
    # serving rows (issue 21) whose run happened but that the model refuses: the source states no device count
    # (validate then places the model on one device) or, for DeepSeek on 16 SN40L, the DDR tier is not modelled;
    # issue 21 item 3 is to answer them, after which this set shrinks
    "cerebras-toms-405b-tokens-per-s-per-user", "sambanova-blog-llama-3.1-405b-tokens-per-s-per-user",
    "sambanova-blog-llama-3.1-70b-tokens-per-s-per-user", "sambanova-dac25-deepseek-r1-16xsn40l"}
LEGACY = ("cs2-", "alcf-", "emani-", "megatron-t1-", "cerebras-", "gaudi2-llama2-70b")


def test_numeric_rows_within_tolerance(result):
    rows = result["rows"]
    assert len(rows) >= 150
    refused = {r["id"] for r in rows if r["predicted"] is None and not r["skipped"]}  # skipped: a metric not predicted yet
    assert refused <= KNOWN_REFUSED, f"newly refused: {refused - KNOWN_REFUSED}"
    legacy = [r for r in rows if r["id"].startswith(LEGACY) and r["error"] is not None]
    bad = {r["id"] for r in legacy if abs(r["error"]) > TOL_NUMERIC}
    # the rows of published.csv with the shipped profiles: most within 25% (the layout is now the
    # planner's where a row leaves it open, which moves the CS-2 BERT rows)
    assert len(bad) <= len(KNOWN_MISSES) + 4, f"misses: {sorted(bad)}"


def test_trends(result):
    failed = {t["id"] for t in result["trends"] if not t["passed"]}
    assert failed <= KNOWN_FAILING_TRENDS, failed
    assert {t["id"] for t in result["trends"]} >= {"cs2-bert-trend-base", "cs2-bert-trend-infer", "cs2-roofline",
                                                   "cs2-bert-large-rising"}


def test_trends_run_on_the_layouts_the_planner_says_fit():
    """A trend on a layout the planner refuses would report a second, contradicting figure for the
    same workload (audit 2026-12-03, 000-5: micro-batch = batch on a CS-2 that cannot hold it)."""
    from llmbench.perfmodel.trends import _cs2

    for model, batch in (("bert-large", 8192), ("bert-base", 8192)):
        r = _cs2(model, batch, 128, None)
        assert r.fits and r.workload.micro_batch < batch


def test_published_trends_of_numeric_rows(result):
    by = {r["id"]: r["predicted"] for r in result["rows"]}
    # GAS gains: A100 at micro-batch 1 gains far more than MI250 at micro-batch 16 (Fig. 6)
    assert by["emani-gas-a100"] > by["emani-gas-mi250"] >= 1.0
    # sparsity speed-up grows with model size on CS-2 (Fig. 7)
    assert by["emani-sparsity-gpt2xl"] < by["emani-sparsity-6.7b"] < by["emani-sparsity-30b"]
    assert by["cerebras-infer-70b-wafers"] == 4


def test_shipped_profiles_parse():
    files = sorted(f for f in PROFILE_DIR.glob("*.json") if f.name not in SIDE_FILES)
    assert files
    for f in files:
        prof = json.loads(f.read_text())
        assert set(prof["params"]) <= set(PARAMS) and prof["hardware"] == f.stem
        assert prof["points"] == len(prof["point_ids"]) and prof["sources"]
    # that they are the fresh pooled fit (calibrate --published --write-shipped): test_validate_loso.py


SYNTH = [("gpt3-1.3b", 16, 2048, 8, 1), ("gpt3-2.7b", 32, 2048, 16, 2), ("gpt3-6.7b", 64, 2048, 32, 4),
         ("gpt3-125m", 8, 1024, 1, 1), ("gpt3-350m", 64, 2048, 8, 1), ("gpt3-13b", 128, 2048, 64, 8)]


def _synthetic_points(truth: dict):
    """Points whose values the model gives under `truth`: what calibration must recover."""
    pts = []
    for i, (model, batch, seq, dev, tp) in enumerate(SYNTH):
        w = Workload(model=model, hardware="h100-sxm", batch=batch, seq_len=seq, precision="bf16", devices=dev,
                     layout={"tp": tp, "recompute": "full"})
        pt = {"id": f"p{i}", "workload": w, "metric": "samples_per_s"}
        v = cal.predict_user_point(pt, {"h100-sxm": truth})
        pts.append(pt | {"range": (v, v), "value": v})
    return pts


def _rows(pts):
    """The points as CSV/JSON rows in the published vocabulary."""
    return [{"model": p["workload"].model, "batch": p["workload"].batch, "seq_len": p["workload"].seq_len,
             "precision": "bf16", "devices": p["workload"].devices, "metric": p["metric"], "value": p["value"],
             "tp": p["workload"].layout.tp, "recompute": "full"} for p in pts]


def test_calibration_recovers_known_parameters(tmp_path):
    truth = defaults("gpu") | {"compute_max": 0.55, "compute_half_dim": 400.0}
    pts = _synthetic_points(truth)
    rep = cal.calibrate_points("h100-sxm", pts, cal.predict_user_point)
    assert rep["status"] == "fitted" and rep["fit_mean_abs_error"] < 0.01
    assert rep["loo_mean_abs_error"] < 0.02
    if "compute_max" in rep["params"]:
        assert rep["params"]["compute_max"] == pytest.approx(0.55, rel=0.05)
    too_few = cal.calibrate_points("h100-sxm", pts[:2], cal.predict_user_point)
    assert too_few["params"] == {} and "too few" in too_few["status"]


def test_calibrate_from_csv_and_a_foreign_sqlite(tmp_path):
    pts = _synthetic_points(defaults("gpu") | {"compute_max": 0.5})
    rows = _rows(pts)
    cols = list(rows[0])
    csv_path = tmp_path / "runs.csv"
    lines = [",".join(cols)] + [",".join(str(r[c]) for c in cols) for r in rows] + ["nonsense,x,,,,,,,"]
    csv_path.write_text("\n".join(lines) + "\n")
    rep, skipped = cal.calibrate_from(str(csv_path), "h100-sxm")
    assert skipped == 1 and rep["points"] == len(pts) and rep["fit_mean_abs_error"] < 0.02
    db = tmp_path / "other.db"  # a SQLite file that is not a llmbench results store: one line, no traceback
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE results (id TEXT, config TEXT)")
    con.commit()
    con.close()
    with pytest.raises(BadInput, match="not an llmbench results database"):
        cal.calibrate_from(str(db), "h100-sxm")
    with pytest.raises(ValueError):
        cal.calibrate_from(str(tmp_path / "missing.csv"), "h100-sxm")


def test_predict_row_is_none_for_trend_rows():
    assert predict_row({"id": "x", "metric": "trend", "system": "cs2", "model": "bert-base", "precision": "",
                        "seq_len": "", "devices": "", "batch": "", "notes": "", "value": "peaks"}) is None


# ---------------------------------------------------------------- CLI


def test_cli_predict_train_json(cli):
    code, out, _ = cli("predict", "train", "--model", "gpt2-small", "--hardware", "a100-80gb", "--batch", "16",
                       "--seq", "1024", "--devices", "2", "--json")
    d = json.loads(out)
    assert code == 0 and d["workload"]["devices"] == 2 and set(d["breakdown_s"]) == {"compute", "memory", "network", "stream",
                                                                         "optimizer", "exposed"}


def test_cli_infer_project_validate(cli):
    code, out, _ = cli("predict", "infer", "--model", "llama-3.1-70b", "--hardware", "cs3", "--batch", "1",
                       "--prompt-len", "128", "--gen-len", "64", "--json")
    assert code == 0 and json.loads(out)["workload"]["devices"] == 4 and json.loads(out)["mode"] == "sram_pipeline"
    code, out, _ = cli("project", "--model", "bert-large", "--hardware", "cs2", "--dataset", "sst2",
                       "--batch", "8192", "--seq", "128", "--precision", "cbf16", "--json")
    d = json.loads(out)
    assert code == 0 and d["seconds"] == pytest.approx(67_349 / d["samples_per_s"])
    # `llmbench validate` (the full leave-one-source-out run): test_validate_loso.py on a subset


@pytest.mark.parametrize("args, needle", [
    (["predict", "train", "--model", "llama-2-70b", "--hardware", "a100-80gb", "--batch", "8", "--seq", "4096"],
     "fits no layout"),
    (["predict", "train", "--model", "gpt2-small", "--hardware", "nope-9000", "--batch", "8", "--seq", "128"],
     "unknown hardware"),
    (["predict", "train", "--model", "gpt2-small", "--hardware", "a100-80gb", "--batch", "8", "--seq", "128",
      "--tp", "5", "--devices", "5"], "tp 5"),
    (["project", "--model", "gpt2-small", "--hardware", "a100-80gb", "--dataset", "wiki", "--batch", "8",
      "--seq", "128"], "unknown dataset"),
    (["calibrate"], "exactly one"),
    (["predict", "train", "--model", "gpt2-small", "--hardware", "a100-80gb", "--batch", "8", "--seq", "128",
      "--precision", "fp8"], "no fp8 peak"),
    (["predict", "infer", "--model", "bert-base", "--hardware", "a100-80gb", "--gen-len", "4"], "encoder"),
    (["predict", "train", "--model", "gpt2-small", "--hardware", "a100-80gb", "--batch", "8"], "--seq"),
])
def test_cli_bad_input_one_line_exit_2(cli, args, needle):
    code, out, err = cli(*args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_cli_validate_json_keys(cli, monkeypatch):
    from llmbench.perfmodel import validate as V

    few = [pt for pt in V.fit_points() if pt["source"].startswith(("arXiv:2104", "AI-Hypercomputer"))]
    monkeypatch.setattr(V, "fit_points", lambda: few)  # a fast subset fit (the full one: ~15 s)
    code, out, _ = cli("validate", "--json")
    d = json.loads(out)
    assert code == 0 and {"rows", "summary", "trends", "numeric_within_tolerance", "megatron_mean_abs_error",
                          "tolerances"} <= set(d)
    assert {"id", "system", "metric", "published", "predicted", "error", "assumption", "in_sample_error",
            "loso_error", "loso_predicted"} <= set(d["rows"][0])
    assert {"median_abs_error", "share_beyond_50pct", "rows"} <= set(d["leave_one_source_out"])


def test_cli_calibrate_from_writes_a_profile(tmp_path, cli, monkeypatch):
    pts = _synthetic_points(defaults("gpu") | {"compute_max": 0.6})
    src = tmp_path / "runs.json"
    src.write_text(json.dumps(_rows(pts)))
    out = tmp_path / "prof" / "h100-sxm.json"
    out.parent.mkdir()
    code, text, err = cli("calibrate", "--hardware", "h100-sxm", "--from", str(src), "--out", str(out), "--json")
    assert code == 0, err
    rep = json.loads(text)[0]
    assert rep["points"] == len(pts) and out.exists() and rep["params"]
    # the written profile is picked up through LLMBENCH_PROFILES
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.params import load_profile, resolve_params
    monkeypatch.setenv("LLMBENCH_PROFILES", str(out.parent))
    load_profile.cache_clear()
    try:
        p = resolve_params(get_hardware("h100-sxm"))
        for k, v in rep["params"].items():
            assert p[k] == pytest.approx(v)
    finally:
        monkeypatch.delenv("LLMBENCH_PROFILES")
        load_profile.cache_clear()


def test_calibrate_from_the_results_store(tmp_path):
    # rows as `llmbench measure` records them (the Workload's dict, global batch, a shrunk model),
    # other suites and old-style points mixed in: calibration reads them through ResultsDB and
    # Workload.from_row and predicts the same shrunk model at the same global batch
    from llmbench.results.store import ResultsDB

    truth = defaults("gpu") | {"compute_max": 0.5}
    db = tmp_path / "r.db"
    resize = {"n_layers": 4, "d_model": 512, "n_heads": 8, "n_kv_heads": 8, "d_ff": 2048}
    with ResultsDB(db) as store:
        for i, (mb, seq, ga, dev) in enumerate([(2, 128, 1, 1), (4, 256, 2, 1), (8, 512, 1, 2),
                                                (16, 1024, 4, 1), (2, 2048, 1, 8), (32, 128, 1, 1)]):
            w = Workload(model="gpt3-1.3b", hardware="h100-sxm", batch=mb * ga * dev, seq_len=seq, grad_accum=ga,
                         devices=dev, precision="bf16", resize=resize)
            v = cal.predict_user_point({"workload": w, "metric": "tokens_per_s"}, {"h100-sxm": truth})
            store.record(w.to_dict(), metrics={"tokens_per_s": v, "peak_mem_bytes": 1.0})
        store.record(Workload(model="gpt3-1.3b", hardware="h100-sxm", suite="infer").to_dict(),
                     metrics={"tokens_per_s": 1.0})  # decode tokens/s: not a training point
        store.record({"suite": "train", "model": "gpt3-1.3b", "hardware": "h100-sxm", "seq": 128},
                     metrics={"tokens_per_s": 1.0})  # an old-style point: skipped, not guessed
    rep, skipped = cal.calibrate_from(str(db), "h100-sxm")
    assert rep["points"] == 6 and skipped == 2
    assert rep["fit_mean_abs_error"] < 0.02


def test_calibrate_from_skips_rows_with_their_reason(tmp_path):
    """A row without batch or seq_len is not fitted as 1 x 1024, a value of inf is not 'math domain
    error', a row the model cannot lay out does not stop the fit: each is skipped with its reason."""
    pts = _synthetic_points(defaults("gpu") | {"compute_max": 0.5})
    rows = _rows(pts)
    bad = [{**rows[0], "batch": ""}, {**rows[0], "seq_len": ""}, {**rows[0], "value": "inf"},
           {**rows[0], "value": "nan"}, {**rows[0], "devices": 3, "tp": 3}]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(rows + bad))
    rep, skipped = cal.calibrate_from(str(path), "h100-sxm")
    reasons = [s["reason"] for s in rep["skipped"]]
    assert skipped == 5 and rep["points"] == len(pts), reasons
    assert "no batch" in reasons[0] and "no seq_len" in reasons[1]
    assert "not a finite positive number" in reasons[2] and "not a finite positive number" in reasons[3]
    assert reasons[4].startswith("not predictable"), reasons[4]


def test_every_serving_metric_is_predicted_tpot_as_the_decode_step():
    row = {"id": "x", "task": "infer", "metric": "time_per_output_token_s", "value": "0.02", "system": "h100-sxm",
           "model": "llama-3.1-8b", "batch": "1", "seq_len": "128", "gen_len": "128", "devices": "1",
           "engine": "vllm"}
    from llmbench.perfmodel.validate import skip_reason

    tpot = predict_row(row)
    per_user = predict_row({**row, "metric": "decode_tokens_per_s_per_seq"})
    assert skip_reason(row) == "" and tpot == pytest.approx(1.0 / per_user)
    assert predict_row({**row, "engine": "trtllm"}) != pytest.approx(tpot)  # the row's engine is used
    rps = predict_row({**row, "metric": "samples_per_s", "batch": "8"})
    tps = predict_row({**row, "metric": "tokens_per_s", "batch": "8"})
    assert rps == pytest.approx(tps / 128)


def _published_all():
    from llmbench.published import PUBLISHED_V2_CSV, published_rows

    return published_rows(PUBLISHED_V2_CSV)


def _published(rid):
    return next(r for r in _published_all() if r["id"] == rid)


def test_a_server_under_load_adds_the_step_in_flight_to_ttft():
    """MLPerf server-scenario TTFT (p50 under the load): the request waits out the decode step in
    flight (half a step at the median), then its prefill runs beside the running batch's decodes
    (TensorRT-LLM mixes them: 1.5 steps in all). The bare prefill of an idle server is far under
    both NVIDIA rows; with the step in flight the H200 row comes within 35% (held out of nothing:
    the step is the row's own predicted TPOT at its concurrency, no TTFT row fits it). The B200
    row's step stays short: at the published rate Little's law gives a concurrency far below
    what ran (its TPOT row is 94% under with the dataset's 222-token prompts), so only the
    ordering is checked there."""
    from llmbench.perfmodel import validate as V

    for rid, pub, tol in (("mlperf41-nv-8xh200-server-ttft", 0.1808, 0.35),
                          ("mlperf50-google-8xb200-server-ttft", 0.2278, None)):
        row = _published(rid)
        loaded = V.predict_row(row)
        idle = V.predict_row({**row, "metric_kind": "time to first token, one request"})
        assert idle < 0.2 * pub, (rid, idle)  # an idle server's prefill alone: far under
        assert tol is None or abs(loaded / pub - 1) <= tol, (rid, loaded)
        assert loaded > idle


def test_ttft_under_load_is_half_a_step_then_the_prefill_step():
    """The arithmetic of validate._ttft_open on a scripted engine: 0.5 step + prefill for an engine
    that prefills in steps of their own, 1.5 steps + prefill for one that mixes prompts into the
    decode steps, the prefill alone for an idle server."""
    from types import SimpleNamespace as NS

    from llmbench.perfmodel import validate as V

    w = Workload(model="llama-2-70b", hardware="h200-sxm", suite="infer", batch=1, seq_len=512, gen_len=292)

    def infer(w, offline=False):
        return NS(time_to_first_token_s=0.03, decode_tokens_per_s_per_seq=10.0)  # a 0.1 s decode step

    for eng, mixed in (("trtllm", True), ("native", False)):
        got = V._ttft_open(w, {}, None, infer, eng, None, None, 0.0, server=True)
        assert (V.row_engine_params(eng, None).chunked_prefill_tokens > 0) is mixed
        assert got == pytest.approx(0.03 + 0.1 * (1.5 if mixed else 0.5))
    assert V._ttft_open(w, {}, None, infer, "trtllm", None, None, 0.0, server=False) == pytest.approx(0.03)


def test_torchtitan_memory_rows_need_its_loss_and_a_16_bit_checkpoint():
    """torchtitan's H100 page (Table 1: 8B FSDP, 82.4 GiB; Table 4: 70B 2D Float8 with full
    recompute, 71.9 GiB). Its loss upcasts the logits to fp32 (frameworks.FRAMEWORKS
    'torchtitan', 14 bytes per logit), and under Float8 the layer input a full recompute keeps
    is still the bf16 residual stream. Both rows within 30% out of sample (validate's LOSO:
    +20% and -25%); with Megatron's 4-byte loss and an fp8 checkpoint the 70B row was 67% under."""
    from llmbench.perfmodel import frameworks as F
    from llmbench.perfmodel import validate as V

    for rid in ("tt-h100-8b-g8-fsdp-mem", "tt-h100-70b-g256-2d-fp8-mem"):
        row = _published(rid)
        assert abs(V.predict_row(row) / float(row["value"]) - 1) <= 0.30, rid
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.params import resolve_params

    # --framework torchtitan hands the same override to the CLI's parameters (it was refused as unknown)
    assert resolve_params(get_hardware("h100-sxm"), F.FRAMEWORKS["torchtitan"])["loss_bytes_per_logit"] == 14.0
    row = _published("tt-h100-70b-g256-2d-fp8-mem")
    saved = F.FRAMEWORKS.pop("torchtitan")
    try:  # the check fails without the mechanism
        assert V.predict_row(row) / float(row["value"]) - 1 < -0.40
    finally:
        F.FRAMEWORKS["torchtitan"] = saved


def test_torchtitan_pipeline_splits_a_local_batch_into_pp_microbatches():
    """Table 5 (405B, PP 8 1F1B, local batch 32) at torchtitan's default of pp microbatches
    (micro-batch 4 x 8: the row's columns, torchtitan@9dec370 pipelining_utils.py): 100 TPS/GPU
    published, within 25%; the planner's own choice (micro-batch 1 x 32, a smaller bubble) is
    more than 50% over it."""
    from llmbench.perfmodel import validate as V

    row = _published("tt-h100-405b-g512-3d-fp8")
    assert (row["micro_batch"], row["grad_accum"]) == ("4", "8")
    pub = float(row["value"])
    assert abs(V.predict_row(row) / pub - 1) <= 0.25
    assert V.predict_row({**row, "micro_batch": "", "grad_accum": ""}) / pub - 1 > 0.5


def test_nvidia_b200_mlperf_llama2_runs_fp4():
    """NVIDIA's B200 llama2-70b submissions quantise to FP4 (v4.1: Tom's Hardware's report of the
    results; the result files do not say): the v4.1 one-B200 rows state fp4, the v5.0 8x B200 rows
    (Google, the same TensorRT-LLM harness) assume it, and the prediction runs it: the offline rows
    at least 1.3x their fp8 prediction (B200's measured NVFP4 GEMM is 3.04 / 2.23 = 1.36x its FP8
    one, params.HARDWARE_PRIORS). With Blackwell's measured fp8 gain as its prior the fp4 offline
    rows come to +10% and -2% held out (they were +42% and +29% on the GPUs' shared gain)."""
    from llmbench.perfmodel import validate as V

    assert _published("mlperf41-nv-1xb200-offline")["precision"] == "fp4"
    for rid in ("mlperf41-nv-1xb200-offline", "mlperf50-google-8xb200-offline"):
        row = _published(rid)
        a = V.ASSUME.get(rid, {})
        as_fp4 = V.predict_row(row)
        V.ASSUME[rid] = {**a, "precision": "fp8"}
        try:
            as_fp8 = V.predict_row({**row, "precision": "fp8"})
        finally:
            V.ASSUME[rid] = a
        assert as_fp4 > 1.3 * as_fp8, (rid, as_fp4, as_fp8)


def test_server_concurrency_solves_littles_law():
    """validate.server_batch: the concurrency c a server-scenario row runs at solves
    c = rate x latency(c) (to within one replica's step of the integer grid), near saturation
    where the fixed-point iteration converges slowly: the one-B200 server row at the first rate
    from 40 requests/s up, in steps of 5 (its published 39.6 is far from saturation with the
    dataset's 222-token prompts), where 8 rounds stop more than 5% short, as the old cap did."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel import validate as V
    from llmbench.perfmodel.infer import predict_infer
    from llmbench.perfmodel.params import resolve_params
    from llmbench.perfmodel.serving import engine

    row = _published("mlperf41-nv-1xb200-server")
    w = V.serving_workload(V.row_workload(row), row)
    h = get_hardware(w.hardware)
    saved = dict(V._SERVER)
    try:
        for rate in range(40, 130, 5):
            V._SERVER.clear()  # memoised by workload and rate, not by iters
            c = V.server_batch(w, float(rate), "trtllm")
            V._SERVER.clear()
            if V.server_batch(w, float(rate), "trtllm", iters=8) < 0.95 * c:
                break
        else:
            pytest.fail("8 rounds reach the fixed point at every rate tried")
        r = predict_infer(V.row_spec(w), h, w.with_(batch=c), resolve_params(h, use_profile=False),
                          engine=engine("trtllm", fitted=False))
        assert abs(rate * r.latency_s_p50 - c) <= max(2.0, 0.01 * c), (rate, c, rate * r.latency_s_p50)
    finally:
        V._SERVER.clear()
        V._SERVER.update(saved)


def test_beam_search_prefills_each_prompt_once_and_shares_it():
    """MLPerf v3.1 GPT-J on 4 TPU v5e (Saxml, 4 beams, static batches of 32: the classes its
    README names). Each prompt is prefilled once and its KV cache shared by the 4 beams
    (infer.beam_batch_s): the offline row (9.81 samples/s) comes within 25%; as 4 x 32
    independent sequences, each with its own prompt, it is more than 40% under (it was -63% held
    out). The server row adds half of Saxml's 4 s batch window to one batch's run."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel import validate as V
    from llmbench.perfmodel.infer import beam_batch_s
    from llmbench.perfmodel.serving import step_model

    row = _published("mlperf31-google-4xtpuv5e-gptj-offline")
    pub = float(row["value"])
    assert abs(V.predict_row(row) / pub - 1) <= 0.25
    w = V.serving_workload(V.row_workload(row), row)
    h = get_hardware(w.hardware)
    sm = step_model(V.row_spec(w), h, w, engine=V.row_engine_params(V.row_engine(row, h), None))
    shared = 32 / sum(beam_batch_s(sm, 32, 4, w.seq_len, w.gen_len))
    # every beam its own prompt: 128 sequences do not fit the KV cache at once, two waves of 64
    apart = 32 / (2 * sum(beam_batch_s(sm, 64, 1, w.seq_len, w.gen_len)))
    assert apart / pub - 1 < -0.40 and shared > 1.5 * apart
    with pytest.raises(BadInput, match="KV"):
        beam_batch_s(sm, 4096, 4, w.seq_len, w.gen_len)
    srv = _published("mlperf31-google-4xtpuv5e-gptj-server-p50")
    assert V.predict_row(srv) > 4.0 / 2 + sum(beam_batch_s(sm, 1, 4, w.seq_len, w.gen_len))  # the wait counts


def test_vllm_on_rocm_before_0_8_3_all_reduces_through_rccl():
    """Upstream vLLM kept its custom all-reduce off on AMD GPUs before v0.8.3 (PR #16010): each TP
    all-reduce went through RCCL, ~50 us on 8 MI300X (ROCm/rccl #1562), 25 us a hop
    (serving.RELEASES). LLM-Inference-Bench ran upstream v0.6.1: its 70B batch-1 row at TP 8 comes
    within 30% (-10% in-sample, -25% held out); with the custom all-reduce's latency it is more
    than 30% under (it was -51% held out)."""
    from llmbench.perfmodel import validate as V
    from llmbench.perfmodel.serving import engine, release

    eng = engine("vllm-rocm-upstream")
    assert release(eng, "v0.6.1").collective_latency_s == pytest.approx(25e-6)
    assert release(engine("vllm-rocm"), "v0.6.1").collective_latency_s < 1e-5  # AMD's build had its own
    assert release(eng, "0.8.5").collective_latency_s == eng.collective_latency_s < 1e-5
    row = _published("llminfbench-mi300x-vllm-llama-3.1-70b-x8-b1-128-128")
    pub = float(row["value"])
    assert abs(V.predict_row(row) / pub - 1) <= 0.30
    assert V.predict_row({**row, "engine_version": "0.8.5"}) / pub - 1 < -0.30


def test_sn40l_overlaps_its_collectives_with_the_weight_stream(monkeypatch):
    """SN40L runs its collectives "fused and pipelined with other computations into the same
    kernel" (arXiv:2405.07518 Sec. VII): a decode step takes the longer of its compute/memory and
    its all-reduces, not their sum (serving.COMM_OVERLAPPED_KINDS). LLM-Inference-Bench's Llama-3-8B
    on 8 SN40L at batch 1 (0.2196 s for 128 + 128 tokens) comes within 25%; summing the all-reduces
    puts it more than 40% over (it was +61% held out)."""
    from llmbench.perfmodel import serving
    from llmbench.perfmodel import validate as V

    row = _published("llminfbench-sn40l-sambaflow-llama-3-8b-x8-b1-128-128")
    pub = float(row["value"])
    assert abs(V.predict_row(row) / pub - 1) <= 0.25
    monkeypatch.setattr(serving, "COMM_OVERLAPPED_KINDS", frozenset())
    assert V.predict_row(row) / pub - 1 > 0.40


def test_serving_replicates_kv_heads_when_tp_exceeds_them():
    """Serving engines split 8 KV heads over 16 ranks by replicating each on 2 (vLLM's
    QKVParallelLinear, num_kv_head_replicas); training keeps Megatron's rule (tp divides the KV
    heads). A rank's KV cache per token is then that of tp 8, and SambaNova's 16-socket node
    serves Llama 3.1 70B at tp 16."""
    from llmbench.footprint import kv_bytes_per_token_device
    from llmbench.hardware import get_hardware
    from llmbench.models import get_model
    from llmbench.perfmodel import validate as V
    from llmbench.perfmodel.infer import predict_infer
    from llmbench.perfmodel.plan import check_serving_tp, check_tp_heads, serving_tp_ok

    spec = get_model("llama-3.1-70b")
    assert serving_tp_ok(spec, 16) and serving_tp_ok(spec, 8) and not serving_tp_ok(spec, 3)
    with pytest.raises(BadInput, match="key/value heads"):
        check_serving_tp(get_model("llama-3.1-8b"), 64)  # 32 query heads
    with pytest.raises(BadInput):
        check_tp_heads(spec, 16)
    assert kv_bytes_per_token_device(spec, "bf16", 16) == kv_bytes_per_token_device(spec, "bf16", 8)
    h = get_hardware("sn40l")
    r = predict_infer(spec, h, Workload(model="llama-3.1-70b", hardware="sn40l", suite="infer", batch=1,
                                        seq_len=128, gen_len=128, devices=16).with_(tp=16))
    assert r.workload.layout.tp == 16 and r.fits
    row = _published("sambanova-blog-llama-3.1-70b-tokens-per-s-per-user")
    assert V._infer(V.serving_workload(V.row_workload(row), row).with_(batch=1), None).workload.layout.tp == 16


def test_mlperf_llama2_rows_use_the_datasets_mean_prompt():
    """MLPerf llama2-70b's 24,576 OpenOrca prompts average 222 tokens (per-sample tok_input_length
    of the benchmark's dataset; validate.OPENORCA_PROMPT), where the rows had assumed 512 (half the
    1,024 cap). Every MLPerf llama2-70b row runs it; AMD's 8x MI300X offline row comes within 30%
    (it was 45% under at 512)."""
    from llmbench.perfmodel import validate as V

    ids = [r["id"] for r in _published_all() if r["id"].startswith(("mlperf40-", "mlperf41-", "mlperf50-"))]
    assert len(ids) >= 15
    assert all(V.ASSUME[i]["prompt_len"] == V.OPENORCA_PROMPT == 222 for i in ids)
    rid = "mlperf41-amd-8xmi300x-offline"
    row = _published(rid)
    pub = float(row["value"])
    assert abs(V.predict_row(row) / pub - 1) <= 0.30
    a = V.ASSUME[rid]
    V.ASSUME[rid] = {**a, "prompt_len": 512}
    try:
        assert V.predict_row(row) / pub - 1 < -0.40
    finally:
        V.ASSUME[rid] = a


def test_a_decode_step_pays_a_floor_per_decoder_layer(monkeypatch):
    """Each decoder layer of a step launches 10 kernels whose floor the roofline does not time by
    their bytes (norms, rotary, the KV-cache write, attention, the activation, the GEMMs): ~12 us
    a layer (engines.toml layer_floor_s), so a step's fixed time grows with depth. gpt-fast's
    batch-1 decode of Llama-2-7B at tp 8 on A100 (the published fixed part, ~2.1 ms a token, does
    not shrink with tp) comes within 20%; without the floor the model runs it 10 points faster."""
    from llmbench.hardware import get_hardware
    from llmbench.models import get_model
    from llmbench.perfmodel import serving
    from llmbench.perfmodel import validate as V

    eng = serving.engine("gptfast")
    assert eng.layer_floor_s > 0
    for name in ("llama-2-7b", "llama-2-70b"):
        spec = get_model(name)
        sm = serving.build_step_model(spec, get_hardware("a100-80gb"), precision="bf16", tp=8, eng=eng)
        assert sm.overhead_per_step_s == pytest.approx(eng.step_overhead_s + spec.n_layers * eng.layer_floor_s)
    row = _published("gptfast-a100-llama-2-7b-tp8-b1")
    pub = float(row["value"])
    with_floor = V.predict_row(row) / pub - 1
    assert abs(with_floor) <= 0.20
    monkeypatch.setattr(serving, "_overhead", lambda e, sh, p: (e.step_overhead_s, 0.0))
    monkeypatch.setattr(V, "_BATCHES", {})  # batches chosen without the floor stay in this test
    assert V.predict_row(row) / pub - 1 > with_floor + 0.10


def test_a_decode_step_is_its_kernels_rooflines_one_after_another():
    """A step's kernels run one after another, each at its own roofline: the GEMMs (their FLOPs
    or their weights), then attention (its FLOPs or the KV cache), then the elementwise kernels,
    not one roofline of all the step's FLOPs against all its bytes. At a large fp4 batch on B200
    the GEMMs are compute-bound while attention streams the KV cache, so the two add: TensorRT-LLM's
    Llama 3.3 70B on one B200 at fp4, 128/2048 (9,922 tokens/s) comes within 50%; with one
    roofline for the step the model ran it +66%."""
    import numpy as np

    from llmbench.hardware import get_hardware
    from llmbench.models import get_model
    from llmbench.perfmodel import serving
    from llmbench.perfmodel import validate as V

    sm = serving.build_step_model(get_model("llama-3.1-70b"), get_hardware("b200"), precision="fp4",
                                  eng=serving.engine("trtllm"))
    n, kv = 398.0, 398.0 * 1150
    p = sm.parts(0.0, n, kv, prefill_seqs=0.0, prefill_attn_pairs=0.0)
    assert float(p.time_s) == pytest.approx(float(np.maximum(p.attention_compute_s, p.attention_memory_s)
                                                  + p.other_s + p.comm_s + p.overhead_s))
    one_roofline = float(np.maximum(p.compute_s, p.memory_s) + p.comm_s + p.overhead_s)
    assert float(p.time_s) > 1.2 * one_roofline
    row = _published("trtllm-b200-llama-3.1-70b-tp1-128-2048")
    assert abs(V.predict_row(row) / float(row["value"]) - 1) <= 0.50


def test_a_closed_loop_row_is_simulated_with_its_prompts_landing_in_the_decode_steps(monkeypatch):
    """NIM's AIPerf keeps 50 requests of 5,000 + 500 tokens in flight on 2 H100 (Llama 3.3 70B,
    fp8): each finished request is replaced at once, so its 5,000-token prompt runs in the other
    49's decode steps, and the published mean ITL is 59.7 ms. Simulated as that closed loop
    (validate.CLOSED_LOOP, queueing.sim) it comes within 25%; as one static batch of 50 (every prompt
    first, then 500 decode steps of 50) the model put it at 28 ms, -52%."""
    from llmbench.perfmodel import validate as V

    row = _published("nim-h100-llama-3.3-70b-tp2-5000-500-c50-itl")
    pub = float(row["value"])
    assert V.closed_loop(row) == "steady"
    assert abs(V.predict_row(row) / pub - 1) <= 0.25
    monkeypatch.setattr(V, "CLOSED_LOOP", {})
    assert V.predict_row(row) / pub - 1 < -0.40


def test_a_vllm_bench_closed_loop_row_is_read_over_its_whole_run():
    """GPUStack's `vllm bench serve --max-concurrency 4` on 100 prompts (ASSUME requests): the
    output tokens/s of the whole run, the median TPOT; within 25% of the published 496.9 tokens/s
    and 7.4 ms (Qwen3-8B bf16 on one H100). At their mean lengths the four requests stay in step,
    so this is the static batch's figure: the rows do not give ShareGPT's spread of lengths."""
    from llmbench.perfmodel import validate as V

    for rid in ("gpustack-h100-qwen3-8b-vllm-c4-tput", "gpustack-h100-qwen3-8b-vllm-c4-tpot"):
        row = _published(rid)
        assert V.closed_loop(row) == "run" and V.ASSUME[rid]["requests"] == 100
        assert abs(V.predict_row(row) / float(row["value"]) - 1) <= 0.25, rid


def test_vllm_built_from_the_repository_is_an_engine_apart_from_amds_docker_build():
    """AMD's ROCm vLLM Docker image adds GEMM tuning files and AMD's custom kernels (ROCm docs);
    LLM-Inference-Bench built upstream v0.6.1 from its Dockerfile.rocm. A row whose engine_version
    says upstream runs `vllm-rocm-upstream`, every other vLLM row on an AMD GPU `vllm-rocm`; the
    upstream build's rows see AMD's build's fit and fit their difference from it. AMD's own 0.8.5
    batch-1 latency of Llama 3.1 70B on 8 MI300X (15.85 s for 2,048 tokens) comes within 25% held
    out; fitted together with the upstream build's rows it was +125%."""
    import json

    from llmbench.hardware import get_hardware
    from llmbench.perfmodel import validate as V
    from llmbench.perfmodel.serving import check_runs_on

    mi300x = get_hardware("mi300x")
    assert V.row_engine(_published("llminfbench-mi300x-vllm-llama-3-8b-x1-b1-128-128"), mi300x) == "vllm-rocm-upstream"
    assert V.row_engine(_published("amdperf-mi300x-70b-tp8-b1-latency"), mi300x) == "vllm-rocm"
    assert V.row_engine(_published("oci-mi300x-405b-b1"), mi300x) == "vllm-rocm"  # no build named: AMD's
    with pytest.raises(BadInput):
        check_runs_on("vllm-rocm-upstream", get_hardware("h100-sxm"))
    rows = {r["id"]: r for r in json.loads(json.dumps(V.run()["rows"]))}
    assert abs(rows["amdperf-mi300x-70b-tp8-b1-latency"]["loso_error"]) <= 0.25
    # the upstream build is vllm-rocm's child (engines.toml parent): its rows see AMD's build's fit
    # and fit only their difference, so with its one source left out it runs at AMD's build's fit
    _, _, fitted, folds = V.pooled_fit()
    fold = folds[_published("llminfbench-mi300x-vllm-llama-3-8b-x1-b1-128-128")["source"]]
    for k, v in fold["engine:vllm-rocm"].items():
        assert fold["engine:vllm-rocm-upstream"][k] == pytest.approx(v, rel=1e-9), k
    assert fitted["engine:vllm-rocm-upstream"]["bandwidth_fraction"] < fitted["engine:vllm-rocm"]["bandwidth_fraction"]


def test_vllm_before_v1_runs_at_most_256_sequences_a_step():
    """vLLM's V0 engine (before 0.8.0, when V1 became the default) ran at most max_num_seqs = 256
    sequences a step unless told otherwise (EngineArgs default): an offline run of more prompts runs
    them 256 at a time (serving.RELEASES, Engine.max_num_seqs). Oracle's 405B on 8 MI300X ran
    benchmark_throughput.py in a post of 2024-10-10, before V1 (engine_version "<0.8"): its 128/128
    throughput, 1,993 tokens/s, sits 8% above its own batch-256 latency run (1,846), and the model
    gives the two the same figure; its 128/2048 throughput (2,794) comes within 25%, and without the
    cap (the KV cache's batch) more than 25% over (+35% in sample; it was +58% held out). A release
    stated as "<X.Y" is one before X.Y."""
    from llmbench.perfmodel import validate as V
    from llmbench.perfmodel.serving import engine, release

    from llmbench.queueing.sim import engine_scheduler

    # V1 the default from 0.8.0 on CUDA, from 0.9.1 on ROCm (opt-in and experimental through 0.9.0)
    for name, v1 in (("vllm", "0.8.0"), ("vllm-rocm", "0.9.1"), ("vllm-rocm-upstream", "0.9.1")):
        eng = engine(name)
        assert eng.max_num_seqs is None  # V1: the KV cache (or the client) binds first
        for v in ("0.6.1", "v0.7.3", "V0.7.3", "<0.8", "<0.8 (V0: the post predates the V1 engine)",
                  f"{v1}rc1", f"<{v1}"):
            assert release(eng, v).max_num_seqs == 256, (name, v)
        for v in (v1, "v0.11.0", "not stated", None):
            assert release(eng, v).max_num_seqs is None, (name, v)
        assert release(eng, "0.6.1; max_num_seqs=3200").max_num_seqs == 3200  # a cap the run set
        assert release(eng, "not stated; max_num_seqs=64").max_num_seqs == 64
    assert release(engine("vllm-rocm"), "0.8.5").max_num_seqs == 256
    up = engine("vllm-rocm-upstream")
    assert release(up, "<0.8.3").collective_latency_s == pytest.approx(25e-6)  # before 0.8.3: RCCL
    assert release(up, "0.8.3rc1").collective_latency_s == pytest.approx(25e-6)
    assert release(up, "0.8.3").collective_latency_s < 1e-5
    assert release(engine("trtllm"), "<0.8").gqa_decode_kernel is False
    assert engine_scheduler(release(engine("vllm"), "0.6.1; max_num_seqs=3200")).max_num_seqs == 3200
    assert engine_scheduler(release(engine("vllm"), "0.6.1"), max_num_seqs=64).max_num_seqs == 64  # told otherwise
    tput, b256 = _published("oci-mi300x-405b-tput-128-128"), _published("oci-mi300x-405b-b256")
    assert V.predict_row(tput) == pytest.approx(V.predict_row(b256), rel=1e-6)
    row = _published("oci-mi300x-405b-tput-128-2048")
    pub = float(row["value"])
    assert abs(V.predict_row(row) / pub - 1) <= 0.25
    assert V.predict_row({**row, "engine_version": "not stated"}) / pub - 1 > 0.25


def test_vllm_v1_starts_with_its_defaults_for_the_device():
    """vLLM V1's server defaults depend on the GPU (vllm/engine/arg_utils.py get_batch_defaults):
    1,024 sequences and 8,192 tokens a step on one of 70 GiB or more that is not an A100, 256 and
    2,048 elsewhere. A release before V1 keeps V0's 256, a run's stated cap stands, other engines
    are untouched, and `llmbench serve` starts from them unless told otherwise."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.serving import engine, release, resolve_engine
    from llmbench.queueing.sim import engine_scheduler
    from llmbench.serve.config import Deployment, Load
    from llmbench.serve.run import replica, scheduler

    got = {h: resolve_engine("vllm", get_hardware(h))
           for h in ("h100-sxm", "h200-sxm", "mi300x", "a100-80gb", "l40s", "mi250")}
    assert {h: (e.max_num_seqs, e.chunked_prefill_tokens) for h, e in got.items()} == {
        "h100-sxm": (1024, 8192), "h200-sxm": (1024, 8192), "mi300x": (1024, 8192),
        "a100-80gb": (256, 2048), "l40s": (256, 2048), "mi250": (256, 2048)}  # vLLM sees one 64 GiB GCD
    h100 = get_hardware("h100-sxm")
    assert resolve_engine(release(engine("vllm"), "0.6.1"), h100).max_num_seqs == 256  # V0
    assert resolve_engine(release(engine("vllm"), "v0.11.0; max_num_seqs=64"), h100).max_num_seqs == 64
    assert resolve_engine("trtllm", h100) == engine("trtllm")
    d = Deployment(model="llama-3.1-8b", hardware="h100-sxm", engine="vllm")
    assert scheduler(d, replica(d, 2048), Load()).max_num_seqs == 1024
    d = Deployment(model="llama-3.1-8b", hardware="a100-80gb", engine="vllm", max_num_seqs=512)
    s = scheduler(d, replica(d, 2048), Load())
    assert s.max_num_seqs == 512 and s.max_batched_tokens == 2048
    assert engine_scheduler(engine("sglang")).max_num_seqs == 256  # no cap of its own: the Scheduler's


def test_a_thousand_requests_sent_at_once_are_one_closed_loop_run():
    """GPUStack's DeepSeek-R1 rows ran `vllm bench serve --num-prompts 1000` with no rate and no
    --max-concurrency: all 1,000 requests in flight at once (the page prints 'Peak concurrent
    requests: 1000'), output tokens over the whole run. They are simulated as that closed loop
    (CLOSED_LOOP "run": every prompt's prefill and the drain counted), not as the engine's best
    static batch, which gives more tokens/s."""
    from llmbench.perfmodel import validate as V

    row = _published("gpustack-8xh200-deepseek-r1-sglang-sharegpt")
    assert V.closed_loop(row) == "run" and int(row["concurrency"]) == 1000
    assert V.ASSUME[row["id"]]["requests"] == 1000
    assert V.predict_row(row) < 0.9 * V.predict_row({**row, "concurrency": ""})


def test_a_batch_no_layout_holds_goes_to_the_layout_that_serves_most():
    """When no split of the devices holds the whole batch (the KV cache, or a release's cap on
    sequences at once), the rest queue, and the layout chosen is the one that serves the most
    tokens/s, not the fastest step: 1,024 requests to vLLM 0.6.1 (256 sequences per replica) on 2
    H100 run on two tp-1 replicas (512 at once), not one tp-2 replica (256)."""
    from llmbench.hardware import get_hardware
    from llmbench.models import get_model
    from llmbench.perfmodel import predict_infer
    from llmbench.perfmodel.serving import engine, release

    eng = release(engine("vllm"), "0.6.1")
    w = Workload(model="llama-3.1-8b", suite="infer", hardware="h100-sxm", precision="bf16", devices=2,
                 batch=1024, seq_len=128, gen_len=128)
    spec, h = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    r = predict_infer(spec, h, w, engine=eng)
    assert (r.workload.layout.tp, r.concurrency) == (1, 512) and "256 sequences" in r.note
    tp2 = predict_infer(spec, h, w.with_(tp=2), engine=eng)
    assert tp2.concurrency == 256 and tp2.tokens_per_s < r.tokens_per_s


def test_a_wafers_ratio_rows_run_on_the_layouts_its_software_chooses():
    """On a Cerebras wafer the software stack sets the gradient accumulation for the best
    throughput (arXiv:2310.04607 Sec. V-B3): Fig. 7's sparsity ratios run on the planner's layout,
    which fits the SRAM, not all 112 sequences in one micro-batch, which does not."""
    from llmbench.hardware import get_hardware
    from llmbench.perfmodel.validate import PUBLISHED_V2_CSV, _train, row_workload, vendor_chooses_layout
    from llmbench.published import published_rows

    assert vendor_chooses_layout(get_hardware("cs2")) and not vendor_chooses_layout(get_hardware("a100-40gb"))
    rows = {r["id"]: r for r in published_rows(PUBLISHED_V2_CSV)}
    for rid in ("emani-sparsity-gpt2xl", "emani-sparsity-6.7b", "emani-sparsity-30b"):
        w = row_workload(rows[rid])
        assert w.micro_batch is None and w.layout.recompute is None  # left to the planner
        for s in (0.0, 0.9):
            r = _train(w.with_(sparsity=s), None)
            assert r.fits and r.workload.micro_batch < w.batch, (rid, r.workload)
