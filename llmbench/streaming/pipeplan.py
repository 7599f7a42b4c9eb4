"""The memory plan of pipelined inference: which layers each stage holds, and what its weights, its
KV cache and its activations take; the largest batch x context a per-stage budget allows (no torch).

    plan = plan_stages(spec, stages=2, micro_batch=2, micro_batches=2, context=24, precision="fp32")
    plan[1].weight_bytes, plan[1].kv_cache_bytes, max_batch_x_context(plan, budget_bytes=2**30)

Seed 004's point, in numbers: on a wafer the weights and the KV cache share one SRAM, so every byte
of weights a stage holds is a byte of context it cannot serve. A stage holds its layers' weights
(the first stage also the embeddings, the last the final norm and the LM head: with tied
embeddings the last stage keeps its own copy of the token matrix) and, for every sequence in
flight, K and V of its layers for every position. llmbench/streaming/pipeline.py allocates exactly
these tensors and reports the bytes it allocated beside this plan.
"""
from __future__ import annotations

from dataclasses import dataclass

from llmbench.errors import BadInput


@dataclass(frozen=True, kw_only=True)
class StagePlan:
    rank: int
    first_layer: int
    """index of the stage's first transformer layer"""
    n_layers: int
    """transformer layers on this stage"""
    weight_bytes: int
    """embeddings (first stage), its layers, final norm + LM head (last stage)"""
    kv_cache_bytes_per_token: int
    """K and V of the stage's layers for one position of one sequence"""
    kv_cache_bytes: int
    """for every sequence in flight, every position of the context"""
    activation_bytes: int
    """transient: one layer's forward over a micro-batch's prompt, the messages in and out, the
    logits (last stage)"""

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_bytes

    def to_dict(self) -> dict:
        return {"rank": self.rank, "first_layer": self.first_layer, "n_layers": self.n_layers,
                "weight_bytes": self.weight_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
                "activation_bytes": self.activation_bytes, "total_bytes": self.total_bytes}


BALANCES = ("decode", "layers")


def stage_layers(n_layers: int, stages: int, head_layers: float = 0.0) -> list[range]:
    """Contiguous layer ranges. head_layers = 0: as even as possible (the first stages take one
    more). Otherwise the last stage, which also runs the LM head worth `head_layers` layers of
    work, takes fewer layers, so that each stage's share of n_layers + head_layers is even."""
    if stages > n_layers:
        raise BadInput(f"{stages} pipeline stages for {n_layers} layers: at most one stage per layer")
    if stages == 1:
        return [range(0, n_layers)]
    last = n_layers // stages
    if head_layers:
        last = round((n_layers + head_layers) / stages - head_layers)
        last = min(max(last, 1), n_layers - (stages - 1))
    q, r = divmod(n_layers - last, stages - 1)
    out, start = [], 0
    for n in [q + (s < r) for s in range(stages - 1)] + [last]:
        out.append(range(start, start + n))
        start += n
    return out


def head_layers_of(spec, balance: str) -> float:
    """The LM head's decode cost in layers: every generated token reads the whole (V x d) matrix,
    as a layer reads its weights (decode is bound by weight reads). 0 for balance="layers"."""
    from llmbench.models.counting import param_breakdown

    if balance not in BALANCES:
        raise BadInput(f"--balance must be one of {', '.join(BALANCES)}, got {balance!r}")
    if balance == "layers":
        return 0.0
    per_layer = param_breakdown(spec)["layers"] / spec.n_layers
    return spec.vocab_size * spec.d_model / per_layer


def plan_stages(spec, *, stages: int, micro_batch: int, micro_batches: int, context: int,
                precision: str, prompt_len: int | None = None, balance: str = "layers") -> list[StagePlan]:
    """The plan of every stage for `micro_batches` x `micro_batch` sequences of `context` tokens."""
    from llmbench.footprint import stage, stage_kv_bytes_per_token

    seqs, T = micro_batch * micro_batches, prompt_len or context
    plans = []
    for rank, layers in enumerate(stage_layers(spec.n_layers, stages, head_layers_of(spec, balance))):
        f = stage(spec, len(layers), first=rank == 0, last=rank == stages - 1, micro_batch=micro_batch,
                  seqs=seqs, context=context, prompt_len=T, precision=precision)
        plans.append(StagePlan(rank=rank, first_layer=layers.start, n_layers=len(layers),
                               weight_bytes=int(f.weights),
                               kv_cache_bytes_per_token=stage_kv_bytes_per_token(spec, len(layers), precision),
                               kv_cache_bytes=int(f.kv_cache), activation_bytes=int(f.activations + f.logits)))
    return plans


def max_batch_x_context(plans: list[StagePlan], budget_bytes: int) -> int:
    """Sequences x positions of KV cache the tightest stage can hold next to its weights and
    activations within `budget_bytes` (0: the weights alone do not fit)."""
    best = None
    for p in plans:
        free = budget_bytes - p.weight_bytes - p.activation_bytes
        tokens = max(0, free // p.kv_cache_bytes_per_token)
        best = tokens if best is None else min(best, tokens)
    return int(best)


def check_fits(plans: list[StagePlan], budget_bytes: int | None,
               source: str = "--stage-memory-budget") -> None:
    """BadInput naming the first stage over the budget (`source` says where it came from), before
    anything is allocated; no budget (None, or 0 where the machine's memory is unknown): no check."""
    if not budget_bytes:
        return
    for p in plans:
        if p.total_bytes > budget_bytes:
            raise BadInput(f"does not fit: stage {p.rank} needs {p.total_bytes:,} bytes (weights "
                           f"{p.weight_bytes:,}, KV cache {p.kv_cache_bytes:,}, activations "
                           f"{p.activation_bytes:,}), over {source} {budget_bytes:,}; "
                           f"it holds at most {max_batch_x_context([p], budget_bytes):,} tokens of "
                           "batch x context: lower --batch, --prompt-len or --gen-len, or add stages")
