"""`llmbench serve` and `llmbench plan serve`: benchmark_serving keys in --json, sweeps, --out and
--db, every catalog accelerator, and bad input as one line with exit code 2."""
import csv
import json

import pytest

from llmbench.cli import main
from llmbench.serve.data import SYNTHETIC_MIXED

VLLM_KEYS = ("completed", "total_input_tokens", "total_output_tokens", "duration", "request_throughput",
             "request_goodput", "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_ttft_ms",
             "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
             "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms")


def _run(capsys, *argv):
    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, *argv):
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_serve_json_has_benchmark_serving_keys(capsys):
    d = _json(capsys, "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--rate", "4",
              "--requests", "200", "--slo-ttft-ms", "200", "--slo-tpot-ms", "20")
    assert all(d[k] is not None for k in VLLM_KEYS)
    assert d["engine"] == "trtllm" and d["completed"] == 200 and d["scheduler"]["policy"] == "chunked"
    assert 0 < d["request_goodput"] <= d["request_throughput"]
    assert d["median_ttft_ms"] < d["p99_ttft_ms"] and d["kv_cache_utilization"] > 0


def test_serve_says_which_calibration_its_step_model_ran(capsys):
    """The hardware profile and the engine fit (profiles/engines.json) the simulation used, as
    predict prints them: the rows each was fitted on and where it was read."""
    from llmbench.perfmodel.params import ENGINE_FIT_FILE, PROFILE_DIR

    d = _json(capsys, "serve", "--model", "llama-3.1-8b", "--hardware", "mi300x", "--rate", "2", "--requests", "20")
    shipped = json.loads((PROFILE_DIR / ENGINE_FIT_FILE).read_text())["engines"]["vllm-rocm"]
    c = d["calibration"]
    assert c["engine"]["engine"] == d["engine"] == "vllm-rocm" and c["engine"]["origin"] == "shipped"
    assert c["engine"]["fitted_on_rows"] == shipped["rows"] > 0 and c["hardware"]["profile"] == "mi300x"
    code, out, _ = _run(capsys, "serve", "--model", "llama-3.1-8b", "--hardware", "mi300x", "--rate", "2",
                        "--requests", "20")
    assert code == 0 and f"engine vllm-rocm fitted on {shipped['rows']} rows" in out


def test_serve_sweep_latency_rises_with_rate(capsys):
    d = _json(capsys, "serve", "--model", "llama-3.1-8b", "--hardware", "a100-80gb", "--rate", "1,40",
              "--requests", "300", "--max-num-seqs", "32")
    lo, hi = d["sweep"]
    assert [lo["request_rate"], hi["request_rate"]] == [1, 40]
    assert hi["p99_ttft_ms"] > 3 * lo["p99_ttft_ms"] and hi["output_throughput"] > lo["output_throughput"]


def test_serve_text_trace_out_and_db(capsys, tmp_path):
    out, db = tmp_path / "requests.csv", tmp_path / "r.db"
    code, text, err = _run(capsys, "serve", "--model", "llama-3.1-8b", "--hardware", "mi300x", "--trace",
                           str(SYNTHETIC_MIXED), "--requests", "150", "--out", str(out), "--db", str(db))
    assert code == 0, err
    assert "Request throughput (req/s)" in text and "vllm" in text and "P99" not in text
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 150 and float(rows[0]["ttft_ms"]) > 0
    from llmbench.results.store import ResultsDB
    with ResultsDB(db, readonly=True) as s:
        (row,) = s.query(suite="serve")
    assert row["source"] == "predicted" and row["hardware"] == "mi300x"
    assert row["metrics"]["completed"] == 150 and len(row["environment"]["requests"]["finish_s"]) == 150


def test_closed_loop_concurrency(capsys):
    d = _json(capsys, "serve", "--model", "llama-3.1-8b", "--hardware", "h200-sxm", "--max-concurrency", "4",
              "--requests", "100")
    assert d["max_concurrency"] == 4 and d["completed"] == 100


