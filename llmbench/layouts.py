"""Which layouts each runtime runs: one capability record per runtime (issue 19, build item 3).

    from llmbench.layouts import capability, check_layout_knobs
    capability("measure.train").knobs      # {"tp": None, "zero": (0, 1, 2, 3), "recompute": (...)}
    check_layout_knobs("measure.block", {"ep": 2})   # BadInput: measure block runs ... not ep=2

A knob a runtime does not list runs only at its plain value (PLAIN: one device group, nothing
sharded, recomputed or offloaded, weights resident). A listed knob runs the values given (None:
any value the model's shape and the devices allow, which the runtime then checks). The planners
enumerate within the record, the measure runtime refuses outside it, the CLI takes its choices from
it, and a new knob is added here once (docs/architecture.md, "A new layout knob"). The predictor's
per-hardware restrictions (ZeRO stages, offload tiers, modes per architecture) are the memory
hierarchy's (perfmodel/memory.hierarchy) within the record "perfmodel.train".
No torch, no numpy.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llmbench.errors import BadInput
from llmbench.point import LAYOUT_FIELDS, MODES, OFFLOAD, RECOMPUTE

#: each knob's plain value: what every runtime runs when the knob is not in its record
PLAIN = {"tp": 1, "pp": 1, "zero": 0, "recompute": "none", "offload": "none", "mode": "resident", "ep": 1}
ZERO = (0, 1, 2, 3)


@dataclass(frozen=True)
class Capability:
    """The layout knobs one runtime runs and the values it takes (None: any the shape allows)."""

    runtime: str
    knobs: dict = field(default_factory=dict)
    what: str = ""
    """what it runs in words, for the refusal line"""

    def allows(self, knob: str, value) -> bool:
        if value is None or value == PLAIN[knob]:
            return True
        if knob not in self.knobs:
            return False
        allowed = self.knobs[knob]
        return allowed is None or value in allowed

    def choices(self, knob: str) -> tuple:
        """The values a CLI offers for `knob` on this runtime (empty: any integer)."""
        allowed = self.knobs.get(knob, (PLAIN[knob],))
        return tuple(allowed) if allowed is not None else ()


CAPABILITIES = {c.runtime: c for c in (
    Capability("perfmodel.train", {"tp": None, "pp": None, "zero": ZERO, "recompute": RECOMPUTE,
                                   "offload": OFFLOAD, "mode": MODES, "ep": None},
               "every knob (per hardware kind: perfmodel/memory.hierarchy)"),
    Capability("perfmodel.infer", {"tp": None, "pp": None, "mode": MODES},
               "tensor- and pipeline-parallel replicas"),
    Capability("measure.train", {"tp": None, "zero": ZERO, "recompute": RECOMPUTE},
               "data parallel, FSDP2/ZeRO, tensor parallel and recompute"),
    Capability("measure.block", {}, "data parallel only"),
    Capability("measure.infer", {}, "data parallel only"),
    Capability("measure.genslm", {}, "data parallel only"),
    Capability("measure.ceilings", {}, "data parallel only"),
    Capability("stream.train", {"recompute": ("none", "full"), "mode": ("weight_streaming",)},
               "weights streamed to data-parallel ranks"),
    Capability("stream.pipeline", {"pp": None, "mode": ("sram_pipeline",)},
               "layers pipelined over ranks"),
)}


def capability(runtime: str) -> Capability:
    if runtime not in CAPABILITIES:
        raise BadInput(f"unknown runtime {runtime!r}; one of {', '.join(CAPABILITIES)}")
    return CAPABILITIES[runtime]


def check_layout_knobs(runtime: str, asked: dict) -> None:
    """BadInput naming every knob of `asked` (name -> value) the runtime does not run."""
    cap = capability(runtime)
    bad = {k: v for k, v in asked.items() if k in PLAIN and not cap.allows(k, v)}
    unknown = sorted(set(asked) - set(LAYOUT_FIELDS))
    if unknown:
        raise BadInput(f"unknown layout knob {', '.join(unknown)}; one of {', '.join(LAYOUT_FIELDS)}")
    if bad:
        knobs = ", ".join(f"{k}={v}" for k, v in bad.items())
        raise BadInput(f"{runtime.replace('.', ' ')} runs {cap.what} ({_runs(cap)}), not {knobs}")


def _runs(cap: Capability) -> str:
    if not cap.knobs:
        return "the plain layout only"
    return "; ".join(f"{k} {'any' if v is None else '|'.join(map(str, v))}" for k, v in cap.knobs.items())


def resolve_knobs(runtime: str, asked: dict) -> dict:
    """The layout as the runtime runs it: the knobs asked (checked), every other at its plain
    value; ep only when asked (workload ids from before it existed stay the same)."""
    check_layout_knobs(runtime, asked)
    out = {k: v for k, v in PLAIN.items() if k != "ep"}
    out.update({k: v for k, v in asked.items() if v is not None})
    return out


def layout_text(w) -> str:
    """'tp 2 x pp 4 x dp 8, ZeRO 1, recompute full, micro-batch 2, grad-accum 16, resident' for a
    resolved workload (weight streaming stands for offloaded weights): the one layout text."""
    lay = w.layout
    dp = w.devices // ((lay.tp or 1) * (lay.pp or 1))
    parts = [f"tp {lay.tp} x pp {lay.pp} x dp {dp}" + (f" (ep {lay.ep})" if (lay.ep or 1) > 1 else "")]
    if lay.zero is not None:
        parts.append(f"ZeRO {lay.zero}")
    if lay.recompute is not None:
        parts.append(f"recompute {lay.recompute}")
    if w.micro_batch is not None:
        parts.append(f"micro-batch {w.micro_batch}, grad-accum {w.grad_accum}")
    if lay.offload not in (None, "none", "weights"):
        parts.append(f"offload {lay.offload}")
    parts.append(lay.mode or "")
    return ", ".join(p for p in parts if p)
