"""`llmbench measure ...` end to end: JSON keys, the results DB, one-line errors, torchrun DDP."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny_config(tmp_path):
    p = tmp_path / "tiny" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps({"model_type": "gpt2", "_name_or_path": "tiny-gpt2", "n_layer": 2,
                             "n_embd": 64, "n_head": 4, "vocab_size": 256, "n_positions": 128}))
    return str(p)


def llmbench(*args, env=None, launcher=None, timeout=180):
    cmd = (launcher or [sys.executable, "-m", "llmbench"]) + list(args)
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=full_env)


def run_main(capsys, *args) -> tuple[int, str, str]:
    """The real entry point in this process (no new torch import): exit code, stdout, stderr."""
    from llmbench.cli import main
    code = 0
    try:
        main(list(args))
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_block_sweep_json_and_db(tiny_config, tmp_path, capsys):
    db = tmp_path / "r.db"
    code, out, err = run_main(capsys, "measure", "block", "--model", tiny_config, "--batch", "1,2", "--seq",
                              "16", "--repeats", "2", "--device", "cpu", "--json", "--db", str(db))
    assert code == 0, err
    out = json.loads(out)
    assert [r["workload"]["batch"] for r in out] == [1, 2]
    assert all(r["status"] == "ok" and r["metrics"]["fwd_bwd_tflops"] > 0 for r in out)
    from llmbench.results.store import ResultsDB
    with ResultsDB(db) as store:
        rows = store.query(suite="block")
    assert len(rows) == 2 and {r["key"] for r in rows} == {r["key"] for r in out}
    assert rows[0]["environment"]["torch_version"] and rows[0]["environment"]["info"]["flops_fwd"] > 0
    assert rows[0]["point"] == out[0]["workload"]  # recorded under the resolved Workload


def test_table_output_and_bad_input(tiny_config, capsys):
    code, out, err = run_main(capsys, "measure", "infer", "--model", tiny_config, "--batch", "2", "--seq", "8",
                              "--gen-len", "2", "--repeats", "2", "--device", "cpu", "--no-record")
    assert code == 0, err
    assert "decode tok/s" in out and "ok" in out
    for bad, needle in ((["train", "--model", "gpt-99"], "unknown model"),
                        (["block", "--model", tiny_config, "--batch", "x"], "--batch"),
                        (["block", "--model", tiny_config, "--device", "tpu"], "unknown device")):
        code, out, err = run_main(capsys, "measure", *bad, "--no-record")
        assert code == 2 and err.startswith("error:") and needle in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1


def test_bad_input_through_the_installed_command():
    p = llmbench("measure", "block", "--batch", "0", "--no-record")
    assert p.returncode == 2 and p.stderr.startswith("error:") and "Traceback" not in p.stderr


def test_ceilings_json_saves_profile_and_records_a_workload(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path))
    db = tmp_path / "c.db"
    code, out, err = run_main(capsys, "measure", "ceilings", "--device", "cpu", "--size", "256", "--repeats",
                              "2", "--json", "--db", str(db))
    assert code == 0, err
    out = json.loads(out)
    gemm = out["metrics"]["gemm_flops_per_s"]["fp32"]  # FLOP/s, not TFLOP/s
    assert out["workload"]["suite"] == "ceilings" and out["workload"]["model"] == "-"
    saved = json.loads((tmp_path / "hardware" / "cpu.json").read_text())
    assert saved["peak_flops"]["fp32"] == pytest.approx(gemm["max"])
    assert saved["memory_tiers"][0]["bandwidth_bytes_per_s"] == pytest.approx(out["metrics"]["copy_bytes_per_s"]["max"])
    assert "measure ceilings" in saved["sources"]["peak_flops.fp32"]
    from llmbench.results.store import ResultsDB
    with ResultsDB(db) as store:
        row = store.get(out["key"])
    assert row["point"] == out["workload"] and row["metrics"]["gemm_flops_per_s"]["fp32"] == gemm
    assert row["environment"]["info"]["saved_to"] == out["info"]["saved_to"]
    code, out, err = run_main(capsys, "measure", "ceilings", "--device", "cpu", "--size", "64", "--repeats",
                              "1", "--no-save", "--no-record")
    assert code == 0 and "GEMM square" in out and "copy" in out and "saved profile" not in out
    from llmbench.hardware.lookup import clear_cache
    clear_cache()


def test_torchrun_two_cpu_processes(tiny_config, tmp_path):
    """Data parallel: DDP over gloo, global tokens/s and scaling efficiency against one process."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                "-m", "llmbench"]
    p = llmbench("measure", "train", "--model", tiny_config, "--batch", "4", "--seq", "32", "--steps", "2",
                 "--warmup-steps", "1", "--device", "cpu", "--baseline", "--json", "--db", str(tmp_path / "d.db"),
                 launcher=launcher, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)  # only rank 0 prints
    m, info, w = out["metrics"], out["info"], out["workload"]
    assert out["status"] == "ok" and info["world_size"] == 2 and w["devices"] == 2
    assert (w["batch"], w["micro_batch"], w["grad_accum"]) == (4, 2, 1)  # --batch is global
    assert info["tokens_per_step"] == 4 * 32
    assert m["tokens_per_s"] == pytest.approx(info["tokens_per_step"] / m["step_time_s"])
    assert m["scaling_efficiency"] == pytest.approx(m["tokens_per_s"] / (2 * m["baseline_tokens_per_s"]))
