"""The one vocabulary of llmbench: a `Workload` (what runs, where, laid out how), `METRICS` (what a
result reports, measured or predicted alike), the precisions and the rules that pick them.
No torch, no numpy: the CLI builds its options from these dataclasses.

    from llmbench.point import Workload, Layout
    w = Workload(model="gpt2-xl", hardware="a100-80gb", devices=8, batch=64, seq_len=1024)
    w.spec()        # the ModelSpec it runs (preset or HF config, resized, head)
    w.id()          # what measured, predicted and published results of this workload share
    w.to_dict()     # the JSON every result repeats

`batch` is always the global batch: sequences per optimizer step (training) or concurrent
requests (inference). A replica's micro-step runs `micro_batch` sequences; `grad_accum`
micro-steps make one step, so batch = micro_batch x grad_accum x data-parallel replicas.
A layout knob left None is chosen by the engine: the planner (predict) or the runtime's plain
default (measure: no sharding, no recompute).
"""
from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace

from llmbench.errors import BadInput

# ---------------------------------------------------------------- precisions

#: bytes per element of each precision (cbf16: Cerebras bf16 with fp32 accumulation)
PRECISION_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "cbf16": 2.0, "fp8": 1.0, "fp4": 0.5}
PRECISIONS = tuple(PRECISION_BYTES)
#: what a device trains in when the user does not say, first that its datasheet has a peak for
TRAIN_PRECISION_ORDER = ("bf16", "fp16", "fp32")


def precision_for(hw, precision: str | None = None) -> str:
    """The one rule for "which precision does this hardware run": the asked precision if the
    hardware has a peak for it; else bf16, fp16, fp32, whichever its datasheet gives first. A CPU
    runs fp32 (its bf16 matmul is ~250x slower here: measured, see docs/measure.md)."""
    if precision is not None and hw.peak(precision):
        return precision
    if hw.kind == "cpu":
        return "fp32"
    for p in TRAIN_PRECISION_ORDER:
        if hw.peak(p):
            return p
    return precision or "fp32"


def hardware_for_device(device_type: str, device_name: str = "") -> str:
    """The one device-name -> hardware rule: 'cpu' for a CPU; the catalog entry of an accelerator
    ('NVIDIA H200' -> 'h200-sxm'); else the device's name as a slug ('nvidia-rtx-6000')."""
    if device_type == "cpu":
        return "cpu"
    from llmbench.hardware.spec import catalog_name_for_device

    return catalog_name_for_device(device_name) or device_slug(device_type, device_name)


def device_slug(device_type: str, device_name: str = "") -> str:
    """'cpu' for a CPU, else the device's name as a slug ('NVIDIA H200' -> 'nvidia-h200'): the name
    `llmbench measure ceilings` saves the device's measured profile under, kept apart from its
    datasheet entry ('h200-sxm') so measured ceilings never overwrite datasheet peaks."""
    if device_type == "cpu":
        return "cpu"
    slug = "".join(c if c.isalnum() else "-" for c in device_name.lower())
    return "-".join(p for p in slug.split("-") if p) or device_type


# ---------------------------------------------------------------- metrics

