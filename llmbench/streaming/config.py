"""What a weight-streaming run and a pipelined inference run are asked to do (no torch).

    from llmbench.streaming.config import StreamConfig, PipelineConfig, Tier
    cfg = StreamConfig(model="tiny", store="disk:~/st", precision="bf16")   # store parsed once
    cfg.store            # Tier(kind='disk', path=PosixPath('/home/me/st'))

`StreamConfig` drives `llmbench stream train|compare` (llmbench/streaming/run.py),
`PipelineConfig` drives the pipelined inference (llmbench/streaming/pipeline.py). Each default is
declared here once: the CLI reads the defaults from these dataclasses (`defaults(StreamConfig)`).
Importing this module imports no torch (tests/test_stream_config.py checks it in a subprocess).
Bad values raise `llmbench.errors.BadInput` with one line naming the option.
"""
from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from llmbench.errors import BadInput

#: precisions of the weights streamed to (and the compute on) the device; masters stay fp32
PRECISIONS = ("fp32", "bf16", "fp16")
#: the tiny test model: GPT-2 shape, 4 layers, width 64, vocab 256
TINY = dict(n_layers=4, d_model=64, n_heads=4, n_kv_heads=0, d_ff=0, vocab_size=256, max_seq_len=128)


@dataclass(frozen=True, kw_only=True)
class Tier:
    """Where a ParameterStore lives: host RAM, or memory-mapped files in a directory."""

    kind: str = "ram"
    """ram | disk"""
    path: Path | None = None
    """the store directory (disk only; `~` expanded, made absolute)"""

    def __post_init__(self) -> None:
        if self.kind not in ("ram", "disk"):
            raise BadInput(f"--store must be 'ram' or 'disk:PATH', got kind {self.kind!r}")
        if (self.kind == "disk") != (self.path is not None):
            raise BadInput("--store: a disk tier needs a path (disk:PATH), a ram tier none")

    @classmethod
    def parse(cls, text: "str | Tier") -> "Tier":
        """'ram' -> Tier('ram'); 'disk:PATH' -> Tier('disk', PATH with ~ expanded, absolute)."""
        if isinstance(text, Tier):
            return text
        if not isinstance(text, str):
            raise BadInput(f"--store must be 'ram' or 'disk:PATH', got {text!r}")
        if text == "ram":
            return cls()
        if text.startswith("disk:") and text[5:].strip():
            return cls(kind="disk", path=Path(os.path.abspath(os.path.expanduser(text[5:]))))
        raise BadInput(f"--store must be 'ram' or 'disk:PATH', got {text!r}")

    def __str__(self) -> str:
        return "ram" if self.kind == "ram" else f"disk:{self.path}"


