"""Serving as people plan it: requests arriving at a rate (or a concurrency, or a trace), a
request-level simulator of a continuous-batching engine over the per-step cost model, vLLM
`benchmark_serving`'s metrics, and a capacity planner. Torch-free (numpy).

- trace.py    requests as arrays: generators (rate, burstiness, lengths) and trace files
- metrics.py  per-request records -> TTFT/TPOT/ITL/E2EL percentiles, throughput, goodput
"""