#: every metric a result may carry, measured or predicted: name -> (unit, meaning)
METRICS = {
    # training and throughput
    "step_time_s": ("s", "one optimizer step (all micro-batches)"),
    "tokens_per_s": ("tokens/s", "global: trained tokens, or generated tokens over the batch"),
    "samples_per_s": ("samples/s", "global sequences (or requests) per second"),
    "achieved_tflops": ("TFLOP/s", "model FLOPs per second per device (no recompute)"),
    "executed_tflops": ("TFLOP/s", "FLOPs executed per second per device (with recompute)"),
    "mfu": ("fraction", "achieved_tflops / datasheet dense peak of the precision"),
    "frac_of_ceiling": ("fraction", "achieved / the GEMM ceiling measured on this device"),
    "ceiling_tflops": ("TFLOP/s", "measured GEMM ceiling the fraction is taken against"),
    "scaling_efficiency": ("fraction", "tokens/s / (devices x one-device tokens/s)"),
    "baseline_tokens_per_s": ("tokens/s", "one-device throughput a scaling efficiency uses"),
    "warmup_s": ("s", "warm-up time excluded from the figures"),
    "loss_first": ("nats", "training loss of the first timed step"),
    "loss_last": ("nats", "training loss of the last timed step"),
    "step_time_s_p10": ("s", "10th percentile step time"),
    "step_time_s_p90": ("s", "90th percentile step time"),
    # one transformer layer (block suite)
    "fwd_time_s": ("s", "forward of one layer"),
    "fwd_bwd_time_s": ("s", "forward + backward of one layer"),
    "fwd_tflops": ("TFLOP/s", "forward FLOPs per second"),
    "fwd_bwd_tflops": ("TFLOP/s", "forward + backward FLOPs per second"),
    # inference
    "time_to_first_token_s": ("s", "prefill of the prompt to the first generated token"),
    "prefill_time_s": ("s", "prefill of the prompt"),
    "prefill_tokens_per_s": ("tokens/s", "prompt tokens per second over the batch"),
    "decode_tokens_per_s": ("tokens/s", "generated tokens per second over the batch"),
    "decode_tokens_per_s_per_seq": ("tokens/s", "generated tokens per second per sequence (user)"),
    "decode_time_s_per_token": ("s", "one decode step (one token per sequence)"),
    "latency_s_p50": ("s", "median request latency (prefill + decode); predicted: the one value"),
    "latency_s_p90": ("s", "90th percentile request latency"),
    "latency_s_p99": ("s", "99th percentile request latency"),
    "max_batch_x_context": ("tokens", "largest batch x context whose KV cache fits"),
    # serving (perfmodel/serving.py)
    "engine": ("", "serving engine whose efficiencies and KV-cache rules were used (trtllm, vllm, ...)"),
    "kv_precision": ("", "precision of the KV cache"),
    "concurrency": ("requests", "requests held at once over all replicas (the batch, or the most that fit "
                                "and the engine runs at once)"),
    "kv_capacity_tokens": ("tokens", "KV-cache tokens one replica holds (engine memory fraction, paged blocks)"),
    "note": ("", "what a prediction changed from the request (e.g. a concurrency that fits), else empty"),
    # memory, per device
    "peak_mem_bytes": ("bytes", "peak memory per device (measured: allocator peak; predicted: sum)"),
    "weights_bytes": ("bytes", "weights held per device"),
    "grads_bytes": ("bytes", "gradients held per device"),
    "optimizer_bytes": ("bytes", "optimizer state (master weights, moments) per device"),
    "activations_bytes": ("bytes", "activations held per device at the peak"),
    "kv_cache_bytes": ("bytes", "KV cache per device"),
    "tier_bytes": ("bytes", "per device, bytes on each memory tier by name (a store shared by all devices, "
                            "such as MemoryX: its whole content)"),
    # time to train, energy, cost
    "epoch_time_s": ("s", "one epoch of the data set"),
    "device_hours": ("device-h", "devices x hours for the data set"),
    "energy_j_per_token": ("J/token", "device power x time per token"),
    "cost_usd_per_token": ("USD/token", "price per device-hour x devices x time per token"),
    # predicted-only explanations
    "bound": ("", "compute | memory | network | stream | latency (fixed per-step time): what limits the "
                  "step"),
    "link_bytes_per_token": ("bytes", "what one generated token moves between a replica's devices "
                                      "(TP all-reduces, pipeline hops)"),
    "fits": ("", "whether the workload fits the devices' memory"),
    "mode": ("", "resident | weight_streaming | sram_pipeline, as executed"),
    "breakdown_s": ("s", "predicted time per term: compute, memory, network, stream, optimizer"),
    # measured ceilings of a device (suite ceilings)
    "gemm_flops_per_s": ("FLOP/s", "square GEMM per precision: {precision: {min, median, max}} of the repeats"),
    "layer_gemm_flops_per_s": ("FLOP/s", "a model layer's GEMMs (fwd+bwd), time-weighted medians: {precision: rate}"),
    "copy_bytes_per_s": ("bytes/s", "device memory copy, bytes read + written: {min, median, max} of the repeats"),
}


