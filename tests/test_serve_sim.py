"""llmbench/queueing/sim.py with tiny fake step models (the physics is perfmodel/serving.py's, tested
there): Little's law, rate -> 0, saturation, chunked prefill, preemption, replicas, closed loop,
determinism. Each figure is derived from the fake model by hand, so a wrong scheduler fails."""
import numpy as np
import pytest

from llmbench.errors import BadInput
from llmbench.serve.data import SYNTHETIC_MIXED
from llmbench.queueing.metrics import summarize
from llmbench.queueing.sim import Scheduler, simulate
from llmbench.queueing.trace import Trace, parse_length, read_trace, synthetic


class Linear:
    """A step takes a + b * prompt tokens + c * decoding sequences + d * KV tokens read (s)."""

    def __init__(self, a=5e-3, b=0.0, c=0.0, d=0.0, kv_capacity_tokens=10**9):
        self.a, self.b, self.c, self.d = a, b, c, d
        self.kv_capacity_tokens = kv_capacity_tokens

    def time_s(self, prefill_tokens, decode_seqs, kv_tokens_read, **_):
        return (self.a + self.b * np.asarray(prefill_tokens, float) + self.c * np.asarray(decode_seqs, float)
                + self.d * np.asarray(kv_tokens_read, float))


class Roofline(Linear):
    """A step takes a + max(compute: b per token processed, memory: w (the weights) + d per KV
    token read): decodes are memory-bound, prompts compute-bound, as on a GPU."""

    def __init__(self, a=1e-3, b=3e-5, w=6e-3, d=1e-9, kv_capacity_tokens=10**9):
        super().__init__(a=a, b=b, d=d, kv_capacity_tokens=kv_capacity_tokens)
        self.w = w

    def time_s(self, prefill_tokens, decode_seqs, kv_tokens_read, **_):
        tokens = np.asarray(prefill_tokens, float) + np.asarray(decode_seqs, float)
        return self.a + np.maximum(self.b * tokens, self.w + self.d * np.asarray(kv_tokens_read, float))


def _trace(n, rate, prompt="lognormal:600,300", output="lognormal:150,80", seed=0):
    return synthetic(n, rate_per_s=rate, prompt=parse_length(prompt), output=parse_length(output), seed=seed)


@pytest.mark.parametrize("policy,rate", [("continuous", 20), ("chunked", 20), ("static", 6)])
def test_littles_law_running_sequences(policy, rate):
    """Time-average of sequences in the engine (the simulator's own step accounting) equals
    throughput x mean time from admission to finish (the per-request records)."""
    res = simulate(_trace(1200, rate), Linear(a=4e-3, b=2e-6, c=1e-4, d=1e-9), Scheduler(policy=policy, max_num_seqs=64))
    rec = res.records
    T = float(np.nanmax(rec.finish_s))
    L = res.extra["running_seq_s"] / T
    W = float(np.mean(rec.finish_s - res.extra["admitted_s"]))
    assert rec.completed().all() and L == pytest.approx(len(rec) / T * W, rel=1e-6)
    # and below saturation the engine serves what arrives
    s = summarize(rec)
    assert s["request_throughput"] == pytest.approx(len(rec) / rec.arrival_s[-1], rel=0.03)


@pytest.mark.parametrize("policy", ["continuous", "chunked"])
def test_rate_to_zero_ttft_is_one_prefill_and_tpot_one_decode(policy):
    m = Linear(a=3e-3, b=1e-5, c=2e-4, d=1e-7)
    res = simulate(_trace(50, 0.01, prompt="700", output="64"), m, Scheduler(policy=policy))
    s = summarize(res.records)
    assert s["median_ttft_ms"] == pytest.approx(1e3 * m.time_s(700, 0, 0), rel=1e-9)
    ctx = 700 + np.arange(63)  # the decode steps read 700 ... 762 cached tokens
    assert s["median_tpot_ms"] == pytest.approx(1e3 * float(np.mean(m.time_s(0, 1, ctx))), rel=1e-9)


