"""benchmarks/predict_vs_peers.py: which published rows each peer can express, and the mapping of a
row to each peer's inputs (checked with a stub peer: no network, no Calculon, no llm-analysis needed
except in the one test that runs it)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from llmbench.models import get_model
from llmbench.models.counting import training_flops
from llmbench.perfmodel import validate as V
from llmbench.published import PUBLISHED_V2_CSV, published_rows

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "predict_vs_peers.py"


@pytest.fixture(scope="module")
def P():
    spec = importlib.util.spec_from_file_location("predict_vs_peers", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def row(rid: str) -> dict:
    return next(r for r in published_rows(PUBLISHED_V2_CSV) if r["id"] == rid)


def test_megatron_row_maps_to_its_stated_layout(P):
    r = row("megatron-t1-145.6b")
    assert P.expressible(r, "llm-analysis") == "" and P.expressible(r, "calculon") == ""
    c = P.case_of(r)
    assert (c.kind, c.batch, c.seq_len, c.devices, c.tp, c.pp, c.recompute) == \
        ("training", 2304, 2048, 1536, 8, 8, "full")
    assert c.micro_batch == 1 and c.precision == "fp16" and c.approx == ()
    # achieved TFLOP/s per token/s: the executed (full-recompute) FLOPs per token over the GPUs
    spec = get_model("megatron-145.6b")
    per_token = training_flops(spec, 2304, 2048, "full")["hardware"] / (2304 * 2048)
    assert c.per_token_s == pytest.approx(per_token / 1536 / 1e12, rel=0.02)
    exe = P.calculon_exe(c)
    assert (exe["tensor_par"], exe["pipeline_par"], exe["data_par"]) == (8, 8, 24)
    assert (exe["tensor_par_net"], exe["pipeline_par_net"], exe["data_par_net"]) == (0, 1, 1)
    assert exe["activation_recompute"] == "full" and exe["datatype"] == "float16"
    assert exe["batch_size"] == 2304 and exe["microbatch_size"] == 1


def test_llama_row_calculon_approximations_and_fsdp(P):
    r = row("tt-h100-8b-g8-fsdp")
    c = P.case_of(r)
    assert c.zero == 3 and c.recompute == "selective" and c.tp == 1 and c.devices == 8
    assert set(c.approx) == {"swiglu", "gqa"}
    app = P.calculon_app(c)
    assert app["feedforward"] == 14336 * 3 // 2 and app["attn_heads"] * app["attn_size"] == 4096
    assert app["num_blocks"] == 32 and app["seq_size"] == 8192
    assert P.expressible(r, "llm-analysis") == ""
    assert "FSDP" in P.expressible(r, "calculon")
    assert c.per_token_s == 1.0  # a tokens/s row needs no conversion
    # an 8-GPU data-parallel run stays on the NVLink tier
    small = P.case_of(row("nemo2407-llama3-8b-g8"))
    exe = P.calculon_exe(small)
    assert exe["data_par"] == small.devices // (small.tp * small.pp) and exe["data_par_net"] == 0


def test_rows_out_of_reach_are_not_expressible(P):
    assert "no shipped" in P.expressible(row("trainy-h200-8b-n4"), "llm-analysis")
    assert "no shipped" in P.expressible(row("gaudi2-llama2-7b-train"), "calculon")
    assert "throughput" in P.expressible(row("tt-h100-8b-g8-fsdp-mem"), "llm-analysis")
    assert "ratio" in P.expressible(row("emani-genslm-sn30"), "llm-analysis")
    serve = row("trtllm-h100-sxm-llama-3.1-8b-tp1-128-128")
    assert P.expressible(serve, "llm-analysis") == ""
    assert "training only" in P.expressible(serve, "calculon")
    c = P.case_of(serve)
    assert (c.kind, c.batch, c.tp, c.seq_len, c.gen_len, c.precision) == ("serving", None, 1, 128, 128, "fp8")


def test_stub_peer_records_and_table(P, monkeypatch):
    ids = {"megatron-t1-145.6b", "llmf-h100-sxm-mpt-7b-s2048-g8", "trtllm-h100-sxm-llama-3.1-8b-tp1-128-128"}
    pub = {i: float(row(i)["value"]) for i in ids}
    monkeypatch.setattr(P, "peer_value", lambda peer, c, d: (pub[c.row_id] * (1.1 if peer == "llm-analysis" else 0.4), ""))
    loso = [{"id": i, "loso_predicted": pub[i] * 0.95} for i in ids]
    recs = P.compare(loso, {"llm-analysis": "", "calculon": ""}, None, only=ids)
    # Calculon: the MPT row is FSDP (ZeRO-3) and the serving row is out of its reach
    assert sorted((r["peer"], r["id"]) for r in recs) == sorted(
        [("llm-analysis", i) for i in ids] + [("calculon", "megatron-t1-145.6b")])
    for r in recs:
        assert r["peer_error"] == pytest.approx(0.1 if r["peer"] == "llm-analysis" else -0.6)
        assert r["llmbench_error"] == pytest.approx(-0.05)
    g = {(x["peer"], x["kind"]): x for x in P.table(recs)}
    tr = g[("llm-analysis", "training")]
    assert (tr["expressible"], tr["compared"], tr["llmbench_better_rows"], tr["llmbench_ahead"]) == (2, 2, 2, True)
    assert g[("llm-analysis", "serving")]["compared"] == 1
    cal = g[("calculon", "training")]
    assert cal["peer_beyond_50pct"] == 1 and cal["llmbench_beyond_50pct"] == 0


def test_llm_analysis_runs_one_row(P):
    pytest.importorskip("llm_analysis.analysis")
    P._quiet_lla()
    r = row("megatron-t1-145.6b")
    v = P.llm_analysis_value(P.case_of(r))
    assert 50 < v < 312  # TFLOP/s per A100: a real step time at efficiency 0.5, under the fp16 peak


def test_absent_peers_are_skipped_with_a_line(P, tmp_path):
    got = P.available(str(tmp_path))  # an empty folder is no Calculon checkout
    assert "skipped" in got["calculon"] and "calculon-search" not in got
    assert "skipped" in P.available(None, search=True)["calculon-search"]
    ids = {"megatron-t1-145.6b"}
    recs = P.compare([], {"llm-analysis": "not installed: skipped", "calculon": got["calculon"]}, None, only=ids)
    assert recs == []
