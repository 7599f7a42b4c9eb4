"""Pipelined SRAM-resident inference (llmbench/streaming/pipeline.py): the tokens of 1, 2 and 4
stages (gloo, one process per stage) equal single-process greedy decoding with a KV cache; each
stage allocates exactly the weights and KV cache of its plan; a budget is checked before anything
is allocated.

The model is a tiny Llama shape (rotary positions, so the cache offsets matter; untied LM head, so
greedy decoding does not just echo its input token as a random tied GPT does)."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from llmbench.errors import BadInput
from llmbench.streaming.config import PipelineConfig
from llmbench.streaming.pipeline import spec_of
from llmbench.streaming.pipeline import reference_generate, run_pipeline
from llmbench.streaming.pipeplan import (
    check_fits, head_layers_of, max_batch_x_context, plan_stages, stage_layers)

LLAMA = dict(model="llama-2-7b", layers=4, width=64, heads=4, vocab=256, batch=4, prompt_len=8,
             gen_len=6, warmup_runs=0)


def _cli_args(kw: dict) -> list[str]:
    return [a for k, v in kw.items() for a in (f"--{k.replace('_', '-')}", str(v))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reference():
    return reference_generate(PipelineConfig(**LLAMA))


def test_one_stage_equals_reference_and_its_plan(reference):
    out = run_pipeline(PipelineConfig(**LLAMA))
    assert out["tokens"] == reference
    assert len({t for row in reference for t in row}) > 8  # not an echo of one token per row
    s = out["stage_memory"][0]
    assert s["weight_bytes"] == s["planned_weight_bytes"] == out["params"] * 4
    assert s["kv_cache_bytes"] == s["planned_kv_cache_bytes"] == out["kv_cache_bytes_per_token"] * 4 * 14
    assert out["time_to_first_token_s"] > 0 and out["decode_tokens_per_s"] > 0


@pytest.mark.parametrize("stages", [2, 4])
def test_pipelined_tokens_equal_single_process_greedy_decoding(stages, reference):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(stages),
           "--master-port", str(_free_port()), "-m", "llmbench", "stream", "infer",
           *_cli_args(LLAMA), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["stages"] == out["micro_batches"] == stages
    assert out["tokens"] == reference
    layers = [s["layers"] for s in out["stage_memory"]]
    head = head_layers_of(spec_of(PipelineConfig(**LLAMA), 14), "decode")
    assert layers == [[r.start, r.stop] for r in stage_layers(4, stages, head)]
    for s in out["stage_memory"]:
        assert s["weight_bytes"] == s["planned_weight_bytes"]
        assert s["kv_cache_bytes"] == s["planned_kv_cache_bytes"]
    # only the first stage holds the embeddings, only the last the LM head (untied)
    assert sum(s["weight_bytes"] for s in out["stage_memory"]) == out["params"] * 4


def test_tied_gpt_one_stage_shares_the_token_matrix():
    out = run_pipeline(PipelineConfig(model="tiny", layers=2, batch=2, prompt_len=4, gen_len=2,
                                      warmup_runs=0))
    s = out["stage_memory"][0]
    assert s["weight_bytes"] == s["planned_weight_bytes"] == out["params"] * 4


def test_plan_tied_last_stage_keeps_its_own_token_matrix_and_the_budget():
    spec = spec_of(PipelineConfig(model="tiny"), 24)
    one = plan_stages(spec, stages=1, micro_batch=4, micro_batches=1, context=24, precision="fp32")
    two = plan_stages(spec, stages=2, micro_batch=2, micro_batches=2, context=24, precision="fp32")
    V, d = spec.vocab_size, spec.d_model
    assert sum(p.weight_bytes for p in two) == one[0].weight_bytes + V * d * 4
    assert sum(p.kv_cache_bytes for p in two) == one[0].kv_cache_bytes
    budget = max(p.total_bytes for p in two)
    tight = min(two, key=lambda p: (budget - p.weight_bytes - p.activation_bytes) // p.kv_cache_bytes_per_token)
    assert tight.rank == 0  # the first stage holds the position table too
    assert max_batch_x_context(two, budget) == \
        (budget - tight.weight_bytes - tight.activation_bytes) // tight.kv_cache_bytes_per_token
    check_fits(two, budget)
    with pytest.raises(BadInput, match="stage 0 needs .* over --stage-memory-budget"):
        check_fits(two, budget - 1)
    with pytest.raises(BadInput, match="at most one stage per layer"):
        stage_layers(2, 3)


def test_layer_split_even_or_balanced_for_the_lm_head():
    assert [len(r) for r in stage_layers(7, 3)] == [3, 2, 2]
    assert [len(r) for r in stage_layers(5, 3)] == [2, 2, 1]
    gpt2 = spec_of(PipelineConfig(model="gpt2-small"), 160)
    head = head_layers_of(gpt2, "decode")  # 50,257 x 768 weights: 5.4 layers of GPT-2 small
    assert 5.4 < head < 5.5 and head_layers_of(gpt2, "layers") == 0
    assert [len(r) for r in stage_layers(12, 2, head)] == [9, 3]
    assert [len(r) for r in stage_layers(12, 4, head)] == [4, 4, 3, 1]


def test_budget_is_refused_before_allocation():
    with pytest.raises(BadInput, match="does not fit: stage 0"):
        run_pipeline(PipelineConfig(**{**LLAMA, "stage_memory_budget_bytes": 100_000}))
