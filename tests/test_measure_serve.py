"""The serving runtime (measure/serve.py) is correct: every request gets the tokens unbatched greedy
decoding gives it (continuous batching, chunked prefill, after a preemption), every request
finishes, no KV block leaks, arrivals and the closed loop are honoured, bad input is one line.
Correctness only, no timing (a fake clock): tiny models, 2 layers, width 64, CPU.

    .venv/bin/python -m pytest -q tests/test_measure_serve.py
"""
import json

import pytest
import torch

from llmbench.measure.modeling import build_model
from llmbench.measure.serve import Request, Scheduler, ServingEngine, _Seq
from llmbench.measure.serve_config import EngineConfig
from llmbench.models import get_model
from llmbench.models.spec import resize
from tests.test_measure_cli import run_main, tiny_config  # noqa: F401  (a fixture)

MAX_LEN = 64


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: torch on one thread


def tiny(name, **changes):
    base = get_model(name).with_(**changes) if changes else get_model(name)
    return resize(base, n_layers=2, d_model=64, n_heads=8, vocab_size=97, max_seq_len=MAX_LEN)


MODELS = {  # learned positions; rotary with GQA; a sliding window with soft-capping and post-norms
    "gpt": lambda: tiny("gpt2-small"),
    "llama-gqa": lambda: tiny("llama-3.1-70b"),
    "gemma2": lambda: tiny("gemma2-9b").with_(sliding_window=6),
}


class StepClock:
    """Fake time: each look at the clock advances it by dt (so steps take time), sleeping jumps."""

    def __init__(self, dt=0.01):
        self.t, self.dt, self.slept = 0.0, dt, []

    def now(self):
        self.t += self.dt
        return self.t

    def sleep_until(self, t):
        self.slept.append(t)
        self.t = max(self.t, t)


def mixed_requests(n=12, at=0.0):
    return [Request(at, 5 + i % 7, 3 + i % 5) for i in range(n)]


@torch.inference_mode()
def greedy_alone(model, prompt, n_out):
    """The reference: one sequence, the model's own KV cache (modeling.KVCache), no batching."""
    caches = model.new_caches(1, MAX_LEN)
    x, start, out = torch.tensor([prompt]), 0, []
    for _ in range(n_out):
        nxt = model(x, caches=caches, start=start)[:, -1].argmax(-1, keepdim=True)  # (1, 1)
        start += x.shape[1]
        x = nxt
        out.append(int(nxt))
    return tuple(out)


def serve(model, requests, cfg, **kw):
    engine = ServingEngine(model, cfg, seed=3)
    replay = engine.replay(requests, clock=StepClock(), **kw)
    prompts = [s.tokens for s in engine._sequences(requests)]
    return replay, prompts


def check_all(model, requests, replay, prompts):
    assert [r.request_id for r in replay.records] == list(range(len(requests)))  # every one finished
    for r, req, prompt in zip(replay.records, requests, prompts):
        assert r.output_tokens == req.output_tokens == len(r.tokens) == len(r.token_times_s)
        assert r.tokens == greedy_alone(model, prompt, req.output_tokens), r.request_id
        assert list(r.token_times_s) == sorted(r.token_times_s)
        assert r.arrival_s < r.first_token_s <= r.finish_s
    assert replay.free_blocks_at_end == replay.kv_blocks  # no block leaked


CONFIGS = {
    "continuous": EngineConfig(max_num_seqs=4, max_batched_tokens=64),
    "chunked": EngineConfig(max_num_seqs=6, max_batched_tokens=8, chunked_prefill=True, block_tokens=4),
    "preempting": EngineConfig(max_num_seqs=8, max_batched_tokens=64, block_tokens=2, kv_blocks=14),
    "preempting-chunked": EngineConfig(max_num_seqs=8, max_batched_tokens=6, chunked_prefill=True,
                                       block_tokens=2, kv_blocks=12),
}


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("policy", CONFIGS)
def test_same_tokens_as_unbatched_greedy(kind, policy):
    torch.manual_seed(0)
    model = build_model(MODELS[kind]()).eval()
    requests = mixed_requests()
    replay, prompts = serve(model, requests, CONFIGS[policy])
    check_all(model, requests, replay, prompts)
    assert (replay.preemptions > 0) == policy.startswith("preempting")


