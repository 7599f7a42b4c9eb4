"""Data parallel the SwarmX way: 2 CPU ranks under torchrun (gloo). Every rank's weights are the
same every step, and the losses equal one rank with the same global batch (--batch 4: 2 sequences
per rank on 2 ranks, 4 on one)."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

ARGS = ["--model", "tiny", "--layers", "2", "--seq", "16", "--steps", "4", "--json"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_match_one_rank_with_the_same_global_batch():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(_free_port()), "-m", "llmbench", "stream", "train", *ARGS,
           "--batch", "4", "--check-ranks"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    dp = json.loads(r.stdout)
    assert dp["world_size"] == 2
    # one digest per block per step, on each rank
    assert [len(step) for step in dp["rank_digests"][0]] == [2, 2, 2, 2]
    assert dp["ranks_identical"] and dp["rank_digests"][0] == dp["rank_digests"][1]
    assert len({d for step in dp["rank_digests"][0] for d in step}) == 8  # weights change every step
    from llmbench.streaming.config import workload_and_options as S
    from llmbench.streaming.run import run_train

    one = run_train(*S(model="tiny", layers=2, seq=16, steps=4, batch=4))
    assert dp["loss"] == pytest.approx(one["loss"], rel=1e-5)
    assert dp["loss"] != pytest.approx(run_train(*S(model="tiny", layers=2, seq=16, steps=4,
                                                              batch=2))["loss"], rel=1e-5)


def test_sparse_data_parallel_matches_one_rank_and_reduces_only_kept_gradients():
    """--sparsity with 2 ranks: rank 0 broadcasts the kept values and the bitmask, every rank
    decodes the same mask (digests equal), only the kept gradients are reduced, and the losses
    equal one rank with the same global batch."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(_free_port()), "-m", "llmbench", "stream", "train", *ARGS,
           "--batch", "4", "--sparsity", "0.5", "--check-ranks"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    dp = json.loads(r.stdout)
    assert dp["ranks_identical"] and dp["rank_digests"][0] == dp["rank_digests"][1]
    from llmbench.streaming.config import workload_and_options as S
    from llmbench.streaming.run import run_train

    one = run_train(*S(model="tiny", layers=2, seq=16, steps=4, batch=4, sparsity=0.5))
    dense = run_train(*S(model="tiny", layers=2, seq=16, steps=1, batch=4))
    assert dp["loss"] == pytest.approx(one["loss"], rel=1e-5)
    assert dp["grad_bytes_out_per_step"] == one["grad_bytes_out_per_step"]
    assert dp["grad_bytes_out_per_step"] < 0.6 * dense["grad_bytes_out_per_step"]
