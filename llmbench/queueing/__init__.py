"""Requests over engine steps, with no step model of its own: request traces (rates, burstiness,
lengths, trace files), the discrete-event simulator of a continuous-batching engine over any step
object with `time_s` (and `parts`, `kv_capacity_tokens`), and vLLM `benchmark_serving`'s metrics.
Torch-free (numpy). Below the engines: `serve/` runs it on perfmodel's step model for a deployment
and a load; `perfmodel/validate.py` runs it for the published rows measured as a closed loop.

- trace.py    requests as arrays: generators (rate, burstiness, lengths) and trace files
- sim.py      the simulator: schedulers (continuous, chunked, static), paged KV, preemption, replicas
- metrics.py  per-request records -> TTFT/TPOT/ITL/E2EL percentiles, throughput, goodput
"""

#: the most requests one trace may hold: 10^6 requests already take minutes to simulate per layout
#: (here, stdlib only: the CLI reads it when it builds its parser)
MAX_REQUESTS = 1_000_000