def test_saturation_throughput_is_the_batch_limited_step_rate():
    """Far over capacity, B sequences at a time: a prefill step of B prompts, then O - 1 decode
    steps of B: B * O tokens per cycle."""
    B, P, O = 32, 100, 50
    m = Linear(a=2e-3, b=1e-5, c=3e-4)
    res = simulate(_trace(3200, 1e4, prompt=str(P), output=str(O)), m,
                   Scheduler(policy="continuous", max_num_seqs=B, max_batched_tokens=B * P))
    cycle = m.time_s(B * P, 0, 0) + (O - 1) * m.time_s(0, B, 0)
    assert summarize(res.records)["output_throughput"] == pytest.approx(B * O / cycle, rel=0.01)


def test_chunked_prefill_lowers_p99_tpot_on_a_mixed_trace():
    """Long prompts stall every decode unless chunked; chunks ride on memory-bound decode steps
    (Sarathi-Serve, Agrawal et al. OSDI'24, Fig. 1 and 8)."""
    trace = read_trace(SYNTHETIC_MIXED)
    m = Roofline()
    whole = summarize(simulate(trace, m, Scheduler(policy="continuous")).records)
    chunk = summarize(simulate(trace, m, Scheduler(policy="chunked", max_batched_tokens=512)).records)
    assert chunk["p99_tpot_ms"] < 0.8 * whole["p99_tpot_ms"], (chunk["p99_tpot_ms"], whole["p99_tpot_ms"])
    assert chunk["completed"] == whole["completed"] == len(trace)


@pytest.mark.parametrize("policy", ["continuous", "chunked"])
def test_preemption_when_blocks_run_out_then_everything_finishes(policy):
    res = simulate(_trace(400, 50, output="400"), Linear(a=5e-3, c=1e-5, kv_capacity_tokens=20_000),
                   Scheduler(policy=policy, block_tokens=16))
    assert res.preemptions > 0 and res.records.completed().all()
    assert res.extra["leaked_blocks"] == 0 and 0.5 < res.max_kv_cache_utilization <= 1.0
    assert int(res.records.preemptions.sum()) == res.preemptions


def test_a_request_larger_than_the_cache_is_rejected_not_hung():
    t = Trace(np.array([0.0, 0.1]), np.array([100, 5000]), np.array([10, 10]))
    res = simulate(t, Linear(kv_capacity_tokens=1024), Scheduler())
    assert res.rejected == 1 and summarize(res.records)["failed"] == 1
    with pytest.raises(BadInput, match="KV cache"):
        simulate(t, Linear(kv_capacity_tokens=8), Scheduler(block_tokens=16))


def test_static_batches_return_together_and_queue_the_rest():
    t = Trace(np.zeros(6), np.full(6, 10), np.array([5, 10, 5, 10, 5, 10]))
    m = Linear(a=1e-2)
    rec = simulate(t, m, Scheduler(policy="static", max_num_seqs=3)).records
    assert len(set(rec.finish_s[:3])) == 1 and rec.finish_s[0] == pytest.approx(10 * 1e-2)
    assert rec.first_token_s[3] == pytest.approx(rec.finish_s[0] + 1e-2)


def test_closed_loop_keeps_at_most_c_in_flight():
    t = _trace(300, float("inf"))
    rec = simulate(t, Linear(a=3e-3, c=1e-4), Scheduler(max_concurrency=8)).records
    sends = np.sort(rec.arrival_s)
    for s in sends[::7]:
        assert int(((rec.arrival_s <= s) & (rec.finish_s > s)).sum()) <= 8
    one = simulate(t.head(20), Linear(a=3e-3), Scheduler(max_concurrency=1)).records
    assert np.allclose(one.arrival_s[1:], one.finish_s[:-1])