def test_a_step_mixes_prefill_chunks_and_decodes_within_the_budget():
    cfg = EngineConfig(max_num_seqs=4, max_batched_tokens=8, chunked_prefill=True, block_tokens=4)
    sched = Scheduler(cfg, n_blocks=64)
    a, b = _Seq(0, 0.0, 3, 5, [1, 2, 3]), _Seq(1, 0.0, 20, 5, list(range(20)))
    sched.waiting.extend([a, b])
    assert [(s.rid, n) for s, n in sched.schedule()] == [(0, 3), (1, 5)]  # b chunked to the budget
    a.computed, b.computed = 3, 5
    a.tokens.append(7)  # a decodes now; b goes on with its prompt, decode first
    assert [(s.rid, n) for s, n in sched.schedule()] == [(0, 1), (1, 7)]


def test_prefill_first_admits_whole_prompts_then_decodes():
    sched = Scheduler(EngineConfig(max_num_seqs=2, max_batched_tokens=10), n_blocks=64)
    seqs = [_Seq(i, 0.0, 4, 3, [1, 2, 3, 4]) for i in range(3)]
    sched.waiting.extend(seqs)
    assert [(s.rid, n) for s, n in sched.schedule()] == [(0, 4), (1, 4)]  # seats: 2
    for s in seqs[:2]:
        s.computed = 4
        s.tokens.append(9)
    assert [(s.rid, n) for s, n in sched.schedule()] == [(0, 1), (1, 1)]  # no seat: decode


def test_preemption_frees_the_last_admitted_and_requeues_it_first():
    sched = Scheduler(EngineConfig(max_num_seqs=4, max_batched_tokens=64, block_tokens=2), n_blocks=4)
    a, b = _Seq(0, 0.0, 4, 8, [1, 2, 3, 4]), _Seq(1, 0.0, 4, 8, [1, 2, 3, 4])
    sched.waiting.extend([a, b])
    sched.schedule()  # both prompts: 2 blocks each, the pool is full
    for s in (a, b):
        s.computed = 4
        s.tokens.append(5)
    plan = sched.schedule()  # a needs a 3rd block: b is preempted (recompute)
    assert [(s.rid, n) for s, n in plan] == [(0, 1)]
    assert list(sched.waiting) == [b] and b.blocks == [] and b.computed == 0 and b.preemptions == 1
    assert len(a.blocks) == 3 and len(sched.alloc.free) == 1


def test_requests_wait_for_their_arrival():
    model = build_model(MODELS["gpt"]()).eval()
    requests = [Request(0.0, 6, 3), Request(50.0, 6, 3), Request(50.0, 4, 2)]
    engine = ServingEngine(model, EngineConfig())
    clock = StepClock()
    records = engine.replay(requests, clock=clock).records
    assert 50.0 in clock.slept  # idle until the next arrival, not busy
    assert records[0].finish_s < 50.0 < records[1].first_token_s
    assert records[1].first_token_s == records[2].first_token_s  # arrived together: one prefill step


def test_closed_loop_keeps_at_most_c_outstanding():
    model = build_model(MODELS["gpt"]()).eval()
    requests = mixed_requests(10)
    replay = ServingEngine(model, EngineConfig()).replay(requests, clock=StepClock(), max_concurrency=3)
    spans = [(r.arrival_s, r.finish_s) for r in replay.records]
    for t, _ in spans:
        assert sum(a <= t < f for a, f in spans) <= 3
    assert max(r.arrival_s for r in replay.records) > 0  # later ones arrive when a seat frees


def test_records_summarise_in_benchmark_serving_keys():
    from llmbench.queueing.metrics import summarize

    model = build_model(MODELS["gpt"]()).eval()
    replay, _ = serve(model, mixed_requests(6), CONFIGS["continuous"])
    s = summarize(replay.to_records())
    assert s["completed"] == 6 and s["failed"] == 0
    assert s["total_output_tokens"] == sum(r.output_tokens for r in mixed_requests(6))
    assert s["median_ttft_ms"] > 0 and s["p99_itl_ms"] >= s["median_itl_ms"] > 0


