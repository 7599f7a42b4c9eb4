"""`llmbench serve` and `plan serve` on the fuzzer's findings: the closed loop with nothing in flight
(the clock jumps to the next arrival), options plan serve searches or ignored, contradictory layouts,
precisions a device lacks, requests beyond the model's positions or a step's token budget, and --out
on the results database. Bad input: one line, exit code 2; nothing recorded is lost."""
import json

import numpy as np
import pytest

from llmbench.queueing.sim import Scheduler, simulate
from llmbench.queueing.trace import Trace

SERVE = ["serve", "--model", "llama-3-8b", "--hardware", "h100-sxm"]
PLAN = ["plan", "serve", "--model", "llama-3-8b", "--hardware", "h100-sxm", "--rate", "4",
        "--slo-ttft-ms", "500", "--slo-tpot-ms", "50"]


def _refused(cli, match, *argv):
    code, out, err = cli(*argv)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (code, err)
    assert match in err and "Traceback" not in err, err
    return err


class Linear:
    """A step takes a + b * prompt tokens + c * decoding sequences (s)."""

    def __init__(self, a=2e-3, b=1e-5, c=1e-4, kv_capacity_tokens=10**9):
        self.a, self.b, self.c = a, b, c
        self.kv_capacity_tokens = kv_capacity_tokens

    def time_s(self, prefill_tokens, decode_seqs, kv_tokens_read, **_):
        return self.a + self.b * np.asarray(prefill_tokens, float) + self.c * np.asarray(decode_seqs, float)


def _trace(arrival_s, prompt=100, output=10):
    n = len(arrival_s)
    return Trace(np.asarray(arrival_s, float), np.full(n, prompt, np.int64), np.full(n, output, np.int64),
                 "test")


# ---------------------------------------------------------------- 1. closed loop, nothing in flight