def test_replicas_split_the_load_and_least_outstanding_beats_round_robin_when_bursty():
    t = synthetic(2000, rate_per_s=60, prompt=parse_length("lognormal:800,600"),
                  output=parse_length("lognormal:200,200"), burstiness=0.3, seed=3)
    m = Linear(a=4e-3, b=3e-6, c=2e-4)
    rr = simulate(t, m, Scheduler(replicas=4, max_num_seqs=32))
    lo = simulate(t, m, Scheduler(replicas=4, max_num_seqs=32, router="least_outstanding"))
    assert sorted(np.bincount(rr.records.replica)) == [500] * 4
    assert summarize(lo.records)["p99_e2el_ms"] < summarize(rr.records)["p99_e2el_ms"]


def test_same_inputs_same_result():
    m = Linear(a=4e-3, b=3e-6, c=2e-4, kv_capacity_tokens=50_000)
    a, b = (simulate(_trace(500, 30, seed=5), m, Scheduler(replicas=2, router="least_outstanding"))
            for _ in range(2))
    assert np.array_equal(a.records.finish_s, b.records.finish_s) and a.preemptions == b.preemptions
    c = simulate(_trace(500, 30, seed=6), m, Scheduler(replicas=2))
    assert not np.array_equal(a.records.finish_s, c.records.finish_s)


@pytest.mark.parametrize("kw", [{"policy": "fcfs"}, {"max_num_seqs": 0}, {"router": "random"},
                                {"max_concurrency": 0}, {"block_tokens": 0}])
def test_bad_scheduler(kw):
    with pytest.raises(BadInput):
        Scheduler(**kw)


def test_round_robin_replicas_run_alone_exactly_as_in_lockstep(monkeypatch):
    from llmbench.queueing import sim

    t, m, sched = _trace(600, 40, seed=2), Linear(a=4e-3, b=3e-6, c=2e-4, kv_capacity_tokens=40_000), Scheduler(replicas=3)
    alone = simulate(t, m, sched)
    monkeypatch.setattr(sim, "_independent", lambda reps, reqs, arr, too_long: sim._lockstep(reps, reqs, arr, too_long, sched))
    lock = simulate(t, m, sched)
    # equal up to rounding (a run cut in two sums its step times in another order)
    assert np.allclose(alone.records.finish_s, lock.records.finish_s, rtol=1e-12, atol=1e-9)
    assert alone.preemptions == lock.preemptions


def test_decode_runs_timed_from_checked_lines_equal_the_step_model():
    """sim._DecodeLines: decode steps from the step model's own compute and memory terms at two kv,
    checked; the same times as calling perfmodel/serving.py step by step."""
    from llmbench.serve.config import Deployment
    from llmbench.serve.run import replica
    from llmbench.queueing.sim import _DecodeLines

    for hw in ("h100-sxm", "cs3", "mi300x"):
        sm = replica(Deployment(model="llama-3.1-8b", hardware=hw))
        lines = _DecodeLines(sm)
        for n in (1, 16, 256):
            c0, c1, m0, m1, rest = lines[n]
            kv = n * np.array([100.0, 2000.0, 30000.0])
            want = sm.time_s(np.zeros(3), np.full(3, float(n)), kv, prefill_seqs=np.zeros(3), prefill_attn_pairs=np.zeros(3))
            assert np.allclose(np.maximum(c0 + c1 * kv, m0 + m1 * kv) + rest, want, rtol=1e-12)
    assert _DecodeLines(Linear())[4] is None  # no parts(): called step by step