def check_metrics(metrics: dict, where: str) -> list[str]:
    """Names in `metrics` that METRICS does not declare (an engine's output checked by a test)."""
    return [f"{where}: {k}" for k in metrics if k not in METRICS]


# ---------------------------------------------------------------- options

def opt(help: str, *, unit: str = "", flag: str = "", choices: tuple = (), low=None, high=None,
        integer: bool = False) -> dict:
    """Field metadata the CLI reads: help, unit, flag name, allowed values or range."""
    return {"help": help, "unit": unit, "flag": flag, "choices": tuple(choices), "low": low,
            "high": high, "integer": integer}


# The supported ceiling of each count, declared once here and read by the dataclass check and the
# CLI alike (issue 23: work that grows with a number must stay bounded). Each is far beyond any
# published run -- Llama 3.1 405B trained on 16,384 GPUs with 16M-token batches (arXiv:2407.21783
# Sec. 3.3); the longest context served is 10M tokens (Llama 4 Scout model card) -- and small
# enough that every search over divisors and device counts ends in well under a second.
MAX_DEVICES = 1 << 24
MAX_BATCH = 1 << 40
MAX_SEQ = 1 << 24
MAX_DEGREE = 1 << 16
"""tp, pp, ep: a parallel degree (also bounded by the devices, the heads, the layers)"""
MAX_ROPE_SCALING = 1024.0


def limit_text(name: str, value, high) -> str:
    """'batch 1,000,000,000,000,000 exceeds the supported 2^40 (1,099,511,627,776)'."""
    shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
    lim = f"2^{high.bit_length() - 1} ({high:,})" if isinstance(high, int) and high > 1 and \
        high & (high - 1) == 0 else f"{high:g}"
    return f"{name} {shown} exceeds the supported {lim}"


SUITES = ("train", "infer", "block", "genslm", "ceilings")
MODES = ("resident", "weight_streaming", "sram_pipeline")
RECOMPUTE = ("none", "selective", "full")
OFFLOAD = ("none", "optimizer", "weights", "activations")
HEADS = ("lm", "mlm", "cls", "none")
RESIZABLE = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "max_seq_len")


@dataclass(frozen=True, kw_only=True)
class Layout:
    """How a workload is laid out over its devices. None = chosen by the engine."""

    tp: int | None = field(default=None, metadata=opt(
        "tensor-parallel degree (within a node)", low=1, high=MAX_DEGREE, integer=True))
    pp: int | None = field(default=None, metadata=opt(
        "pipeline-parallel degree (stages)", low=1, high=MAX_DEGREE, integer=True))
    zero: int | None = field(default=None, metadata=opt(
        "ZeRO / FSDP stage: 0 none, 1 optimizer, 2 +gradients, 3 +weights sharded", low=0, high=3,
        integer=True))
    recompute: str | None = field(default=None, metadata=opt(
        "activation recomputation", choices=RECOMPUTE))
    offload: str | None = field(default=None, metadata=opt(
        "state kept in a lower memory tier: optimizer state, the weights too (weight streaming), or "
        "the activations saved for the backward", choices=OFFLOAD))
    mode: str | None = field(default=None, metadata=opt(
        "execution mode (default: the hardware's)", choices=MODES))
    ep: int | None = field(default=None, metadata=opt(
        "expert-parallel degree: routed experts split over ep data-parallel replicas (MoE models)",
        low=1, high=MAX_DEGREE, integer=True))

    def __post_init__(self):
        _check_fields(self)

    def to_dict(self) -> dict:
        """The knobs; ep only when set (workload ids from before it existed stay the same)."""
        d = asdict(self)
        if d["ep"] is None:
            del d["ep"]
        return d