@pytest.fixture
def trace_csv(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n1,200,20\n")
    return str(f)


@pytest.mark.parametrize("extra", [[], ["--replicas", "2"], ["--unsorted"],
                                   ["--replicas", "2", "--router", "least_outstanding"]])
def test_closed_loop_with_an_idle_gap_completes_every_request(cli, tmp_path, trace_csv, extra):
    if extra == ["--unsorted"]:
        trace_csv, extra = str(tmp_path / "u.csv"), []
        open(trace_csv, "w").write("arrival_s,prompt_tokens,output_tokens\n5,100,10\n1,200,20\n0,300,5\n")
    code, out, err = cli(*SERVE, "--trace", trace_csv, "--max-concurrency", "1", *extra, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["completed"] == d["trace"]["requests"] and d["failed"] == 0


def test_plan_serve_with_a_concurrency_limit_completes(cli):
    code, out, err = cli(*PLAN, "--max-concurrency", "4", "--requests", "100", "--json")
    assert code == 0, err
    assert json.loads(out)["layouts"]


@pytest.mark.parametrize("sched", [Scheduler(max_concurrency=1), Scheduler(max_concurrency=1, replicas=2),
                                   Scheduler(max_concurrency=1, replicas=2, router="least_outstanding"),
                                   Scheduler(policy="continuous", max_concurrency=1)])
def test_closed_loop_far_apart_arrivals_wait_for_nothing(sched):
    """max_concurrency 1, each request long done before the next arrives: the clock jumps to each
    arrival; TTFT is one prefill, nothing waits."""
    m, arrival = Linear(), [0.0, 10.0, 20.0, 35.0]
    rec = simulate(_trace(arrival), m, sched).records
    assert rec.completed().all()
    assert np.array_equal(rec.arrival_s, arrival)
    assert np.allclose(rec.first_token_s - rec.arrival_s, float(m.time_s(100, 0, 0)), rtol=1e-12)


def test_closed_loop_sends_on_arrival_when_a_slot_freed_before_it():
    """max_concurrency 2: the short request finished before the third arrives, the long one still
    runs; the third is sent at its arrival, not at the long one's finish."""
    t = Trace(np.array([0.0, 0.0, 5.0]), np.array([100, 100, 100]), np.array([5, 5000, 5]), "test")
    rec = simulate(t, Linear(), Scheduler(max_concurrency=2)).records
    assert rec.completed().all() and rec.finish_s[0] < 5.0 < rec.finish_s[1]
    assert np.array_equal(rec.arrival_s, [0.0, 0.0, 5.0])


def test_closed_loop_all_at_zero_runs_one_after_another():
    m = Linear()
    rec = simulate(_trace([0.0] * 6), m, Scheduler(max_concurrency=1)).records
    assert rec.completed().all()
    assert np.allclose(rec.arrival_s[1:], rec.finish_s[:-1], rtol=1e-12)
    assert np.allclose(rec.first_token_s - rec.arrival_s, float(m.time_s(100, 0, 0)), rtol=1e-12)


# ---------------------------------------------------------------- 2. plan serve: searched, ignored

@pytest.mark.parametrize("args,match", [
    (["--max-num-seqs", "2"], "--max-num-seqs: plan serve searches"),
    (["--tp", "3"], "--tp: plan serve searches tp"), (["--pp", "100"], "--pp: plan serve searches pp"),
    (["--devices", "3", "--tp", "2"], "plan serve searches"),
    (["--replicas", "2", "--devices", "1"], "plan serve searches"),
    (["--replicas", "2"], "--replicas: plan serve"),
    (["--precision", "nosuch"], "--precision must be one of"),
    (["--kv-precision", "nosuch"], "--kv-precision must"),
    (["--policy", "static", "--max-batched-tokens", "64"], "--max-batched-tokens does not apply"),
    (["--policy", "continuous", "--max-batched-tokens", "64"], "--max-batched-tokens 64 is below"),
    (["--output-len", "100000"], "8,192 positions"),
])
def test_plan_serve_refuses_what_it_would_ignore(cli, args, match):
    _refused(cli, match, *PLAN, *args)


def test_plan_serve_refuses_a_precision_the_hardware_lacks(cli):
    argv = [a if a != "h100-sxm" else "h100-sxm,a100-80gb" for a in PLAN]
    _refused(cli, "a100-80gb has no fp8 peak", *argv, "--precision", "fp8")


def test_plan_serve_honours_kv_precision_and_precision(cli):
    def plan(*extra):
        code, out, err = cli(*PLAN, "--requests", "200", "--top", "2", *extra, "--json")
        assert code == 0, err
        return json.loads(out)
    base, fp8 = plan(), plan("--kv-precision", "fp8")
    assert [c["simulated"] for c in base["layouts"]] != [c["simulated"] for c in fp8["layouts"]]
    # no --hardware: only the accelerators with an fp8 peak are searched
    every = [a for a in PLAN if a not in ("--hardware", "h100-sxm")]
    code, out, err = cli(*every, "--requests", "100", "--top", "1", "--precision", "fp8", "--json")
    assert code == 0, err
    assert "a100-80gb" not in json.loads(out)["hardware"]


# ---------------------------------------------------------------- 3. serve: contradictory layouts, precisions

@pytest.mark.parametrize("args", [["--replicas", "2", "--devices", "1"],
                                  ["--devices", "3", "--replicas", "2"],
                                  ["--tp", "8", "--devices", "8", "--replicas", "2"],
                                  ["--devices", "8", "--replicas", "2", "--tp", "2", "--pp", "1"]])
def test_serve_refuses_contradictory_layouts(cli, args):
    _refused(cli, "devices = replicas x tp x pp", *SERVE, "--rate", "4", "--requests", "20", *args)


def test_serve_devices_and_replicas_set_the_replica_size(cli):
    code, out, err = cli(*SERVE, "--rate", "4", "--requests", "20", "--devices", "8",
                          "--replicas", "2", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["devices"] == 8 and d["replicas"] == 2 and d["tp"] * d["pp"] == 4


def test_serve_refuses_a_precision_the_hardware_lacks(cli):
    _refused(cli, "a100-80gb has no fp8 peak", "serve", "--model", "llama-3-8b", "--hardware", "a100-80gb",
             "--rate", "4", "--precision", "fp8")


# ---------------------------------------------------------------- 4. positions and the step's budget

def test_serve_refuses_requests_beyond_the_models_positions(cli, tmp_path):
    err = _refused(cli, "llama-3-8b's 8,192 positions", *SERVE, "--rate", "4", "--requests", "50",
                   "--output-len", "100000")
    assert "101,024 tokens" in err
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n1,8000,300\n")
    assert "8,300 tokens" in _refused(cli, "8,192 positions", *SERVE, "--trace", str(f))


def test_serve_refuses_prompts_over_a_non_chunked_step_budget(cli):
    load = ["--rate", "4", "--requests", "20"]
    _refused(cli, "--max-batched-tokens 3 is below the longest prompt (1,024 tokens)", *SERVE, *load,
             "--policy", "continuous", "--max-batched-tokens", "3")
    _refused(cli, "does not apply to --policy static", *SERVE, *load, "--policy", "static",
             "--max-batched-tokens", "4096")


# ---------------------------------------------------------------- 5. --out on the results database

def test_serve_out_never_overwrites_the_results_database(cli, tmp_path, monkeypatch):
    db = tmp_path / "R.db"
    code, _, err = cli(*SERVE, "--rate", "4", "--requests", "20", "--db", str(db))
    assert code == 0, err
    before = db.read_bytes()
    (tmp_path / "link.csv").symlink_to(db)
    for out, extra in ((str(db), ["--db", str(db)]), (str(tmp_path / "link.csv"), ["--db", str(db)]),
                       (str(tmp_path / "R-rate4.db"), ["--db", str(tmp_path / "R-rate4.db")])):
        rates = "4,8" if "rate4" in out else "4"
        _refused(cli, "is the results database", *SERVE, "--rate", rates, "--requests", "20",
                 "--out", out.replace("-rate4", ""), *extra)
    monkeypatch.setenv("LLMBENCH_DB", str(db))  # the default database, no --db
    _refused(cli, "is the results database", *SERVE, "--rate", "4", "--requests", "20", "--out", str(db))
    assert db.read_bytes() == before
    assert not (tmp_path / "R-rate4.db").exists()


def test_plan_serve_simulates_every_replica_under_the_whole_load(cli):
    # the simulated deployment takes the whole rate (its replicas behind the router), not one
    # replica at rate / replicas; the router is the user's when given
    for router in ([], ["--router", "round_robin"]):
        code, out, err = cli("plan", "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                             "--rate", "40", "--slo-ttft-ms", "500", "--slo-tpot-ms", "50", "--json", *router)
        assert code == 0, err
        best = json.loads(out)["layouts"][0]
        assert best["replicas"] > 1
        # 300 requests: arrivals over 7.5 s, then the drain; one replica at 40 / replicas gave half
        # of it or less
        assert 0.6 * 40 < best["simulated"]["request_throughput"] <= 40 * 1.05