@pytest.mark.parametrize("policy", ["continuous", "chunked", "static"])
def test_every_token_after_the_first_has_one_itl_and_blocks_come_back(policy):
    res = simulate(_trace(300, 80, output="lognormal:200,150", seed=4),
                   Linear(a=3e-3, b=2e-6, c=1e-4, kv_capacity_tokens=30_000), Scheduler(policy=policy, max_num_seqs=64))
    rec = res.records
    assert rec.completed().all() and res.extra["leaked_blocks"] == 0
    assert len(rec.itl_s) == int((rec.output_tokens - 1).sum()) and (rec.itl_s > 0).all()
    # a request's ITLs add up to its decode time: E2EL - TTFT (static: the batch's end, not later)
    total = float((rec.finish_s - rec.first_token_s).sum())
    assert float(rec.itl_s.sum()) <= total + 1e-6
    if policy != "static":
        assert float(rec.itl_s.sum()) == pytest.approx(total, rel=1e-9)


@pytest.mark.parametrize("policy", ["continuous", "chunked"])
def test_padded_decode_reads_the_longest_context_for_every_sequence(policy):
    """padded_decode (measure/serve.py's pad + mask): a decode step of contexts 100 and 10 reads
    2 x 100 cached tokens, not 110; n more at each later step. By hand: 4 decode steps after the
    prefill, cached tokens 2 (100 + j) padded against 110 + 2 j."""
    a, d = 1e-3, 1e-5
    trace = Trace(arrival_s=np.zeros(2), prompt_tokens=np.array([100, 10]), output_tokens=np.array([5, 5]))
    tpot = {}
    for padded in (False, True):
        sched = Scheduler(policy=policy, max_num_seqs=4, max_batched_tokens=512, padded_decode=padded)
        tpot[padded] = simulate(trace, Linear(a=a, d=d), sched).records.tpot_s()
    j = np.arange(4)
    assert tpot[False] == pytest.approx([a + d * np.mean(110 + 2 * j)] * 2, rel=1e-9)
    assert tpot[True] == pytest.approx([a + d * np.mean(2 * (100 + j))] * 2, rel=1e-9)
    same = Trace(arrival_s=np.zeros(2), prompt_tokens=np.array([50, 50]), output_tokens=np.array([5, 5]))
    runs = [simulate(same, Linear(a=a, d=d), Scheduler(policy=policy, padded_decode=p)).records.tpot_s()
            for p in (False, True)]
    assert np.array_equal(runs[0], runs[1])  # equal contexts: no padding


# ---------------------------------------------------------------- the speed-ups change no figure

GOLDEN = __import__("pathlib").Path(__file__).with_name("data") / "serve_sim_golden.json"
#: the H100 calibration the golden runs on, frozen (a refit of the shipped profiles moves no figure)
GOLDEN_PROFILE = GOLDEN.with_name("serve_sim_golden_h100.json")


@pytest.fixture
def frozen_profile(monkeypatch):
    from llmbench.perfmodel import serving
    from llmbench.perfmodel.params import load_profile

    monkeypatch.setenv("LLMBENCH_PROFILES", str(GOLDEN_PROFILE))
    # the engines as recorded: engines.toml's priors (the shipped engine fit came after the golden)
    monkeypatch.setattr(serving, "engine_fit_path", lambda: None)
    load_profile.cache_clear()
    yield
    monkeypatch.undo()
    load_profile.cache_clear()
_LENS = dict(prompt_len="lognormal:1000,500", output_len="lognormal:200,100")


