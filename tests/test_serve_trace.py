"""llmbench/queueing/trace.py: seeded generators with the stated statistics, trace files in the three
layouts read and validated (one line naming the file and row), the request bound, the shipped trace."""
import json
import math

import numpy as np
import pytest

from llmbench.errors import BadInput
from llmbench.queueing import trace as tr
from llmbench.serve.data import SYNTHETIC_MIXED
from llmbench.queueing.trace import arrivals, parse_length, read_trace, synthetic


def _t(n=100, rate=4.0, seed=0, **kw):
    return synthetic(n, rate_per_s=rate, prompt=parse_length("lognormal:1000,500"),
                     output=parse_length("200"), seed=seed, **kw)


def test_same_seed_same_trace_other_seed_other_trace():
    a, b, c = _t(seed=1), _t(seed=1), _t(seed=2)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert not np.array_equal(a.arrival_s, c.arrival_s)


def test_poisson_rate_and_gamma_burstiness():
    rng = np.random.default_rng(0)
    a = arrivals(50_000, 8.0, 1.0, rng)
    gaps = np.diff(a)
    assert a[0] == 0 and np.all(gaps >= 0)
    assert abs(gaps.mean() * 8.0 - 1) < 0.02 and abs(gaps.std() / gaps.mean() - 1) < 0.03
    bursty = np.diff(arrivals(50_000, 8.0, 0.25, rng))  # gamma shape k: CV = 1/sqrt(k) = 2
    assert abs(bursty.mean() * 8.0 - 1) < 0.05 and abs(bursty.std() / bursty.mean() - 2) < 0.1
    assert np.all(arrivals(10, math.inf, 1.0, rng) == 0)


def test_length_distributions():
    rng = np.random.default_rng(0)
    x = parse_length("lognormal:1000,500").sample(100_000, rng)
    assert abs(x.mean() / 1000 - 1) < 0.02 and abs(x.std() / 500 - 1) < 0.05 and x.min() >= 1
    assert set(parse_length("128").sample(10, rng)) == {128}
    u = parse_length("uniform:10,20").sample(10_000, rng)
    assert u.min() == 10 and u.max() == 20


def test_length_from_file(tmp_path):
    f = tmp_path / "lens.txt"
    f.write_text("5\n7\n\n9\n")
    assert set(parse_length(f"file:{f}").sample(200, np.random.default_rng(0))) == {5, 7, 9}
    d = parse_length(f"file:{SYNTHETIC_MIXED}", column="output_tokens")
    assert np.array_equal(np.sort(d.values), np.sort(read_trace(SYNTHETIC_MIXED).output_tokens))


@pytest.mark.parametrize("text", ["0", "-5", "abc", "12.5", "lognormal:1000", "lognormal:0,1",
                                  "uniform:20,10", "gauss:1,2", "file:/no/such/file", "nan", "1e9"])
def test_bad_lengths(text):
    with pytest.raises(BadInput, match="--prompt-len"):
        parse_length(text)


@pytest.mark.parametrize("rate,burst", [(0, 1), (-1, 1), (float("nan"), 1), (1, 0), (1, -2)])
def test_bad_rates(rate, burst):
    with pytest.raises(BadInput):
        arrivals(10, rate, burst, np.random.default_rng(0))


def test_csv_roundtrip_sorted_and_rebased(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n12.5,100,10\n10.0,50,5\n11,70,7\n")
    t = read_trace(f)
    assert t.arrival_s.tolist() == [0.0, 1.0, 2.5]
    assert t.prompt_tokens.tolist() == [50, 70, 100] and t.output_tokens.tolist() == [5, 7, 10]
    g = tmp_path / "g.csv"
    t.write_csv(g)
    u = read_trace(g)
    assert np.allclose(u.arrival_s, t.arrival_s) and np.array_equal(u.output_tokens, t.output_tokens)


def test_jsonl_azure_and_burstgpt_layouts(tmp_path):
    j = tmp_path / "t.jsonl"
    j.write_text("\n".join(json.dumps({"arrival_s": a, "prompt_tokens": 10, "output_tokens": 2})
                           for a in (0, 0.5)) + "\n\n")
    assert read_trace(j).arrival_s.tolist() == [0, 0.5]
    az = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    az.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                  "2023-11-16 18:15:50.9951690,396,109\n")
    t = read_trace(az)
    assert t.arrival_s[1] == pytest.approx(4.314579, abs=1e-6) and t.prompt_tokens.tolist() == [374, 396]
    b = tmp_path / "BurstGPT_1.csv"
    b.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                 "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,0,1087,Conversation log\n"
                 "118,GPT-4,417,276,693,Conversation log\n")
    t = read_trace(b)
    assert t.arrival_s.tolist() == [0, 113] and t.skipped == 1 and t.output_tokens.tolist() == [18, 276]


@pytest.mark.parametrize("body,match", [
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n-1,10,5\n", "row 3: arrival_s"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,ten,5\n", "row 3: prompt_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,10,0\n", "row 3: output_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10.5,5\n", "row 2: prompt_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10\n", "row 2: output_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\ninf,10,5\n", "row 2: arrival_s"),
    ("arrival_s,prompt_tokens,output_tokens\n", "no requests"),
    ("", "none of the known layouts"),
    ("time,in,out\n0,1,1\n", "none of the known layouts"),
])
def test_bad_trace_files_name_file_and_row(tmp_path, body, match):
    f = tmp_path / "bad.csv"
    f.write_text(body)
    with pytest.raises(BadInput, match=match) as e:
        read_trace(f)
    assert str(f) in str(e.value) and "\n" not in str(e.value)


def test_bad_jsonl_and_binary(tmp_path):
    j = tmp_path / "t.jsonl"
    j.write_text('{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n{oops\n')
    with pytest.raises(BadInput, match="line 2"):
        read_trace(j)
    b = tmp_path / "b.csv"
    b.write_bytes(b"\xff\xfe\x00\x01garbage\n")
    with pytest.raises(BadInput):
        read_trace(b)
    with pytest.raises(BadInput, match="no such trace file"):
        read_trace(tmp_path / "missing.csv")


def test_request_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(tr, "MAX_REQUESTS", 5)
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i},10,5\n" for i in range(6)))
    with pytest.raises(BadInput, match="more than 5 requests"):
        read_trace(f)
    assert len(read_trace(f, max_requests=3)) == 3
    with pytest.raises(BadInput, match="--requests"):
        _t(n=6)


def test_shipped_trace_is_its_generator_output():
    from llmbench.serve.data.make_trace import mixed

    t, g = read_trace(SYNTHETIC_MIXED), mixed()
    assert len(t) == 1000 and np.allclose(t.arrival_s, g.arrival_s, atol=1e-6)
    assert np.array_equal(t.prompt_tokens, g.prompt_tokens) and np.array_equal(t.output_tokens, g.output_tokens)