@dataclass(frozen=True, kw_only=True)
class Workload:
    """A point: model x hardware x workload, and its layout. Each default is declared here once."""

    model: str = field(metadata=opt("preset name, or a Hugging Face config.json path"))
    suite: str = field(default="train", metadata=opt("what runs", choices=SUITES))
    hardware: str | None = field(default=None, metadata=opt(
        "catalog name, e.g. a100-80gb, cs2 (measure: the device at hand)"))
    precision: str | None = field(default=None, metadata=opt(
        "compute precision (default: the hardware's, see point.precision_for)", choices=PRECISIONS))
    devices: int | None = field(default=None, metadata=opt(
        "devices (GPUs, wafers, ...) in all (default: training 1, or the processes under torchrun; "
        "inference: the fewest that hold the model)", unit="devices", low=1, high=MAX_DEVICES, integer=True))
    batch: int = field(default=1, metadata=opt(
        "global batch: sequences per optimizer step (inference: concurrent requests)",
        unit="sequences", low=1, high=MAX_BATCH, integer=True))
    micro_batch: int | None = field(default=None, metadata=opt(
        "sequences per data-parallel replica per micro-step (default: batch / (replicas x grad_accum))",
        unit="sequences", low=1, high=MAX_BATCH, integer=True))
    grad_accum: int | None = field(default=None, metadata=opt(
        "micro-steps per optimizer step (default: batch / (replicas x micro_batch), else 1)",
        low=1, high=MAX_BATCH, integer=True))
    seq_len: int = field(default=1024, metadata=opt(
        "sequence length (inference: prompt length)", unit="tokens", flag="--seq", low=1,
        high=MAX_SEQ, integer=True))
    gen_len: int = field(default=0, metadata=opt(
        "tokens generated per request (0: none, encoders)", unit="tokens", low=0, high=MAX_SEQ,
        integer=True))
    sparsity: float = field(default=0.0, metadata=opt(
        "fraction of dense-layer weights that are zero", unit="fraction", low=0.0, high=0.999))
    resize: dict = field(default_factory=dict, metadata=opt(
        "ModelSpec size changes of a shrunk model (n_layers, d_model, ...)"))
    head: str | None = field(default=None, metadata=opt(
        "model head if not the preset's (lm | mlm | cls | none)", choices=HEADS))
    rope_scaling: float | None = field(default=None, metadata=opt(
        "factor a rotary model's positions are stretched by beyond its config's maximum (YaRN, "
        "linear, NTK: as the run states it); needed for --seq beyond max_position_embeddings",
        unit="x", low=1.0, high=MAX_ROPE_SCALING))
    layout: Layout = field(default_factory=Layout)

    def __post_init__(self):
        _check_fields(self)
        if not isinstance(self.layout, Layout):
            object.__setattr__(self, "layout", Layout(**dict(self.layout)))
        bad = set(self.resize) - set(RESIZABLE)
        if bad:
            raise BadInput(f"resize may change only {', '.join(RESIZABLE)}; got {', '.join(sorted(bad))}")
        for k, v in self.resize.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise BadInput(f"resize.{k} must be a positive integer, got {v!r}")
        if self.micro_batch is not None and self.grad_accum is not None:
            need = self.micro_batch * self.grad_accum
            if self.batch % need:
                raise BadInput(f"batch {self.batch} is not a multiple of micro_batch x grad_accum ({need})")

    # ------------------------------------------------------------ derived
    @property
    def dp(self) -> int | None:
        """Data-parallel replicas, when tp and pp are known."""
        tp, pp, n = self.layout.tp or 1, self.layout.pp or 1, self.devices or 1
        return n // (tp * pp) if n % (tp * pp) == 0 else None

    def micro_steps(self, dp: int | None = None) -> tuple[int, int]:
        """(micro_batch, grad_accum) for `dp` replicas (default: self.dp), the one batch rule:
        batch = micro_batch x grad_accum x dp. Raises BadInput when they do not divide."""
        dp = dp or self.dp or 1
        if self.batch % dp:
            raise BadInput(f"batch {self.batch} does not split over {dp} data-parallel replicas")
        per_replica = self.batch // dp
        if self.micro_batch is not None:
            if per_replica % self.micro_batch:
                raise BadInput(f"per-replica batch {per_replica} is not a multiple of micro_batch {self.micro_batch}")
            ga = per_replica // self.micro_batch
            if self.grad_accum is not None and self.grad_accum != ga:
                raise BadInput(f"batch {self.batch} = {dp} replicas x micro_batch {self.micro_batch} x "
                               f"grad_accum {ga}, not {self.grad_accum}")
            return self.micro_batch, ga
        ga = self.grad_accum or 1
        if per_replica % ga:
            raise BadInput(f"per-replica batch {per_replica} does not split into {ga} micro-steps")
        return per_replica // ga, ga

    def spec(self, base=None):
        """The ModelSpec this workload runs: preset or HF config (or `base`, a ModelSpec given as
        an object: llmbench.api), resized, head. Prompt + generation must fit the model's
        positions (check_positions): a learned table is extended only when `resize` states
        max_seq_len (seed 002 Table III extends GPT-2 XL's to 8K); rotary positions beyond the
        config's maximum only with `rope_scaling` stated."""
        from llmbench.models import get_model
        from llmbench.models.spec import resize

        spec = get_model(self.model) if base is None else base
        changes = dict(self.resize)
        limit = check_positions(spec, self.seq_len + self.gen_len, changes.get("max_seq_len"), self.rope_scaling)
        if limit != spec.max_seq_len:
            changes["max_seq_len"] = limit
        if changes:
            spec = resize(spec, **changes)
        return spec.with_(head=self.head) if self.head and self.head != spec.head else spec

    def with_(self, **changes) -> "Workload":
        """A copy with some fields changed; layout knobs (tp, pp, ...) may be given flat."""
        lay = {k: changes.pop(k) for k in list(changes) if k in LAYOUT_FIELDS}
        if lay:
            changes["layout"] = replace(self.layout, **lay)
        return replace(self, **changes)

    # ------------------------------------------------------------ identity
    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["resize"] = dict(sorted(self.resize.items()))
        d["layout"] = self.layout.to_dict()
        if d["rope_scaling"] is None:  # ids from before it existed stay the same
            del d["rope_scaling"]
        return d

    def id(self) -> str:
        """sha256 of the workload alone: measured, predicted and published results of one workload
        share it (the results store keys a row by this id and its source)."""
        import hashlib  # here: its OpenSSL load is ~4 ms of every CLI start-up (issue 9)

        return hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()

    def key(self, source: str) -> str:
        """The results-store key of this workload's result from `source`."""
        import hashlib

        return hashlib.sha256(f"{self.id()}:{source}".encode()).hexdigest()

    @classmethod
    def from_dict(cls, d: dict) -> "Workload":
        """From `to_dict()` output (a results row's `point`); unknown keys are an error."""
        d = dict(d)
        lay = dict(d.pop("layout", None) or {})
        lay.update({k: d.pop(k) for k in list(d) if k in LAYOUT_FIELDS})
        unknown = set(d) - set(WORKLOAD_FIELDS)
        if unknown:
            raise BadInput(f"unknown workload fields {', '.join(sorted(unknown))}")
        return cls(**d, layout=Layout(**lay))

    @classmethod
    def from_row(cls, row: dict) -> "Workload":
        """From a published-reference CSV row (system, task, seq_len, layout columns) or a results
        row (its `point`)."""
        if "point" in row and isinstance(row["point"], dict):
            return cls.from_dict(row["point"])
        def num(k, typ=int):
            v = row.get(k)
            return None if v in (None, "") else typ(float(v))

        lay = {k: num(k) for k in ("tp", "pp", "zero")}
        lay["recompute"] = row.get("recompute") or None
        lay["offload"] = row.get("offload") or None
        return cls(model=row["model"], suite={"inference": "infer"}.get(row.get("task"), row.get("task") or "train"),
                   hardware=row.get("system") or row.get("hardware"), precision=row.get("precision") or None,
                   devices=num("devices"), batch=num("batch") or 1, seq_len=num("seq_len") or 1024,
                   gen_len=num("gen_len") or 0, micro_batch=num("micro_batch"), grad_accum=num("grad_accum"),
                   layout=Layout(**lay))


