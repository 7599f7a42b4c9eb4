"""Leave-one-source-out validation and the pooled fit (perfmodel/pooled.py), the published_v2 rows
as Workloads (stated layout columns constrain the planner), profiles under $LLMBENCH_HOME, and the
low-precision GEMM mechanism. Fast: the full run is `llmbench validate` (docs/predict.md)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.perfmodel import pooled
from llmbench.perfmodel import validate as V
from llmbench.published import PUBLISHED_V2_CSV, published_rows
from llmbench.perfmodel.params import load_profile, resolve_params
from llmbench.perfmodel.train import predict_train
from llmbench.point import Workload


def _linear(hws, sources, J, delta):
    """A Linear whose rows are off by exactly -J @ delta (what the fit must undo)."""
    names = list(pooled.SIGMA)
    priors = {h: resolve_params(get_hardware(h), use_profile=False) for h in set(hws)}
    r0 = -(J @ np.array([delta.get(k, 0.0) for k in names]))
    return pooled.Linear(ids=[f"r{i}" for i in range(len(hws))], sources=sources, hardware=hws, r0=r0, J=J,
                         priors=priors)


def test_pooled_fit_moves_the_parameter_the_rows_need():
    n = 12
    J = np.zeros((n, len(pooled.SIGMA)))
    J[:, 0] = -1.0  # log prediction falls as compute_max rises (time ~ 1 / efficiency)
    lin = _linear(["h100-sxm"] * 6 + ["a100-80gb"] * 6, ["s1"] * 6 + ["s2"] * 6, J, {"compute_max": 0.2})
    fit, _ = pooled.solve(lin, np.ones(n, dtype=bool))
    for h in ("h100-sxm", "a100-80gb"):  # the rows say: e^0.2 = 22% more efficient than the prior
        ratio = fit[h]["compute_max"] / lin.priors[h]["compute_max"]
        assert 1.15 < ratio < 1.23  # the ridge prior shrinks a little


def test_a_held_out_hardware_takes_its_kinds_fit():
    n = 12
    J = np.zeros((n, len(pooled.SIGMA)))
    J[:, 0] = -1.0
    lin = _linear(["h100-sxm"] * 6 + ["gaudi2"] * 6, ["gpu-src"] * 6 + ["hpu-src"] * 6, J, {"compute_max": 0.3})
    full, folds = pooled.folds(lin)
    # without its only source, gaudi2 keeps the shared part learnt on the GPU rows, no more
    held = folds["hpu-src"]["gaudi2"]["compute_max"] / lin.priors["gaudi2"]["compute_max"]
    own = full["gaudi2"]["compute_max"] / lin.priors["gaudi2"]["compute_max"]
    assert 1.0 < held < own
    assert folds["gpu-src"]["h100-sxm"] != full["h100-sxm"]


def test_huber_keeps_one_wild_row_from_dragging_the_fit():
    n = 10
    J = np.zeros((n, len(pooled.SIGMA)))
    J[:, 0] = -1.0
    lin = _linear(["h100-sxm"] * n, ["s"] * n, J, {})
    lin.r0[0] = 3.0  # one row 20x off
    fit, _ = pooled.solve(lin, np.ones(n, dtype=bool))
    assert abs(np.log(fit["h100-sxm"]["compute_max"] / lin.priors["h100-sxm"]["compute_max"])) < 0.1


def _row(rid):
    return next(r for r in published_rows(PUBLISHED_V2_CSV) if r["id"] == rid)


def test_stated_layout_constrains_the_planner_and_open_knobs_are_planned():
    # NeMo 24.07 Llama 2 70B on 64 H100: TP4 PP4, micro-batch 1 stated
    w = V.planned("t1", V.row_workload(_row("nemo2407-llama2-70b-g64")))
    assert (w.layout.tp, w.layout.pp, w.micro_batch) == (4, 4, 1)
    # Gaudi 2 Llama 2 70B: no layout on the page: the planner picks one that fits
    w = V.planned("t2", V.row_workload(_row("gaudi2-llama2-70b-train")))
    assert None not in (w.layout.tp, w.layout.pp, w.layout.zero, w.layout.recompute, w.micro_batch)
    assert predict_train(V.row_spec(w), get_hardware(w.hardware), w).fits
    # Llama 3.1 405B (126 layers) on pp 8: Megatron counts embedding and loss as stages' layers
    assert V.predict_row(_row("mbridge2511-h100-sxm-llama-3.1-405b-g1024")) > 0


def test_fp8_gain_is_below_the_datasheet_2x():
    spec, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    w = Workload(model="llama-3.1-8b", hardware="h100-sxm", batch=16, seq_len=8192, devices=8,
                 layout={"tp": 1, "pp": 1, "zero": 3, "recompute": "selective"}, micro_batch=2)
    # the torchtitan run's layout ran (published_v2 tt-h100-8b-*): no memory reserve here
    p = resolve_params(hw, {"memory_fraction": 1.0})
    t = {pr: predict_train(spec, hw, w.with_(precision=pr), p).tokens_per_s for pr in ("bf16", "fp8")}
    assert 1.05 < t["fp8"] / t["bf16"] < 1.7  # torchtitan measured 1.48x (published_v2 tt-h100-8b-*)


def test_fp4_serving_is_predicted():
    assert V.predict_row(_row("trtllm-b200-llama-3.1-70b-tp1-128-2048")) > 0


def test_profiles_read_from_llmbench_home_first(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("LLMBENCH_PROFILES", raising=False)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "h100-sxm.json").write_text(json.dumps({"params": {"compute_max": 0.123}}))
    load_profile.cache_clear()
    try:
        assert resolve_params(get_hardware("h100-sxm"))["compute_max"] == 0.123
    finally:
        load_profile.cache_clear()


def test_calibrate_from_an_odd_db_path(tmp_path, monkeypatch):
    from llmbench.perfmodel import calibrate as cal
    from llmbench.results.store import ResultsDB

    monkeypatch.chdir(tmp_path)
    db = ResultsDB("a?b.db")
    for b in (8, 16, 32):
        w = Workload(model="gpt2-small", hardware="h100-sxm", batch=b, seq_len=1024, devices=1, precision="bf16")
        db.record(w, source="measured", metrics={"samples_per_s": 50.0 * b})
    pts, skipped = cal.read_points("a?b.db", "h100-sxm")
    assert len(pts) == 3 and skipped == [] and (tmp_path / "a?b.db").exists()


def test_unfused_attention_costs_small_models_more_than_large():
    # Megatron-LM 2021 (arXiv:2104.04473) ran attention unfused: the T x T scores pass through memory,
    # which costs a 1.7B model (hidden 2304) far more of its step than a 145.6B one (hidden 12288)
    from llmbench.perfmodel.frameworks import framework_of, overlay

    assert framework_of("arXiv:2104.04473 (Narayanan et al. 2021)") == "megatron-2021"
    assert overlay("mosaicml/llm-foundry MPT training benchmarks") == {}  # fused attention: the default
    assert overlay("pytorch/torchtitan performance docs") == {"loss_bytes_per_logit": 14.0}  # its fp32 loss
    hw = get_hardware("a100-80gb")
    slow = {}
    for model, tp, pp in (("megatron-1.7b", 1, 1), ("megatron-145.6b", 8, 8)):
        w = Workload(model=model, hardware=hw.name, batch=512, seq_len=2048, devices=64 * tp * pp // 8,
                     precision="fp16", layout={"tp": tp, "pp": pp, "zero": 0, "recompute": "full"}, micro_batch=1)
        p = resolve_params(hw, use_profile=False)
        t = [predict_train(get_model(model), hw, w, {**p, "attn_score_passes": n}).step_time_s for n in (0.0, 6.0)]
        slow[model] = t[1] / t[0]
    assert slow["megatron-1.7b"] > 1.1 and slow["megatron-1.7b"] > 2 * (slow["megatron-145.6b"] - 1) + 1


def test_without_sequence_parallelism_every_tp_rank_repeats_the_norms():
    # Megatron-LM 2021 predates sequence parallelism (arXiv:2205.05198): each TP rank runs the layer
    # norms and residual adds on the whole hidden state, so their time does not fall with TP. The
    # step grows by exactly those bytes x (1 - 1/tp), nothing at TP 1, and more at TP 8 than TP 2
    from llmbench.perfmodel.frameworks import FRAMEWORKS
    from llmbench.perfmodel.memory import hierarchy
    from llmbench.perfmodel.shapes import shape

    assert FRAMEWORKS["megatron-2021"]["sequence_parallel"] == 0.0
    hw = get_hardware("a100-80gb")
    p = resolve_params(hw, use_profile=False)
    sh = shape(get_model("megatron-18.4b"), "fp16")
    assert 0 < sh.ew_rep_bytes_tok < sh.ew_bytes_tok
    extra = {}
    for tp in (1, 2, 8):
        w = Workload(model="megatron-18.4b", hardware=hw.name, batch=64, seq_len=2048, devices=8 * tp,
                     precision="fp16", layout={"tp": tp, "pp": 1, "zero": 0, "recompute": "full"},
                     micro_batch=1)
        t = [predict_train(get_model("megatron-18.4b"), hw, w, {**p, "sequence_parallel": sp}).step_time_s
             for sp in (1.0, 0.0)]
        extra[tp] = t[1] - t[0]
    # 8 micro-batches of 2048 tokens, 40 layers, forward + recompute + 2 x backward passes, at the
    # device memory's bandwidth x the memory efficiency (the bandwidth step.predict_train uses)
    bw = hierarchy(hw).working_bytes_per_s * p["memory"]
    want = 8 * 2048 * 40 * 4 * sh.ew_rep_bytes_tok * (1 - 1 / 8) / bw
    assert extra[1] == pytest.approx(0.0, abs=1e-9) and extra[8] == pytest.approx(want, rel=1e-6)
    assert 0 < extra[2] < extra[8]


def test_shipped_profiles_are_the_fresh_pooled_fit():
    # `llmbench calibrate --published --write-shipped` (make profiles) wrote them: a refit of
    # published_v2.csv must give the same parameters and the same leave-one-source-out residuals;
    # after an edit of the rows or the model this fails until the profiles are regenerated
    from llmbench.perfmodel import calibrate as cal
    from llmbench.perfmodel.params import ENGINE_FIT_FILE, PROFILE_DIR, RESIDUALS_FILE, SIDE_FILES

    reports = cal.calibrate_published(write=False)
    fresh = {r["hardware"]: r for r in reports if "hardware" in r}
    shipped = {f.stem: json.loads(f.read_text()) for f in PROFILE_DIR.glob("*.json")
               if f.name not in SIDE_FILES}
    engines = next(r["engines"] for r in reports if "engines" in r)
    shipped_engines = json.loads((PROFILE_DIR / ENGINE_FIT_FILE).read_text())["engines"]
    assert set(shipped_engines) == set(engines), "run `make profiles`"
    for name, e in engines.items():
        assert shipped_engines[name]["params"] == pytest.approx(e["params"], rel=1e-6), name
    assert set(shipped) == set(fresh), "run `make profiles` (llmbench calibrate --published --write-shipped)"
    for h, rep in fresh.items():
        assert set(shipped[h]["params"]) == set(rep["params"]), h
        for k, v in rep["params"].items():
            assert np.isclose(shipped[h]["params"][k], v, rtol=1e-6), (h, k, shipped[h]["params"][k], v)
        assert shipped[h]["point_ids"] == rep["point_ids"]
    pts, lin, _, by_source = V.pooled_fit()
    loso = cal.loso_errors(pts, lin, by_source)
    res = json.loads((PROFILE_DIR / RESIDUALS_FILE).read_text())["rows"]
    assert {r["id"]: r["loso_error"] for r in res} == pytest.approx({k: v for k, v in loso.items() if v is not None})


def test_project_and_validate_give_the_same_pile_epoch(cli):
    # the CS-2 GPT-3 20B Pile epoch (arXiv:2409.00287): `project` (shipped profile, planner) and
    # `validate` (the in-sample pooled fit) are one calibration, so one number (issue 20: 7,428 h vs 5,151 h)
    code, out, err = cli("project", "--model", "gpt3-20b", "--hardware", "cs2", "--dataset", "pile", "--batch", "256",
                         "--seq", "2048", "--precision", "cbf16", "--json")
    assert code == 0, err
    row = _row("cs2-gpt3-20b-pile-epoch")
    assert json.loads(out)["hours"] == pytest.approx(V.predict_row(row), rel=1e-9)
    pts, lin, fitted, _ = V.pooled_fit()
    assert V.predict_row(row, pooled.full(lin, fitted)) == pytest.approx(V.predict_row(row), rel=1e-9)


def test_a_rows_stated_kv_cache_precision_is_what_it_is_predicted_with(monkeypatch):
    """AMD's MLPerf v4.1 server row states an FP8 KV cache (Quark w_fp8_a_fp8_o_fp8): it is
    predicted with it, not with the engine's default 16-bit cache; the row with the column blank
    falls back to that default. At one fixed batch the stated cache is half the bytes."""
    row = _row("mlperf41-amd-8xmi300x-server-tpot")
    assert row["kv_precision"] == "fp8"
    seen, infer = [], V._infer
    monkeypatch.setattr(V, "_infer", lambda *a, **k: seen.append(k.get("kv")) or infer(*a, **k))
    V.predict_row(row)
    V.predict_row({**row, "kv_precision": ""})
    assert seen and seen[0] == "fp8" and seen[-1] is None, seen
    monkeypatch.undo()
    w = V.serving_workload(V.row_workload(row), row).with_(batch=64)
    fp8, default = (V._infer(w, None, eng="vllm-rocm", kv=kv) for kv in ("fp8", None))
    assert fp8.kv_precision == "fp8" and default.kv_precision == "bf16"
    assert fp8.kv_cache_bytes == pytest.approx(default.kv_cache_bytes / 2, rel=1e-6)


def test_predict_serves_with_the_engines_validate_fitted(cli):
    # the shipped engine fit (profiles/engines.json, make profiles) is what predict runs: the same
    # number as validate's in-sample fit for a row whose engine the fit moved most (vLLM's ROCm
    # build: 0.40 of the bandwidth and 6.3 ms a step against its priors' 0.70 and 1 ms); before it
    # shipped, predict printed 10.6 s where validate validated 25.8 s
    row = _row("amdperf-mi300x-70b-tp8-b1-latency")
    code, out, err = cli("predict", "infer", "--model", "llama-3.1-70b", "--hardware", "mi300x", "--devices", "8",
                         "--tp", "8", "--batch", "1", "--seq", "128", "--gen-len", "2048", "--precision", "fp8",
                         "--kv-precision", "fp8", "--json")
    assert code == 0, err
    pts, lin, fitted, _ = V.pooled_fit()
    in_sample = V.predict_row(row, pooled.full(lin, fitted))
    assert json.loads(out)["latency_s_p50"] == pytest.approx(in_sample, rel=1e-9)
    # and every serving row as shipped (no params) is its in-sample prediction
    full = pooled.full(lin, fitted)
    for r in published_rows(PUBLISHED_V2_CSV):
        if r["task"] == "infer" and V.predict_row(r, full) is not None:
            assert V.predict_row(r) == pytest.approx(V.predict_row(r, full), rel=1e-9), r["id"]


def test_a_bad_engine_fit_file_is_one_line(cli, tmp_path, monkeypatch):
    from llmbench.perfmodel import serving

    (tmp_path / "engines.json").write_text(json.dumps({"engines": {"vllm": {"params": {"step_overhead_s": -1}}}}))
    monkeypatch.setenv("LLMBENCH_PROFILES", str(tmp_path))
    serving._load_engines.cache_clear()
    code, out, err = cli("predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "vllm")
    serving._load_engines.cache_clear()
    serving.read_engine_fit.cache_clear()
    assert code == 2 and "engines.vllm.params.step_overhead_s" in err and len(err.strip().splitlines()) == 1, err
