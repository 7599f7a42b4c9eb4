"""Study specs and the study runner: every shipped YAML parses into Workloads, skip logic, OOM and
errors as results, resume after SIGINT/SIGKILL (a subprocess killed mid-study), CLI --json keys.

The measure suites are replaced by a fast fake `run_workload` (a module written to tmp_path and
selected with --suite-module), so these tests run in seconds and need no torch."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llmbench.models import get_model
from llmbench.point import Workload
from llmbench.results import ResultsDB
from llmbench.published import PUBLISHED_CSV, published_rows
from llmbench.studies.feasibility import LocalDevice, memory_bytes, skip_reason
from llmbench.studies.runner import plan_study, resolve, run_study
from llmbench.studies.spec import load_spec, studies

REPO = Path(__file__).resolve().parents[1]
MEASURED = {"transformer-block", "gpt2-seq-length", "gas", "sparsity", "dp-scaling",
            "bert-train-batch", "bert-infer-batch", "genslm"}
PREDICTED_ONLY = {"time-to-train", "llm-inference"}
EXPECTED = MEASURED | PREDICTED_ONLY
CPU = LocalDevice(device="cpu", type="cpu", hardware="cpu", name="test cpu",
                  memory_bytes=16 * 2**30, count=2)
GPU = LocalDevice(device="cuda:0", type="cuda", hardware="h200-sxm", name="NVIDIA H200",
                  memory_bytes=141e9, count=1)

FAKE_SUITE = textwrap.dedent("""
    import dataclasses, json, os, time
    def run_workload(w, run):
        log = os.environ.get("FAKE_LOG")
        tag = json.dumps({"workload": w.to_dict(), "run": dataclasses.asdict(run)}, sort_keys=True)
        if log:
            with open(log, "a") as f:
                f.write("start " + tag + "\\n")
        time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
        if w.batch == int(os.environ.get("FAKE_OOM_BATCH", "-1")):
            return w, {"status": "oom", "metrics": {}, "error": "CUDA out of memory (fake)",
                       "environment": {"fake": True}}
        if w.batch == int(os.environ.get("FAKE_RAISE_BATCH", "-1")):
            raise RuntimeError("kernel exploded\\nsecond line")
        if log:
            with open(log, "a") as f:
                f.write("end " + tag + "\\n")
        t = 0.01 * w.batch
        return w, {"status": "ok", "error": None, "environment": {"fake": True, "suite": w.suite},
                   "metrics": {"step_time_s": t, "tokens_per_s": w.batch * w.seq_len / t}}
