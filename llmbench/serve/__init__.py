"""Serving as people plan it: requests arriving at a rate (or a concurrency, or a trace), the
request-level simulator (queueing/) run on perfmodel's per-step cost model for a deployment,
vLLM `benchmark_serving`'s metrics, and a capacity planner. Torch-free (numpy).

- config.py   the deployment and the load asked for
- run.py      one deployment under one load: the replica's step model, the scheduler, the summary
- plan.py     the capacity planner over hardware x layout x replicas under SLOs
- the traces, the simulator and the metrics are queueing/'s (trace.py, sim.py, metrics.py)
"""