LAYOUT_FIELDS = tuple(f.name for f in fields(Layout))
WORKLOAD_FIELDS = tuple(f.name for f in fields(Workload))


def canonical_json(obj) -> str:
    """JSON with sorted keys and no whitespace: the same value always gives the same text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def check_positions(spec, need: int, table: int | None = None, rope_scaling: float | None = None) -> int:
    """The positions a run of `need` tokens (prompt + generation) uses on `spec`, or BadInput
    naming the rule. Learned positions have no entry past the table (its size, or `table` when
    the workload's resize states a longer one); rotary positions run to the config's maximum,
    beyond it only stretched by a stated `rope_scaling` (Llama 3.1's 131,072 come that way)."""
    limit = table or spec.max_seq_len
    if spec.position == "learned":
        if rope_scaling is not None:
            raise BadInput(f"rope_scaling applies to rotary positions; {spec.name} has learned positions")
        if need > limit:
            raise BadInput(f"{need:,} tokens exceed {spec.name}'s {limit:,} learned positions (a learned table "
                           f"has no entry beyond it; a longer table is another model: resize max_seq_len)")
        return limit
    if need <= limit:
        return limit
    if rope_scaling is None:
        raise BadInput(f"{need:,} tokens exceed {spec.name}'s {limit:,} rotary positions (max_position_embeddings); "
                       f"state --rope-scaling {math.ceil(need / limit)} (or more) to run beyond them")
    if need > limit * rope_scaling:
        raise BadInput(f"{need:,} tokens exceed {spec.name}'s {limit:,} rotary positions x rope scaling "
                       f"{rope_scaling:g} ({int(limit * rope_scaling):,})")
    return need


def _check_fields(obj) -> None:
    """Types, ranges and choices of every field, from its metadata; one line naming the field."""
    for f in fields(obj):
        v, m = getattr(obj, f.name), f.metadata
        if v is None or not m:
            if v is None and f.default is MISSING and f.default_factory is MISSING:
                raise BadInput(f"{f.name} is required")
            continue
        if m["integer"]:
            if isinstance(v, bool) or not isinstance(v, int):
                if isinstance(v, float) and v.is_integer():
                    object.__setattr__(obj, f.name, int(v))
                    v = int(v)
                else:
                    raise BadInput(f"{f.name} must be an integer, got {v!r}")
        elif m["low"] is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise BadInput(f"{f.name} must be a finite number, got {v!r}")
        if m["high"] is not None and m["low"] is not None and v > m["high"] >= 1024:
            raise BadInput(limit_text(f.name, v, m["high"]))
        if m["low"] is not None and v < m["low"] or m["high"] is not None and v > m["high"]:
            big = m["high"] is None or m["high"] >= 1024  # a supported ceiling, not a range
            rng = f">= {m['low']}" if big else f"in [{m['low']}, {m['high']}]"
            raise BadInput(f"{f.name} must be {rng}, got {v!r}")
        if m["choices"] and v not in m["choices"]:
            raise BadInput(f"{f.name} must be one of {', '.join(m['choices'])}, got {v!r}")
        if f.name in ("model", "hardware") and not isinstance(v, str):
            raise BadInput(f"{f.name} must be a name, got {v!r}")
