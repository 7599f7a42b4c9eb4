"""What `llmbench serve` is asked: the deployment and the load, as frozen dataclasses whose
defaults the CLI reads (stdlib only: the CLI imports this module when it builds its parser).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llmbench.errors import BadInput

from llmbench.queueing import MAX_REQUESTS  # noqa: F401  (re-exported: the CLI reads it here)


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """What serves: the model, the hardware and its layout, the engine and its scheduler."""
    model: str                       # preset name or HF config.json
    hardware: str                    # catalog name
    devices: int | None = None       # devices in all (replicas = devices / (tp pp)); None: replicas
    tp: int | None = None            # tensor-parallel degree of a replica (None: fewest that fit)
    pp: int | None = None            # pipeline stages of a replica (None: 1, or wafers that hold it)
    precision: str | None = None     # weights' precision (None: the hardware's)
    engine: str | None = None        # engines.toml name (None: the hardware family's default)
    kv_precision: str | None = None
    policy: str | None = None        # continuous | chunked | static (None: the engine's)
    max_num_seqs: int | None = None  # None: the engine's on this device (vLLM V1: 1,024 on a GPU of >= 70 GiB
    # that is not an A100, else 256; V0 256: serving.on_device, serving.RELEASES), else 256 (the Scheduler's)
    max_batched_tokens: int | None = None  # None: the engine's chunk budget, else 8192
    replicas: int | None = None      # None: devices / (tp pp), else 1
    router: str = "round_robin"

    def __post_init__(self):
        if self.policy == "static" and self.max_batched_tokens is not None:
            raise BadInput("--max-batched-tokens does not apply to --policy static (a batch is whole prompts "
                           "padded to the longest, with no token budget)")


@dataclass(frozen=True, kw_only=True)
class Load:
    """What arrives: a rate (or all at once with a concurrency limit), or a trace file."""
    rate_per_s: float = math.inf     # requests/s; inf: all at t = 0 (with max_concurrency: closed loop)
    burstiness: float = 1.0          # gamma shape of the intervals (1: Poisson)
    max_concurrency: int | None = None
    trace: str | None = None         # a trace file instead of the generator
    requests: int = 1000             # generated, or the first K of the trace
    prompt_len: str = "1024"         # N, lognormal:MEAN,SD, uniform:LO,HI, file:PATH
    output_len: str = "128"
    seed: int = 0

    def __post_init__(self):
        if not (self.rate_per_s > 0):  # NaN too
            raise BadInput(f"--rate must be > 0 requests/s, got {self.rate_per_s}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise BadInput(f"--max-concurrency must be >= 1, got {self.max_concurrency}")
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise BadInput(f"--requests must be in [1, {MAX_REQUESTS:,}], got {self.requests:,}")
