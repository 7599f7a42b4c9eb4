"""The knobs of `llmbench measure serve`'s engine (measure/serve.py), torch-free so the CLI builds
its options from them without importing torch. Named as vLLM's engine arguments.

    from llmbench.measure.serve_config import EngineConfig
    EngineConfig(max_num_seqs=16, chunked_prefill=True)
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from llmbench.errors import BadInput
from llmbench.point import opt


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """How the runtime schedules: seats, token budget, KV blocks."""

    max_num_seqs: int = field(default=32, metadata=opt(
        "sequences running at once (vLLM --max-num-seqs)", low=1, high=4096, integer=True))
    max_batched_tokens: int = field(default=2048, metadata=opt(
        "tokens per engine step (vLLM --max-num-batched-tokens)", unit="tokens", low=1, high=1 << 20,
        integer=True))
    chunked_prefill: bool = field(default=False, metadata=opt(
        "split prompts into chunks that fill each step's token budget, decodes first (Sarathi-Serve)"))
    block_tokens: int = field(default=16, metadata=opt(
        "tokens per KV block (vLLM --block-size)", unit="tokens", low=1, high=1024, integer=True))
    kv_blocks: int | None = field(default=None, metadata=opt(
        "KV blocks in the pool (default: max-num-seqs times the longest request's)", low=1,
        high=1 << 24, integer=True))

    def __post_init__(self):
        for f in fields(self):
            v, m = getattr(self, f.name), f.metadata
            if v is None or isinstance(v, bool):
                continue
            if not isinstance(v, int) or not m["low"] <= v <= m["high"]:
                raise BadInput(f"--{f.name.replace('_', '-')} must be an integer in "
                               f"[{m['low']}, {m['high']}], got {v!r}")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}
