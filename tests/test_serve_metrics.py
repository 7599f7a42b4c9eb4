"""llmbench/queueing/metrics.py against hand-computed figures (vLLM benchmark_serving's definitions)."""
import csv

import numpy as np
import pytest

from llmbench.errors import BadInput
from llmbench.queueing.metrics import (RequestRecords, Slo, itls_from_token_times, summarize,
                                    write_records_csv)

NAN = float("nan")


def _records():
    # request 0: sent 0, tokens at 0.2, 0.3, 0.5  -> TTFT 200 ms, TPOT (0.5-0.2)/2 = 150 ms, E2EL 500
    # request 1: sent 1, one token at 1.4         -> TTFT 400 ms, TPOT 0 (goodput only), E2EL 400
    # request 2: sent 2, tokens at 2.1, 2.2, 2.3, 2.4 -> TTFT 100, TPOT 100, E2EL 400
    # request 3: sent 3, never answered           -> failed
    times = [[0.2, 0.3, 0.5], [1.4], [2.1, 2.2, 2.3, 2.4]]
    return RequestRecords(
        arrival_s=np.array([0.0, 1.0, 2.0, 3.0]), first_token_s=np.array([0.2, 1.4, 2.1, NAN]),
        finish_s=np.array([0.5, 1.4, 2.4, NAN]), prompt_tokens=np.array([10, 20, 30, 40]),
        output_tokens=np.array([3, 1, 4, 5]), itl_s=itls_from_token_times(times),
        preemptions=np.array([0, 1, 0, 2]))


def test_summary_by_hand():
    s = summarize(_records(), percentiles=(50, 99))
    assert s["completed"] == 3 and s["failed"] == 1
    assert s["total_input_tokens"] == 60 and s["total_output_tokens"] == 8
    assert s["duration"] == pytest.approx(2.4)
    assert s["request_throughput"] == pytest.approx(3 / 2.4)
    assert s["output_throughput"] == pytest.approx(8 / 2.4)
    assert s["total_token_throughput"] == pytest.approx(68 / 2.4)
    assert s["mean_ttft_ms"] == pytest.approx(700 / 3) and s["median_ttft_ms"] == pytest.approx(200)
    assert s["std_ttft_ms"] == pytest.approx(np.std([200, 400, 100]))
    assert s["p99_ttft_ms"] == pytest.approx(200 + 0.98 * 200)  # linear between 200 and 400
    assert s["mean_tpot_ms"] == pytest.approx(125)  # the one-token request is left out
    assert s["mean_itl_ms"] == pytest.approx(np.mean([100, 200, 100, 100, 100]))
    assert s["median_e2el_ms"] == pytest.approx(400)
    assert s["request_goodput"] is None and s["preemptions"] == 3 and s["kv_cache_utilization"] is None


def test_goodput_counts_requests_meeting_every_slo():
    r = _records()
    assert summarize(r, slo=Slo(ttft_ms=250))["request_goodput"] == pytest.approx(2 / 2.4)
    assert summarize(r, slo=Slo(tpot_ms=120))["request_goodput"] == pytest.approx(2 / 2.4)  # TPOT 0 counts
    assert summarize(r, slo=Slo(ttft_ms=250, tpot_ms=120))["request_goodput"] == pytest.approx(1 / 2.4)
    assert summarize(r, slo=Slo(e2el_ms=1e9))["request_goodput"] == pytest.approx(3 / 2.4)


@pytest.mark.parametrize("kw", [{"ttft_ms": 0}, {"tpot_ms": -1}, {"e2el_ms": float("inf")}])
def test_bad_slo(kw):
    with pytest.raises(BadInput, match="--slo-"):
        Slo(**kw)


def test_nothing_completed_gives_none_not_zero():
    r = RequestRecords(np.array([0.0]), np.array([NAN]), np.array([NAN]), np.array([5]), np.array([5]))
    s = summarize(r)
    assert s["completed"] == 0 and s["request_throughput"] is None and s["mean_ttft_ms"] is None


def test_records_csv(tmp_path):
    f = tmp_path / "r.csv"
    write_records_csv(_records(), f)
    rows = list(csv.DictReader(f.open()))
    assert len(rows) == 4 and float(rows[0]["tpot_ms"]) == pytest.approx(150)
    assert rows[3]["finish_s"] == "" and rows[3]["preemptions"] == "2"