def _golden_cases():
    """name -> (Deployment, Load): every scheduler path of sim.py on the real step model
    (Llama-3.1-8B on an H100, perfmodel/serving.py), 2,000 requests each."""
    from llmbench.serve.config import Deployment, Load

    h100 = dict(model="llama-3.1-8b", hardware="h100-sxm")
    n = 2000
    return {
        "chunked light": (Deployment(**h100), Load(rate_per_s=10, requests=n, **_LENS)),
        "chunked saturated": (Deployment(**h100), Load(rate_per_s=40, requests=n, **_LENS)),
        "continuous": (Deployment(**h100, policy="continuous"), Load(rate_per_s=20, requests=n, **_LENS)),
        "static": (Deployment(**h100, policy="static", max_num_seqs=32), Load(rate_per_s=5, requests=n // 4, **_LENS)),
        "least outstanding x3": (Deployment(**h100, replicas=3, router="least_outstanding"),
                                 Load(rate_per_s=30, requests=n, **_LENS)),
        "round robin x2": (Deployment(**h100, replicas=2), Load(rate_per_s=20, requests=n, **_LENS)),
        "closed loop 32": (Deployment(**h100), Load(max_concurrency=32, requests=n, **_LENS)),
        "preempting": (Deployment(**h100, max_num_seqs=512), Load(rate_per_s=60, requests=n,
                                                                  prompt_len="lognormal:4000,2000",
                                                                  output_len="lognormal:800,400")),
    }


def _golden_figures(d, load) -> dict:
    from llmbench.serve.run import run

    res = run(d, load)
    return {k: v for k, v in res.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def test_fixed_traces_give_the_recorded_figures(frozen_profile):
    """Every figure of 8 fixed 2,000-request runs equals the one recorded before the simulator's
    speed-ups (tests/data/serve_sim_golden.json; `python tests/test_serve_sim.py` rewrites it),
    to 1e-9 relative, on a frozen H100 calibration: a faster simulator must be the same simulator.
    Rewritten once since, when the engine's request_overhead_s came (sim._client_side): without
    it the new simulator gave the recorded figures exactly; with it, first token and finish move
    by the engine's 1 ms. And once more when a step became its kernels' rooflines one after
    another (GEMMs, attention, elementwise) with a floor per decoder layer (layer_floor_s), and
    when that floor went from 10 to 12 us; the floor alone at 0 had kept the recorded figures."""
    import json

    want = json.loads(GOLDEN.read_text())
    cases = _golden_cases()
    assert sorted(want) == sorted(cases)
    for name, (d, load) in cases.items():
        got = _golden_figures(d, load)
        assert sorted(got) == sorted(want[name]), name
        for k, v in want[name].items():
            assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-12), (name, k, got[k], v)


if __name__ == "__main__":
    import json
    import os

    os.environ["LLMBENCH_PROFILES"] = str(GOLDEN_PROFILE)
    from llmbench.perfmodel import serving

    serving.engine_fit_path = lambda: None  # as frozen_profile: engines.toml's priors
    GOLDEN.write_text(json.dumps({name: _golden_figures(d, load) for name, (d, load) in _golden_cases().items()},
                                 indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")


def test_the_engines_request_overhead_moves_ttft_and_e2el_alone():
    """Engine.request_overhead_s is client-side time: every request's TTFT and E2EL grow by it,
    TPOT, ITL and the engine's steps do not (sim._client_side)."""
    from dataclasses import replace as dc_replace

    from llmbench.hardware import get_hardware
    from llmbench.models import get_model
    from llmbench.perfmodel.serving import build_step_model, engine

    trace = synthetic(200, rate_per_s=8.0, prompt=parse_length("lognormal:800,400"),
                      output=parse_length("lognormal:150,80"), seed=3)
    out = {}
    for oh in (0.0, 0.005):
        sm = build_step_model(get_model("llama-3.1-8b"), get_hardware("h100-sxm"), precision="bf16",
                              eng=dc_replace(engine("trtllm"), request_overhead_s=oh))
        res = simulate(trace, sm, Scheduler(policy="chunked", max_num_seqs=64))
        out[oh] = (res.records, res.steps)
    (a, steps_a), (b, steps_b) = out[0.0], out[0.005]
    assert steps_a == steps_b
    np.testing.assert_allclose(b.ttft_s() - a.ttft_s(), 0.005, atol=1e-12)
    np.testing.assert_allclose(b.e2el_s() - a.e2el_s(), 0.005, atol=1e-12)
    np.testing.assert_allclose(b.tpot_s(), a.tpot_s(), rtol=1e-12)