""")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    (tmp_path / "fake_suite_mod.py").write_text(FAKE_SUITE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    return tmp_path


def _calls(tmp_path, kind="start"):
    log = tmp_path / "calls.log"
    return [l for l in log.read_text().splitlines() if l.startswith(kind)] if log.exists() else []


# ---------------------------------------------------------------- specs

def test_every_study_is_shipped_and_parses():
    specs = studies()
    assert set(specs) == EXPECTED
    published_ids = {r["id"] for r in published_rows(PUBLISHED_CSV)}
    for name, s in specs.items():
        assert s.source["paper"] and s.source.get("where"), name
        assert set(s.published) <= published_ids, (name, set(s.published) - published_ids)
        assert s.predict_points(), name  # every study says what is predicted for it
        if name in PREDICTED_ONLY:
            assert not s.points() and not s.points(quick=True), name
            continue
        assert s.source["paper"] in ("arXiv:2310.04607", "arXiv:2409.00287"), name
        full, quick = s.points(), s.points(quick=True)
        assert full and quick, name
        assert s.quick["shrink"].strip(), name
        for p in full + quick:
            assert isinstance(p.workload, Workload) and p.workload.suite == s.suite, name
            assert p.workload.precision, (name, p)  # every shipped point says its precision
            p.workload.spec()  # builds: preset exists, resize valid
        # quick points are smaller (less memory) than the largest full point: they fit a CPU
        fq = [memory_bytes(resolve(p.workload, CPU)) for p in quick]
        ff = [memory_bytes(resolve(p.workload, CPU)) for p in full]
        assert max(fq) < max(ff), name
        assert all(p.workload.precision == "fp32" for p in quick if s.suite != "block"), name
        assert all(m < 2 * 2**30 for m in fq), name


def test_batch_is_global_and_the_measurements_are_the_same():
    """The shipped specs give the GLOBAL batch; resolved, each measures what the per-replica
    spec measured before the Workload (micro-batch x grad_accum x devices)."""
    def micro(name, quick):
        out = []
        for p in studies()[name].points(quick=quick):
            w = resolve(p.workload, CPU)
            out.append((w.batch, w.micro_batch, w.grad_accum, w.devices))
        return out

    # arXiv:2310.04607 Fig. 6: micro-batch 16 at GAS 1..16 on one device
    assert micro("gas", False) == [(16 * g, 16, g, 1) for g in (1, 4, 8, 16)]
    assert micro("gas", True) == [(2 * g, 2, g, 1) for g in (1, 2, 4)]
    # 4 sequences per replica on 1..8 replicas (quick: 2 on 1 and 2 processes)
    assert micro("dp-scaling", False) == [(4 * n, 4, 1, n) for n in (1, 2, 4, 8)]
    assert micro("dp-scaling", True) == [(2 * n, 2, 1, n) for n in (1, 2)]
    assert {m[0] for m in micro("bert-train-batch", False)} == {64, 256, 1024, 2048, 4096, 8192}


def test_transformer_block_grid_is_the_papers():
    # arXiv:2310.04607 Sec. V-A: FP32/FP16/BF16 x batch 8..64 x seq 1024 at GPT-2 XL width 1600
    pts = [p.workload for p in studies()["transformer-block"].points()]
    assert len(pts) == 12
    assert {(w.precision, w.batch) for w in pts} == \
        {(pr, b) for pr in ("fp32", "fp16", "bf16") for b in (8, 16, 32, 64)}
    assert {w.spec().d_model for w in pts} == {1600} and {w.seq_len for w in pts} == {1024}
    quick = [p.workload for p in studies()["transformer-block"].points(quick=True)]
    assert {w.spec().d_model for w in quick} == {256}
    # the resize as the spec writes it; d_ff and GQA groups follow (models.spec.resize)
    assert quick[0].resize == {"d_model": 256, "n_heads": 4}
    assert (quick[0].spec().d_ff, quick[0].spec().n_kv_heads) == (1024, 4)


def test_grid_list_union_and_seq_extends_positions():
    sp = [p.workload for p in studies()["sparsity"].points()]
    assert len(sp) == 12 and {w.model for w in sp} == {"gpt2-xl", "gpt3-6.7b", "gpt3-30b"}
    assert {w.seq_len for w in sp if w.model == "gpt3-30b"} == {2048}
    seq = [p.workload for p in studies()["gpt2-seq-length"].points()]
    assert get_model("gpt2-xl").max_seq_len == 1024
    longest = max(seq, key=lambda w: w.seq_len)
    assert longest.seq_len == 8192 and longest.spec().max_seq_len == 8192
    # the study's base states its extended learned positions (Workload.spec no longer extends them
    # silently: a length beyond a model's positions is refused unless the workload says so)
    assert min(seq, key=lambda w: w.seq_len).resize == {"max_seq_len": 8192}


def test_run_options_come_from_the_spec():
    p = studies()["genslm"].points(quick=True)[0]
    assert (p.run.steps, p.run.warmup_steps) == (3, 1) and p.workload.suite == "genslm"
    assert studies()["transformer-block"].points(quick=True)[0].run.repeats == 3


def test_bad_specs_are_one_line_errors(tmp_path):
    def spec(text):
        path = tmp_path / "s.yaml"
        path.write_text(text)
        return path

    base = textwrap.dedent("""
        name: t
        title: t
        suite: train
        source: {paper: arXiv:0}
        base: {model: gpt2-small, batch: 2, seq_len: 64}
    """)
    assert len(load_spec(spec(base + "grid: {grad_accum: [1, 2]}\n")).points()) == 2
    with pytest.raises(ValueError, match="unknown key extra"):
        load_spec(spec(base + "extra: 1\n"))
    with pytest.raises(ValueError, match="shrink"):
        load_spec(spec(base + "quick: {base: {batch: 1}}\n"))
    with pytest.raises(ValueError, match="suite"):
        load_spec(spec(base.replace("suite: train", "suite: nope")))
    with pytest.raises(ValueError, match="resize"):
        load_spec(spec(base + "grid: {resize: {activation: relu}}\n")).points()
    with pytest.raises(ValueError):
        load_spec(spec(base + "grid: {resize: {d_model: 100}}\n")).points()  # 12 heads do not divide 100
    with pytest.raises(ValueError, match="does not split into 3 micro-steps"):
        load_spec(spec(base + "grid: {grad_accum: 3}\n")).points()  # a global batch of 2
    with pytest.raises(ValueError, match="YAML"):
        load_spec(spec(base + "grid: [unclosed\n"))


# ---------------------------------------------------------------- skip logic

def _pt(local=CPU, **kw):
    w = dict(suite="train", model="gpt2-small", batch=2, seq_len=128, precision="fp32", devices=1,
             resize={"n_layers": 2})
    w.update(kw)
    return resolve(Workload(**w), local)


def test_skip_reasons():
    assert skip_reason(_pt(), CPU) is None
    assert "250x" in skip_reason(_pt(precision="bf16"), CPU)
    assert skip_reason(_pt(precision="bf16"), CPU, force=True) is None
    assert skip_reason(_pt(GPU, precision="bf16"), GPU) is None
    assert "Cerebras" in skip_reason(_pt(GPU, precision="cbf16"), GPU)
    assert "tensor-core" in skip_reason(_pt(precision="tf32"), CPU)
    assert "2 CPU cores" in skip_reason(_pt(devices=4, batch=4), CPU)
    assert skip_reason(_pt(devices=2), CPU) is None
    assert "1 cuda devices" in skip_reason(_pt(GPU, devices=2), GPU)
    # too large: GPT-3 30B needs ~16 bytes/param of model state (ZeRO Sec. 3.1), far over 16 GiB
    big = dict(model="gpt3-30b", batch=1, seq_len=2048, precision="bf16", resize={})
    assert "GiB" in skip_reason(_pt(**big), CPU, force=True)
    assert "GiB" in skip_reason(_pt(GPU, **big), GPU)
    assert skip_reason(_pt(GPU, **{**big, "model": "gpt2-xl", "seq_len": 1024}), GPU) is None


def test_memory_estimate_grows_and_counts_model_state():
    small = _pt(resize={})
    # fp32 Adam: weights + grads + 2 moments = 16 bytes per parameter, at least
    from llmbench.models.counting import param_count
    assert memory_bytes(small) > 16 * param_count(get_model("gpt2-small"))
    assert memory_bytes(_pt(batch=8)) > memory_bytes(_pt(batch=2))
    assert memory_bytes(_pt(seq_len=512)) > memory_bytes(_pt(seq_len=128))
    # a replica holds its micro-batch: 8 sequences over 4 micro-steps take the memory of 2
    assert memory_bytes(_pt(batch=8, grad_accum=4)) == memory_bytes(_pt(batch=2))
    infer = _pt(suite="infer", model="bert-base", resize={})
    assert memory_bytes(infer) < memory_bytes(_pt(model="bert-base", resize={}))


def test_resolve_fills_what_this_machine_runs():
    w = resolve(Workload(model="gpt2-small", batch=8, devices=2, grad_accum=2), CPU)
    assert (w.hardware, w.precision, w.devices, w.micro_batch, w.grad_accum) == ("cpu", "fp32", 2, 2, 2)
    assert resolve(Workload(model="bert-base", suite="infer", batch=4), GPU).precision == "bf16"
    with pytest.raises(ValueError, match="does not split over 2"):
        resolve(Workload(model="gpt2-small", batch=3, devices=2), CPU)


# ---------------------------------------------------------------- runner (in process)

def test_run_records_every_point_oom_and_errors_go_on(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_OOM_BATCH", "32")
    monkeypatch.setenv("FAKE_RAISE_BATCH", "64")
    db = tmp_path / "r.db"
    s = run_study("transformer-block", quick=True, device="cpu", db=str(db),
                  suite_module="fake_suite_mod", progress=False)
    assert s["points"] == 12 and s["ran"] == 4 and s["skipped_now"] == 8
    assert s["counts"] == {"ok": 2, "oom": 1, "error": 1, "skipped": 8, "running": 0, "crashed": 0}
    by_batch = {(r["point"]["precision"], r["point"]["batch"]): r for r in s["results"]}
    assert all(r["workload_id"] == Workload.from_dict(r["point"]).id() for r in s["results"])
    assert by_batch[("fp32", 32)]["status"] == "oom" and "out of memory" in by_batch[("fp32", 32)]["error"]
    assert by_batch[("fp32", 64)]["error"] == "RuntimeError: kernel exploded"  # one line
    assert "250x" in by_batch[("bf16", 8)]["error"]
    ok = by_batch[("fp32", 8)]
    assert ok["metrics"]["tokens_per_s"] == pytest.approx(8 * 128 / 0.08)
    env = ok["environment"]
    assert env["fake"] is True and env["study"] == "transformer-block" and env["quick"] is True
    assert env["cpu_model"] and env["date"] and "python" in env
    assert env["run"]["repeats"] == 3 and env["run"]["device"] == "cpu"
    assert len(_calls(tmp_path)) == 4
    # run_workload got the point's resolved workload (the hardware left for it to detect: a CPU
    # has no datasheet for MFU) and its run options on this device; the row is the resolved one
    job = json.loads(_calls(tmp_path)[0].split(" ", 1)[1])
    w = Workload.from_dict(job["workload"])
    assert w == Workload(suite="block", model="gpt2-xl", hardware=None, precision="fp32", devices=1,
                         batch=8, seq_len=128, resize={"d_model": 256, "n_heads": 4})
    assert ok["point"] == w.with_(hardware="cpu").to_dict() and ok["hardware"] == "cpu"
    assert (job["run"]["device"], job["run"]["repeats"]) == ("cpu", 3)

    # rerun: ok/oom/skipped are not redone; only the error is retried (and now succeeds)
    monkeypatch.delenv("FAKE_RAISE_BATCH")
    s2 = run_study("transformer-block", quick=True, device="cpu", db=str(db),
                   suite_module="fake_suite_mod", progress=False)
    assert s2["ran"] == 1 and s2["already_recorded"] == 11
    assert s2["counts"] == {"ok": 3, "oom": 1, "error": 0, "skipped": 8, "running": 0, "crashed": 0}
    assert len(_calls(tmp_path)) == 5
    with ResultsDB(db) as store:
        assert store.count() == 12 and len(store.query(study="transformer-block")) == 12

    # --redo: every point is measured again (the oom one too), still one row per point
    monkeypatch.delenv("FAKE_OOM_BATCH")
    s_redo = run_study("transformer-block", quick=True, device="cpu", db=str(db), redo=True,
                       suite_module="fake_suite_mod", progress=False)
    assert s_redo["ran"] == 4 and s_redo["counts"] == {"ok": 4, "oom": 0, "error": 0, "skipped": 8, "running": 0, "crashed": 0}
    assert len(_calls(tmp_path)) == 9

    # --force: previously skipped bf16/fp16 points are planned again and run
    s3 = run_study("transformer-block", quick=True, device="cpu", db=str(db), force=True,
                   suite_module="fake_suite_mod", progress=False)
    assert s3["ran"] == 8 and s3["counts"]["skipped"] == 0


def test_shared_point_once_and_data_parallel_through_torchrun(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{REPO}")  # for the torchrun ranks
    db = tmp_path / "r.db"
    run_study("gas", quick=True, device="cpu", db=str(db), suite_module="fake_suite_mod", progress=False)
    n = len(_calls(tmp_path))
    s = run_study("dp-scaling", quick=True, device="cpu", db=str(db), suite_module="fake_suite_mod",
                  progress=False)
    # gas GAS=1 and dp-scaling devices=1 are the same configuration: measured once
    assert s["already_recorded"] == 1 and s["ran"] == 1 and s["counts"]["ok"] == 2, s["results"]
    with ResultsDB(db) as store:
        assert len(store.query(study="gas")) == 3 and len(store.query(study="dp-scaling")) == 2
    # devices=2 ran as 2 torchrun ranks (world_size recorded), measuring its own 1-process
    # baseline inside the same launch; both ranks got the global batch 4 = 2 x 2 replicas
    new = [json.loads(l.split(" ", 1)[1]) for l in _calls(tmp_path)[n:]]
    assert len(new) == 2 and all(j["workload"]["devices"] == 2 for j in new)
    assert all((j["workload"]["batch"], j["workload"]["micro_batch"]) == (4, 2) for j in new)
    one, two = s["results"]
    assert two["point"]["devices"] == 2 and two["environment"]["world_size"] == 2
    assert new[0]["run"]["baseline"] is True and new[0]["run"]["baseline_tokens_per_s"] is None


def test_plan_marks_done_run_skip(fake, tmp_path):
    db = tmp_path / "r.db"
    with ResultsDB(db) as store:
        plan = plan_study(studies()["transformer-block"], store, quick=True, local=CPU)
        assert [plan.count(a) for a in ("run", "skip", "done")] == [4, 8, 0]
    run_study("transformer-block", quick=True, device="cpu", db=str(db),
              suite_module="fake_suite_mod", progress=False)
    with ResultsDB(db) as store:
        plan = plan_study(studies()["transformer-block"], store, quick=True, local=CPU)
        assert plan.count("done") == 12


def test_missing_suite_module_is_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="suite module"):
        run_study("gas", quick=True, device="cpu", db=str(tmp_path / "r.db"),
                  suite_module="no_such_suite_module_xyz", progress=False)


# ---------------------------------------------------------------- kill and resume (subprocess)

def _study_cmd(db, *extra):
    return [sys.executable, "-m", "llmbench", "study", "run", "transformer-block", "--quick",
            "--device", "cpu", "--force", "--db", str(db), "--suite-module", "fake_suite_mod",
            "--no-progress", *extra]


def _env(tmp_path, sleep):
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "FAKE_SLEEP": str(sleep),
            "FAKE_LOG": str(tmp_path / "calls.log")}


def _finished(store):
    return [r for r in store.query() if r["status"] != "running"]


def _wait_for_rows(db, n, proc, timeout=60):
    """Until n points are recorded (a claimed point's `running` row does not count)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the study finished before it could be killed"
        if db.exists():
            with ResultsDB(db, readonly=True) as store:
                if len(_finished(store)) >= n:
                    return
        time.sleep(0.05)
    raise AssertionError("no progress")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_kill_mid_study_then_rerun_finishes_without_redoing(fake, tmp_path, sig):
    """Ctrl-C and SIGTERM release the interrupted point (its row goes back to none); SIGKILL
    cannot be caught, so the point is found crashed and needs --retry-crashed (as a point that
    killed its own process would)."""
    db = tmp_path / "k.db"
    env = _env(tmp_path, sleep=0.4)
    proc = subprocess.Popen(_study_cmd(db), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for_rows(db, 3, proc)
    time.sleep(0.2)  # inside the next point's run_suite
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "rerun" in err
    else:
        assert proc.returncode == -sig
    with ResultsDB(db) as store:
        first = {r["key"] for r in _finished(store)}
        running = [r for r in store.query() if r["status"] == "running"]
    assert 3 <= len(first) < 12
    assert len(running) == (1 if sig == signal.SIGKILL else 0)
    started_first = len(_calls(tmp_path))
    assert started_first == len(first) + 1  # the interrupted point was started, never recorded

    out = subprocess.run(_study_cmd(db, "--json"), env=_env(tmp_path, sleep=0), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    crashed = 1 if sig == signal.SIGKILL else 0
    assert s["already_recorded"] == len(first) and s["ran"] == 12 - len(first) - crashed
    assert s["counts"]["ok"] == 12 - crashed and s["counts"]["crashed"] == crashed
    assert s["crashed_left"] == crashed and s["points"] == 12
    if crashed:
        (row,) = [r for r in s["results"] if r["status"] == "crashed"]
        assert row["key"] == running[0]["key"] and f"pid {proc.pid}" in row["error"]
        # (in process: the CLI option --retry-crashed is wired by the new front end)
        s = run_study("transformer-block", quick=True, device="cpu", db=str(db), force=True,
                      retry_crashed=True, suite_module="fake_suite_mod", progress=False)
        assert s["ran"] == 1 and s["counts"]["ok"] == 12
    with ResultsDB(db) as store:
        rows = store.query(study="transformer-block")
        assert len(rows) == 12 == len({r["key"] for r in rows}) and store.integrity_check() == "ok"
    # every point finished exactly once over all runs: nothing redone, nothing lost
    ends = _calls(tmp_path, "end")
    assert len(ends) == 12 == len(set(ends))
    assert len(_calls(tmp_path)) == started_first + 12 - len(first)


# ---------------------------------------------------------------- CLI


def test_cli_study_list_json(cli):
    code, out, _ = cli("study", "list", "--json")
    assert code == 0
    rows = json.loads(out)
    assert {r["name"] for r in rows} == EXPECTED
    assert set(rows[0]) == {"name", "title", "suite", "source", "points", "quick_points", "predictions",
                            "published", "quick_shrink"}
    tb = next(r for r in rows if r["name"] == "transformer-block")
    assert tb["points"] == 12 and tb["source"]["paper"] == "arXiv:2310.04607"


def test_cli_study_run_json_and_show(cli, fake, tmp_path):
    db = str(tmp_path / "c.db")
    code, out, _ = cli("study", "run", "gas", "--quick", "--device", "cpu", "--db", db,
                       "--suite-module", "fake_suite_mod", "--no-progress", "--json")
    assert code == 0
    s = json.loads(out)
    assert set(s) == {"study", "title", "suite", "source", "published", "published_values", "quick",
                      "device", "hardware", "db", "points", "ran", "skipped_now", "already_recorded",
                      "running_elsewhere", "crashed_left",
                      "counts", "results"}
    assert s["points"] == 3 and s["counts"]["ok"] == 3 and s["published"] == ["emani-gas-a100", "emani-gas-mi250"]
    # arXiv:2310.04607 Fig. 6: GAS 1 -> 4 gives 1.74x on 64 A100 (published.csv)
    a100 = next(v for v in s["published_values"] if v["id"] == "emani-gas-a100")
    assert (a100["metric"], a100["value"], a100["system"]) == ("gas4_over_gas1", "1.74", "a100-40gb")
    assert set(s["results"][0]) == {"key", "study", "suite", "source", "model", "hardware", "status",
                                    "error", "point", "metrics", "environment", "created_at",
                                    "workload_id"}
    code, out, _ = cli("study", "show", "gas", "--quick", "--device", "cpu", "--db", db, "--json")
    assert code == 0
    info = json.loads(out)
    assert [p["action"] for p in info["points"]] == ["done"] * 3
    assert [p["point"]["grad_accum"] for p in info["points"]] == [1, 2, 4]
    assert [p["point"]["batch"] for p in info["points"]] == [2, 4, 8]  # global: micro-batch 2 x GAS
    assert [(p["run"]["steps"], p["run"]["device"]) for p in info["points"]] == [(3, "cpu")] * 3


@pytest.mark.parametrize("argv, msg", [
    (["study", "run", "no-such-study", "--device", "cpu"], "unknown study"),
    (["study", "show", "no-such-study", "--device", "cpu"], "unknown study"),
])
def test_cli_bad_input_exits_2(cli, tmp_path, argv, msg):
    code, _, err = cli(*argv, "--db", str(tmp_path / "x.db"))
    assert code == 2 and msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_modules_and_cpu_planning_import_no_torch():
    # the CLI starts without torch (DESIGN.md); planning a CPU study needs none either
    code = ("import sys\n"
            "import llmbench.results.cli, llmbench.studies.cli, llmbench.studies.runner\n"
            "from llmbench.studies.feasibility import local_device\n"
            "from llmbench.studies.spec import studies\n"
            "loc = local_device('cpu')\n"
            "assert loc.hardware == 'cpu' and loc.memory_bytes > 0 and loc.count >= 1\n"
            "[s.points(quick=True) for s in studies().values()]\n"
            "[s.predict_points() for s in studies().values()]\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr


def test_auto_device_without_torch_is_the_cpu():
    code = ("import sys\n"
            "sys.modules['torch'] = None  # as if torch were not installed\n"
            "from llmbench.studies.feasibility import local_device\n"
            "assert local_device('auto').hardware == 'cpu'\n"
            "try:\n"
            "    local_device('cuda')\n"
            "except ValueError as e:\n"
            "    assert 'needs torch' in str(e)\n"
            "else:\n"
            "    raise AssertionError('cuda without torch accepted')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