def test_cli_json_out_and_db(tiny_config, tmp_path, capsys):  # noqa: F811
    out, db = tmp_path / "req.csv", tmp_path / "r.db"
    code, stdout, err = run_main(capsys, "measure", "serve", "--model", tiny_config, "--rate", "200",
                                 "--requests", "6", "--prompt-len", "12", "--output-len", "3",
                                 "--threads", "1", "--json", "--db", str(db), "--out", str(out))
    assert code == 0, err
    res = json.loads(stdout)
    assert res["completed"] == 6 and res["total_output_tokens"] == 18
    assert res["point"]["suite"] == "serve" and res["point"]["hardware"] == "cpu" and res["key"]
    assert len(out.read_text().splitlines()) == 7


@pytest.mark.parametrize("args, words", [
    (["--rate", "-1"], "must be > 0"),
    (["--max-concurrency", "0"], "--max-concurrency"),
    ([], "give --rate"),
    (["--rate", "1,2", "--trace", "x.csv"], "not both"),
    (["--rate", "1", "--requests", "200000"], "at most 100,000"),
    (["--rate", "1", "--prompt-len", "200"], "exceeds"),
    (["--rate", "1", "--prompt-len", "16", "--max-batched-tokens", "8"], "max_batched_tokens 8"),
    (["--rate", "1", "--prompt-len", "16", "--kv-blocks", "1"], "kv_blocks 1 cannot hold"),
    (["--trace", "/no/such.csv"], "no such trace file"),
])
def test_bad_input_is_one_line_exit_2(tiny_config, capsys, args, words):  # noqa: F811
    code, stdout, err = run_main(capsys, "measure", "serve", "--model", tiny_config, "--no-record", *args)
    assert code == 2
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_calibration_steps_are_timed_per_shape():
    from llmbench.measure.serve import StepRunner, static_step_blocks, time_static_steps

    shapes = [(3, 10, 0, 0), (0, 0, 12, 2), (2, 5, 7, 1)]
    n = max(static_step_blocks(b, c, p, 4, k) for b, c, p, k in shapes)
    runner = StepRunner(build_model(MODELS["gpt"]()).eval(), n, 4)
    times = time_static_steps(runner, shapes, repeats=2)
    assert len(times) == 3 and all(t > 0 for t in times)
    with pytest.raises(ValueError, match="median' or 'mean"):
        time_static_steps(runner, shapes, repeats=1, stat="p90")


def test_calibration_steps_median_or_mean_of_their_timings(monkeypatch):
    """stat: the median of a shape's timings drops a slow one, the mean keeps it (a clock that
    makes the three timed steps take 1, 1 and 10 s)."""
    from types import SimpleNamespace

    import llmbench.measure.serve as ms

    def clock(durations):  # the untimed first round reads the clock once, a timed one twice
        ticks = iter([0.0] + [t for d in durations for t in (0.0, d)])
        monkeypatch.setattr(ms.time, "perf_counter", lambda: next(ticks))

    runner = SimpleNamespace(block_tokens=4, step=lambda plan: None)
    for stat, want in (("median", 1.0), ("mean", 4.0)):
        clock([1.0, 1.0, 10.0])
        assert ms.time_static_steps(runner, [(1, 3, 0, 0)], repeats=3, stat=stat) == [pytest.approx(want)]


@pytest.mark.parametrize("policy", ["continuous", "chunked"])
def test_step_log_accounts_for_every_token_and_is_off_by_default(policy):
    """log_steps: one StepRecord per step, in the step model's arguments; the tokens they process
    are every prompt token and every output token after the first (no preemption here)."""
    model = build_model(MODELS["gpt"]()).eval()
    requests = mixed_requests()
    off, _ = serve(model, requests, CONFIGS[policy])
    replay, _ = serve(model, requests, CONFIGS[policy], log_steps=True)
    assert off.step_log == () and len(replay.step_log) == replay.steps
    log = replay.step_log
    assert sum(r.prefill_tokens for r in log) == sum(q.prompt_tokens for q in requests)
    assert sum(r.decode_seqs for r in log) == sum(q.output_tokens - 1 for q in requests)
    assert sum(r.prefill_seqs for r in log) == len(requests)
    assert all(r.time_s > 0 for r in log)
    assert all(r.kv_tokens_read <= r.max_decode_context * r.decode_seqs for r in log if not r.prefill_tokens)
    assert all(b.start_s >= a.start_s + a.time_s for a, b in zip(log, log[1:]))
    if policy == "chunked":
        assert any(r.prefill_tokens and r.decode_seqs for r in log)  # mixed steps
