"""The configurations a training prediction evaluates: a `Grid` of numbers (one prediction) or of
numpy arrays broadcast together (a sweep, a plan), built from a `Workload`.

    from llmbench.grid import grid_of
    g = grid_of(w)                       # w: a resolved Workload (every layout knob set)
    g = grid_of(w, tp=np.array([1, 2]))  # the fields that vary, as arrays

String knobs travel as integer codes so that one numpy pass covers every layout: recompute
(RECOMPUTE index: 0 none, 1 selective, 2 full) and offload (OFFLOAD index: 0 none, 1 optimizer
state in the lower tier, 2 weights too = weight streaming, 3 the saved activations). ep (expert parallelism) is 1 for a
dense model and when a workload leaves it out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmbench.errors import BadInput
from llmbench.point import OFFLOAD, RECOMPUTE, Workload

NONE, SELECTIVE, FULL = range(3)
OFF_NONE, OFF_OPTIMIZER, OFF_WEIGHTS, OFF_ACTIVATIONS = range(4)
#: Grid fields a sweep may give as arrays (Workload field name -> Grid field name)
ARRAY_FIELDS = {"batch": "batch", "seq_len": "seq", "devices": "devices", "tp": "tp", "pp": "pp",
                "micro_batch": "micro_batch", "sparsity": "sparsity", "zero": "zero",
                "recompute": "recompute", "offload": "offload", "ep": "ep"}


@dataclass(frozen=True, kw_only=True)
class Grid:
    """One training configuration per element; every field a float or an array (broadcast)."""

    batch: Any
    """global batch: sequences per optimizer step"""
    seq: Any
    """tokens per sequence"""
    devices: Any
    tp: Any
    """tensor-parallel degree"""
    pp: Any
    """pipeline stages"""
    micro_batch: Any
    """sequences per data-parallel replica per micro-step"""
    sparsity: Any
    """fraction of dense-layer weights that are zero"""
    zero: Any
    """ZeRO / FSDP stage 0-3"""
    recompute: Any
    """code: 0 none, 1 selective, 2 full"""
    offload: Any
    """code: 0 none, 1 optimizer state in the lower tier, 2 weights too (weight streaming)"""
    ep: Any = 1.0
    """expert-parallel degree: routed experts split over ep of the dp replicas (1: dense models)"""

    @property
    def dp(self):
        """data-parallel replicas"""
        return self.devices / (self.tp * self.pp)

    @property
    def micro_steps(self):
        """micro-batches per optimizer step (gradient accumulation)"""
        return self.batch / (self.dp * self.micro_batch)

    @property
    def streaming(self):
        """weight streaming: weights live in the lower tier and stream in layer by layer"""
        return self.offload == OFF_WEIGHTS


def code(name: str, value) -> int:
    """The integer code of a recompute or offload value ('full' -> 2)."""
    table = RECOMPUTE if name == "recompute" else OFFLOAD
    if value not in table:
        raise BadInput(f"{name} must be one of {', '.join(table)}, got {value!r}")
    return table.index(value)


def grid_of(w: Workload, **arrays) -> Grid:
    """The Grid of a resolved workload (devices, micro_batch and every layout knob set); keyword
    arrays replace the fields that vary (names as in Workload: batch, seq_len, tp, recompute codes...)."""
    lay = w.layout
    unknown = set(arrays) - set(ARRAY_FIELDS)
    if unknown:
        raise BadInput(f"a sweep varies only {', '.join(ARRAY_FIELDS)}; got {', '.join(sorted(unknown))}")
    vals = {"batch": w.batch, "seq": w.seq_len, "devices": w.devices, "tp": lay.tp, "pp": lay.pp,
            "micro_batch": w.micro_batch, "sparsity": w.sparsity, "zero": lay.zero,
            "recompute": None if lay.recompute is None else code("recompute", lay.recompute),
            "offload": None if lay.offload is None else code("offload", lay.offload), "ep": lay.ep or 1}
    vals.update({ARRAY_FIELDS[k]: v for k, v in arrays.items()})
    missing = [k for k, v in vals.items() if v is None]
    if missing:
        raise BadInput(f"a grid needs a resolved workload; unset: {', '.join(missing)}")
    return Grid(**{k: v if hasattr(v, "shape") else float(v) for k, v in vals.items()})