def _positive(cfg, names) -> None:
    for name in names:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise BadInput(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")


def _overrides(cfg) -> None:
    for name in ("layers", "width", "heads", "vocab"):
        v = getattr(cfg, name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise BadInput(f"--{name} must be a positive integer, got {v!r}")
    if cfg.precision not in PRECISIONS:
        raise BadInput(f"--precision must be one of {', '.join(PRECISIONS)}, got {cfg.precision!r}")


@dataclass(frozen=True, kw_only=True)
class StreamConfig:
    """One `stream train` / `stream compare` run."""

    model: str = "tiny"
    """a preset name, or `tiny` (GPT-2 shape, 4 layers, width 64, vocab 256)"""
    layers: int | None = None
    """override n_layers (layers)"""
    width: int | None = None
    """override d_model (elements; d_ff becomes 4 x width)"""
    heads: int | None = None
    """override n_heads (heads)"""
    vocab: int | None = None
    """override vocab_size (tokens)"""
    batch: int = 8
    """sequences per optimizer step, per rank"""
    seq: int = 64
    """tokens per sequence"""
    steps: int = 20
    """total training steps (a resumed run continues up to this step)"""
    store: Tier = field(default_factory=Tier)
    """where the fp32 masters and Adam state live: `ram` or `disk:PATH` (a string is parsed)"""
    device: str = "cpu"
    """cpu | cuda | cuda:1 | auto ... (llmbench.measure.device.resolve)"""
    precision: str = "fp32"
    """fp32 | bf16 | fp16: dtype of the weights streamed to the device and of its compute; the
    store keeps fp32 masters and fp32 Adam moments, gradients reach the store in fp32"""
    prefetch: int = 1
    """layers loaded ahead of the one computing (layers)"""
    sparsity: float = 0.0
    """fraction of each weight matrix pruned by magnitude at step 0 and kept at zero (0 to <1)"""
    device_memory_budget_bytes: int | None = None
    """bytes the run may use on the device (weights, gradients, activations); None: no limit"""
    resume: bool = False
    """continue from the disk store's last committed step"""
    overwrite: bool = False
    """replace an existing store at the disk path (without it, an existing store is refused)"""
    recompute: bool = False
    """keep only each block's input on the device; recompute the block's forward in the backward"""
    lr: float = 1e-3
    """AdamW learning rate (dimensionless)"""
    seed: int = 0
    """seed of the initial weights and of the synthetic data"""
    warmup_steps: int = 1
    """steps left out of tokens_per_s (reported as warmup_s)"""
    check_ranks: bool = False
    """data parallel: hash every layer's weights on every rank, every step"""
    loss_scale_init: float = 2.0 ** 16
    """fp16 only: initial dynamic loss scale (torch.amp.GradScaler's init_scale)"""
    loss_scale_growth_interval: int = 2000
    """fp16 only: steps without overflow before the scale doubles (GradScaler's growth_interval)"""

    def __post_init__(self) -> None:
        object.__setattr__(self, "store", Tier.parse(self.store))
        _positive(self, ("batch", "seq", "steps", "loss_scale_growth_interval"))
        _overrides(self)
        if not isinstance(self.prefetch, int) or self.prefetch < 0:
            raise BadInput(f"--prefetch must be >= 0, got {self.prefetch!r}")
        if not 0.0 <= self.sparsity < 1.0:
            raise BadInput(f"--sparsity must be in [0, 1), got {self.sparsity}")
        if self.device_memory_budget_bytes is not None and not self.device_memory_budget_bytes > 0:
            raise BadInput("--device-memory-budget must be a positive number of bytes")
        if not (self.lr > 0 and self.lr < float("inf")):
            raise BadInput(f"--lr must be a positive finite number, got {self.lr}")
        if not (1.0 <= self.loss_scale_init < float("inf")):
            raise BadInput(f"--loss-scale-init must be a finite number >= 1, got {self.loss_scale_init}")
        if self.warmup_steps < 0:
            raise BadInput(f"--warmup-steps must be >= 0, got {self.warmup_steps}")
        if self.resume and self.store.kind != "disk":
            raise BadInput("--resume needs a disk store (--store disk:PATH)")
        if self.resume and self.overwrite:
            raise BadInput("--resume and --overwrite exclude each other")


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """One pipelined inference run: layers split over the ranks of `torchrun`, weights and KV cache
    resident on each stage, requests micro-batched so that every stage works every step."""

    model: str = "tiny"
    """a preset name, or `tiny`"""
    layers: int | None = None
    """override n_layers (layers)"""
    width: int | None = None
    """override d_model (elements)"""
    heads: int | None = None
    """override n_heads (heads)"""
    vocab: int | None = None
    """override vocab_size (tokens)"""
    batch: int = 4
    """concurrent requests (sequences), split into micro-batches"""
    micro_batches: int | None = None
    """micro-batches in flight; None: one per stage (every stage busy every step)"""
    prompt_len: int = 16
    """input tokens per request"""
    gen_len: int = 8
    """generated tokens per request (greedy)"""
    device: str = "cpu"
    """cpu | cuda | auto ...; under torchrun each rank takes device index LOCAL_RANK"""
    precision: str = "fp32"
    """fp32 | bf16 | fp16: weights, KV cache and activations"""
    seed: int = 0
    """seed of the weights (the same per-group initialiser as training) and of the prompts"""
    stage_memory_budget_bytes: int | None = None
    """bytes each stage may hold (weights + KV cache + activations); None: no limit"""
    balance: str = "layers"
    """layer split: `decode` (the last stage takes fewer layers for the LM head it also runs, whose
    (V x d) matrix every generated token reads) | `layers` (layers split evenly)"""
    warmup_runs: int = 1
    """whole generations run (and discarded) before the timed one"""

    def __post_init__(self) -> None:
        _positive(self, ("batch", "prompt_len", "gen_len"))
        _overrides(self)
        if self.micro_batches is not None:
            _positive(self, ("micro_batches",))
            if self.batch % self.micro_batches:
                raise BadInput(f"--batch {self.batch} must split into --micro-batches "
                               f"{self.micro_batches} equal parts")
        if self.stage_memory_budget_bytes is not None and not self.stage_memory_budget_bytes > 0:
            raise BadInput("--stage-memory-budget must be a positive number of bytes")
        if self.balance not in ("decode", "layers"):
            raise BadInput(f"--balance must be decode or layers, got {self.balance!r}")
        if not isinstance(self.warmup_runs, int) or self.warmup_runs < 0:
            raise BadInput(f"--warmup-runs must be >= 0, got {self.warmup_runs!r}")


def defaults(cls) -> dict:
    """{field: default} of a config dataclass (what the CLI shows and uses)."""
    out = {}
    for f in fields(cls):
        out[f.name] = f.default_factory() if f.default is MISSING else f.default
    return out


def resolve_spec(cfg, seq: int | None = None):
    """The ModelSpec of `model` with the layers/width/heads/vocab overrides, long enough for `seq`
    tokens (a `tiny` or rotary model grows its max_seq_len; a learned-position preset refuses)."""
    from llmbench.models import get_model

    spec = get_model("gpt2-small").with_(name="tiny", **TINY) if cfg.model == "tiny" else get_model(cfg.model)
    changes = {}
    if cfg.layers is not None:
        changes["n_layers"] = cfg.layers
    if cfg.width is not None:
        changes.update(d_model=cfg.width, d_ff=0)
    if cfg.heads is not None:
        changes.update(n_heads=cfg.heads, n_kv_heads=0)
    if cfg.vocab is not None:
        changes["vocab_size"] = cfg.vocab
    seq = cfg.seq if seq is None else seq
    if seq > spec.max_seq_len:
        if spec.position == "learned" and cfg.model != "tiny":
            raise BadInput(f"--seq {seq} exceeds {spec.name}'s max_seq_len {spec.max_seq_len}")
        changes["max_seq_len"] = seq
    if spec.head != "lm" or not spec.causal:
        raise BadInput(f"stream runs causal LMs; {spec.name} has a {spec.head!r} head")
    try:
        return spec.with_(**changes) if changes else spec
    except ValueError as e:
        raise BadInput(str(e)) from None


def workload_model(cfg) -> tuple[str, dict]:
    """(model, resize) of the point vocabulary (llmbench.point.Workload) for a run's model and its
    overrides: `Workload(model=..., resize=...).spec()` has the shape resolve_spec builds (the tiny
    model is GPT-2 small resized; an overridden width keeps d_ff = 4 x width, as resolve_spec)."""
    resize = {k: v for k, v in TINY.items() if v} if cfg.model == "tiny" else {}
    if cfg.layers is not None:
        resize["n_layers"] = cfg.layers
    if cfg.width is not None:
        resize.update(d_model=cfg.width, d_ff=4 * cfg.width)
    if cfg.heads is not None:
        resize.update(n_heads=cfg.heads, n_kv_heads=cfg.heads)
    if cfg.vocab is not None:
        resize["vocab_size"] = cfg.vocab
    return ("gpt2-small" if cfg.model == "tiny" else cfg.model), resize