def test_every_catalog_accelerator_serves_or_says_why(capsys):
    from llmbench.hardware import catalog

    for name, hw in catalog().items():
        if hw.kind == "cpu":
            continue
        code, out, err = _run(capsys, "serve", "--model", "gpt2-small", "--hardware", name, "--rate", "2",
                              "--requests", "20", "--prompt-len", "512", "--json")
        assert code == 0, (name, err)
        assert json.loads(out)["completed"] == 20, name


@pytest.mark.parametrize("args,match", [
    (["--rate", "-1"], "--rate"), (["--rate", "0"], "--rate"), (["--rate", "abc"], "--rate"),
    (["--max-concurrency", "0"], "--max-concurrency"), (["--rate", "1", "--slo-ttft-ms", "0"], "--slo-ttft-ms"),
    (["--rate", "1", "--slo-tpot-ms", "-5"], "--slo-tpot-ms"), (["--rate", "1", "--requests", "1000001"], "--requests"),
    ([], "--rate R, --max-concurrency C or --trace"), (["--rate", "1", "--trace", "x.csv"], "not both"),
    (["--trace", "/no/such.csv"], "no such trace file"), (["--rate", "1", "--prompt-len", "lognormal:5"], "--prompt-len"),
    (["--rate", "1", "--engine", "nope"], "engine"), (["--rate", "1", "--engine", ""], "unknown engine ''"),
    (["--rate", "1", "--tp", "3"], "tp"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, match):
    code, out, err = _run(capsys, "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", *args)
    assert code == 2 and match in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("body", ["", "arrival_s,prompt_tokens,output_tokens\n", "a,b\n1,2\n",
                                  "arrival_s,prompt_tokens,output_tokens\n0,x,1\n"])
def test_empty_or_malformed_trace(capsys, tmp_path, body):
    f = tmp_path / "t.csv"
    f.write_text(body)
    code, _, err = _run(capsys, "serve", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--trace", str(f))
    assert code == 2 and str(f) in err and err.count("\n") == 1


def test_plan_serve_searches_a_thousand_simulates_the_best_and_keeps_the_wafers(capsys):
    d = _json(capsys, "plan", "serve", "--model", "llama-3.1-70b", "--rate", "20", "--slo-ttft-ms", "500",
              "--slo-tpot-ms", "50", "--prompt-len", "1024", "--output-len", "256", "--top", "3")
    assert d["searched"] >= 1000 and len(d["layouts"]) == 3
    for c in d["layouts"]:
        assert c["simulated"]["p99_ttft_ms"] <= 500 and c["simulated"]["p99_tpot_ms"] <= 50
        assert c["devices"] == c["replicas"] * c["tp"] * c["pp"]
    costs = [c["usd_per_mtok_output"] for c in d["layouts"]]
    assert costs == sorted(costs)
    wafer = [c for c in d["best_per_hardware"] if c["hardware"] == "cs3"]
    assert wafer and wafer[0]["mode"] == "sram_pipeline" and wafer[0]["pp"] >= 2


def test_plan_serve_bad_input(capsys):
    base = ["plan", "serve", "--model", "llama-3.1-8b"]
    for args, match in ((["--rate", "5"], "--slo-ttft-ms"), (["--rate", "1,2", "--slo-ttft-ms", "1", "--slo-tpot-ms", "1"],
                                                             "one finite --rate"),
                        (["--rate", "5", "--slo-ttft-ms", "500", "--slo-tpot-ms", "50", "--objective", "speed"], "objective")):
        code, _, err = _run(capsys, *base, *args)
        assert code == 2 and match in err, err


def test_training_plan_still_requires_its_options(capsys):
    code, _, err = _run(capsys, "plan", "--model", "gpt2-small", "--hardware", "a100-80gb")
    assert code == 2 and "--devices" in err and "--batch" in err
