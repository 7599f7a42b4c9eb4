"""`measure train --layout auto` (llmbench/measure/auto.py): the planner's fastest layout that fits
the devices' memory, among the layouts measure runs; then measured beside predicted."""
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from llmbench.errors import BadInput
from llmbench.hardware import get_hardware
from llmbench.measure.auto import MEASURABLE, _search, runnable
from llmbench.point import Workload

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.json"  # 4 heads: tp 1, 2 and 4 divide it
    p.write_text(json.dumps({"model_type": "gpt2", "_name_or_path": "tiny-gpt2", "n_layer": 2, "n_embd": 64,
                             "n_head": 4, "vocab_size": 256, "n_positions": 128}))
    return str(p)


def sized(hw, capacity_bytes: float):
    mem = hw.device_memory
    tiers = tuple(replace(t, capacity_bytes=capacity_bytes) if t is mem else t for t in hw.memory_tiers)
    return replace(hw, memory_tiers=tiers)


def test_auto_picks_the_fastest_measurable_layout_that_fits_the_memory(tiny):
    w = Workload(model=tiny, hardware="cpu", precision="fp32", devices=2, batch=4, seq_len=32).with_(**MEASURABLE)
    hw = get_hardware("cpu")
    roomy = _search(w, hw, hw.device_memory.capacity_bytes, "catalog")
    assert roomy["searched"] == roomy["fit"] > 10  # tp 1 and 2, ZeRO 0-3, 3 recomputes, micro-batch 1 or 2
    assert roomy["recompute"] == "none"  # nothing to save: recomputing only costs time
    # less memory than that layout's predicted peak: a leaner one (more sharding or recompute) is chosen
    tight = roomy["predicted_peak_mem_bytes"] * 0.75
    # a device of tight + 2 GiB: under the memory reserve (perfmodel/reserve.py: capacity - max(2 GiB,
    # 5%)) a layout may fill exactly `tight`
    lean = _search(w, sized(hw, tight + 2**31), tight, "test")
    assert lean["predicted_peak_mem_bytes"] <= tight < roomy["predicted_peak_mem_bytes"]
    assert lean["predicted_step_time_s"] >= roomy["predicted_step_time_s"]
    assert (lean["zero"], lean["recompute"]) != (roomy["zero"], roomy["recompute"])
    none = _search(w, sized(hw, 1e5), 1e5, "test")
    assert "fits" in none["error"] and "--batch" in none["error"]


def test_auto_keeps_the_knobs_given_and_skips_what_measure_cannot_run(tiny):
    w = Workload(model=tiny, hardware="cpu", precision="fp32", devices=2, batch=4, seq_len=32).with_(**MEASURABLE)
    hw = get_hardware("cpu")
    c = _search(w.with_(recompute="full", zero=3), hw, hw.device_memory.capacity_bytes, "catalog")
    assert (c["recompute"], c["zero"]) == ("full", 3)
    # TP 2 over 2 replicas of DDP: measure runs TP x FSDP2 only (parallel.check_layout)
    ddp_tp = Workload(model=tiny, devices=4, batch=4, seq_len=32).with_(tp=2, zero=0, recompute="none", micro_batch=2,
                                                                       grad_accum=1)
    assert not runnable(ddp_tp.spec(), ddp_tp) and runnable(ddp_tp.spec(), ddp_tp.with_(zero=3))


def test_torchrun_layout_auto_records_measured_beside_predicted(tiny, tmp_path):
    db = tmp_path / "auto.db"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "llmbench"]
    args = ["measure", "train", "--model", tiny, "--batch", "4", "--seq", "32", "--steps", "2", "--warmup-steps", "1",
            "--device", "cpu", "--layout", "auto", "--db", str(db)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.run(launcher + args, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "auto: tp " in p.stdout and "error" in p.stdout.splitlines()[-1]
    from llmbench.results.store import ResultsDB
    with ResultsDB(db) as store:
        rows = store.query(suite="train")
    by_source = {r["source"]: r for r in rows}
    assert set(by_source) == {"measured", "predicted"} and len(rows) == 2
    measured, predicted = by_source["measured"], by_source["predicted"]
    assert measured["point"] == predicted["point"] and measured["workload_id"] == predicted["workload_id"] is not None
    auto = measured["environment"]["info"]["auto"]
    lay = measured["point"]["layout"]
    assert (lay["tp"], lay["zero"], lay["recompute"], lay["pp"]) == (auto["tp"], auto["zero"], auto["recompute"], 1)
    assert auto["memory_from"] == "host RAM / 2 processes" and measured["metrics"]["tokens_per_s"] > 0
    assert predicted["metrics"]["tokens_per_s"] == pytest.approx(auto["predicted_tokens_per_s"], rel=1e-6)


def test_auto_with_no_fitting_layout_is_one_line(cli):
    """13B parameters' weights, gradients and AdamW state (~200 GiB) fit no layout of one process."""
    code, out, err = cli("measure", "train", "--model", "llama-2-13b", "--batch", "1", "--seq", "128",
                         "--layout", "auto", "--hardware", "cpu", "--device", "cpu", "--no-record")
    assert code == 2 and "--layout auto: none of the" in err and "per device (--hardware cpu)" in err
    assert len(err.strip().splitlines()) == 1


def test_auto_takes_the_memory_of_this_machine_or_of_the_named_entry(tiny, monkeypatch):
    from llmbench.measure.auto import choose_layout
    from llmbench.measure.options import RunOptions
    for k in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK"):
        monkeypatch.delenv(k, raising=False)
    w, c = choose_layout(Workload(model=tiny, batch=4, seq_len=32), RunOptions(device="cpu"))
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert (c["memory_from"], c["memory_per_device_bytes"]) == ("host RAM / 1 process", ram)
    assert (w.devices, w.layout.tp, w.layout.zero, w.layout.pp) == (1, 1, 0, 1)  # one process: nothing to shard
    assert w.micro_batch * w.grad_accum == 4 and w.layout.recompute in ("none", "selective", "full")
    _, named = choose_layout(Workload(model=tiny, batch=4, seq_len=32, hardware="cpu"), RunOptions(device="cpu"))
    assert named["memory_from"] == "--hardware cpu"
    assert named["memory_per_device_bytes"] == get_hardware("cpu").device_memory.capacity_bytes
