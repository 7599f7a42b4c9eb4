"""What a weight-streaming run and a pipelined inference run are asked to do (no torch).

    from llmbench.streaming.config import StreamOptions, stream_workload
    w = stream_workload("tiny", layers=2, batch=8, seq_len=64)   # a point.Workload; batch is global
    opts = StreamOptions(store="disk:~/st", steps=20)            # store parsed once into a Tier
    opts.store           # Tier(kind='disk', path=PosixPath('/home/me/st'))

`stream train|compare` take a Workload (what runs: model, resize, global batch, seq_len,
precision, sparsity, Layout.recompute) and `StreamOptions` (how: store, prefetch, steps, lr,
seed, budget), as `measure` takes a Workload and RunOptions; `StreamRun.of` derives what one rank
runs. `PipelineConfig` drives the pipelined inference (llmbench/streaming/pipeline.py). Every
field carries its CLI metadata (point.opt); each default is declared here once.
Importing this module imports no torch (tests/test_stream_config.py checks it in a subprocess).
Bad values raise `llmbench.errors.BadInput` with one line naming the option.
"""
from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from llmbench.errors import BadInput
from llmbench.point import _check_fields, opt

#: precisions of the weights streamed to (and the compute on) the device; masters stay fp32
PRECISIONS = ("fp32", "bf16", "fp16")
#: the largest --layers/--width/--heads/--vocab taken (beyond any model built: a typo, not a model)
RESIZE_HIGH = {"layers": 100_000, "width": 2 ** 20, "heads": 2 ** 16, "vocab": 2 ** 24}
#: the tiny test model as a resize of GPT-2 small: 4 layers, width 64, 4 heads, vocab 256
TINY = dict(n_layers=4, d_model=64, n_heads=4, vocab_size=256, max_seq_len=128)


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
class StreamOptions:
    """How a `stream train` / `stream compare` runs (what it runs is the Workload, llmbench/point.py),
    as measure's RunOptions (measure/options.py): results are keyed without these."""

    device: str = field(default="auto", metadata=opt(
        "torch device: auto (the accelerator if any), cpu, cuda, cuda:1 ..."))
    store: Tier = field(default_factory=Tier, metadata=opt(
        "where the fp32 masters and Adam moments live: ram | disk:PATH"))
    prefetch: int = field(default=1, metadata=opt(
        "layers loaded ahead of the one computing", unit="layers", low=0, integer=True))
    steps: int = field(default=20, metadata=opt(
        "train: optimizer steps in all (a resumed run continues up to this step); compare: timed "
        "step pairs after the warm-up", low=1, integer=True))
    warmup_steps: int = field(default=1, metadata=opt(
        "steps left out of the figures (compare: pairs run before the timed ones)", low=0, integer=True))
    lr: float = field(default=1e-3, metadata=opt("AdamW learning rate", low=0.0))
    seed: int = field(default=0, metadata=opt("seed of the initial weights and of the data", low=0, integer=True))
    device_memory_budget_bytes: int | None = field(default=None, metadata=opt(
        "bytes the run may use on the device; over it: exit 2", unit="bytes", flag="--device-memory-budget",
        low=1, integer=True))
    resume: bool = field(default=False, metadata=opt("continue from the disk store's last committed step"))
    overwrite: bool = field(default=False, metadata=opt("replace an existing store at the --store path"))
    check_ranks: bool = field(default=False, metadata=opt(
        "data parallel: hash every layer's weights on every rank, every step"))
    loss_scale_init: float = field(default=2.0 ** 16, metadata=opt(
        "fp16: initial dynamic loss scale (GradScaler's init_scale)", low=1.0))
    loss_scale_growth_interval: int = field(default=2000, metadata=opt(
        "fp16: steps without overflow before the scale doubles", low=1, integer=True))

    def __post_init__(self) -> None:
        object.__setattr__(self, "store", Tier.parse(self.store))
        _check_fields(self)
        if not (self.lr > 0 and self.lr < float("inf")):
            raise BadInput(f"--lr must be a positive finite number, got {self.lr}")
        if self.resume and self.store.kind != "disk":
            raise BadInput("--resume needs a disk store (--store disk:PATH)")
        if self.resume and self.overwrite:
            raise BadInput("--resume and --overwrite exclude each other")


@dataclass(frozen=True, kw_only=True)
class StreamRun:
    """What one rank runs, derived from a resolved Workload and StreamOptions by `StreamRun.of`
    (never by hand): the per-rank batch of the global one, and the options the trainers read."""

    batch: int
    """sequences per step on this rank: the Workload's global batch / ranks (Workload.micro_steps)"""
    seq: int
    precision: str
    sparsity: float
    recompute: bool
    """Layout.recompute == "full": keep each block's input only, run its forward again in the backward"""
    device: str
    store: Tier
    prefetch: int
    steps: int
    warmup_steps: int
    lr: float
    seed: int
    device_memory_budget_bytes: int | None
    resume: bool
    overwrite: bool
    check_ranks: bool
    loss_scale_init: float
    loss_scale_growth_interval: int

    @classmethod
    def of(cls, w, opts: StreamOptions, world: int = 1) -> "StreamRun":
        """From a Workload resolved for the run (precision set) and its options; BadInput for what
        the streaming runtime does not run (grad accumulation, selective recompute, other precisions)."""
        micro, accum = w.micro_steps(world)
        if accum != 1:
            raise BadInput(f"stream runs one micro-step per optimizer step; batch {w.batch} over "
                           f"{world} ranks asks grad_accum {accum}")
        if w.precision not in PRECISIONS:
            raise BadInput(f"stream runs precision {', '.join(PRECISIONS)}, not {w.precision}")
        if w.layout.recompute not in (None, "none", "full"):
            raise BadInput(f"stream recomputes whole blocks (--recompute full) or none, not {w.layout.recompute}")
        return cls(batch=micro, seq=w.seq_len, precision=w.precision, sparsity=w.sparsity,
                   recompute=w.layout.recompute == "full",
                   **{f.name: getattr(opts, f.name) for f in fields(StreamOptions)})


def stream_workload(model: str = "tiny", *, layers: int | None = None, width: int | None = None,
                    heads: int | None = None, vocab: int | None = None, **kw):
    """A training Workload of `model` ('tiny': GPT-2 small resized to TINY) with the stream CLI's
    shorthand size overrides as `resize` (d_ff and the KV heads follow, models.spec.resize)."""
    from llmbench.point import Workload

    resize = dict(TINY) if model == "tiny" else {}
    resize.update({k: v for k, v in (("n_layers", layers), ("d_model", width), ("n_heads", heads),
                                     ("vocab_size", vocab)) if v is not None})
    kw = {"suite": "train", "batch": 8, "seq_len": 64, **kw}
    return Workload(model="gpt2-small" if model == "tiny" else model, resize=resize, **kw)


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """One pipelined inference run: layers split over the ranks of `torchrun`, weights and KV cache
    resident on each stage, requests micro-batched so that every stage works every step."""

    model: str = field(default="tiny", metadata=opt("preset name, or 'tiny' (GPT-2 small resized: 4 layers, width 64, vocab 256)"))
    layers: int | None = field(default=None, metadata=opt("resize: n_layers", low=1, high=RESIZE_HIGH["layers"], integer=True))
    width: int | None = field(default=None, metadata=opt("resize: d_model (d_ff follows)", low=1, high=RESIZE_HIGH["width"], integer=True))
    heads: int | None = field(default=None, metadata=opt("resize: n_heads", low=1, high=RESIZE_HIGH["heads"], integer=True))
    vocab: int | None = field(default=None, metadata=opt("resize: vocab_size", low=1, high=RESIZE_HIGH["vocab"], integer=True))
    batch: int = field(default=4, metadata=opt(
        "concurrent requests, split into micro-batches", unit="sequences", low=1, integer=True))
    micro_batches: int | None = field(default=None, metadata=opt(
        "micro-batches in flight (default: one per stage, every stage busy every step)", low=1, integer=True))
    prompt_len: int = field(default=16, metadata=opt("input tokens per request", unit="tokens", low=1, integer=True))
    gen_len: int = field(default=8, metadata=opt("generated tokens per request (greedy)", unit="tokens",
                                                 low=1, integer=True))
    device: str = field(default="cpu", metadata=opt(
        "torch device: cpu, cuda, auto ...; under torchrun each rank takes device index LOCAL_RANK"))
    precision: str = field(default="fp32", metadata=opt(
        "weights, KV cache and activations", choices=PRECISIONS))
    seed: int = field(default=0, metadata=opt(
        "seed of the weights (the training initialiser) and of the prompts", low=0, integer=True))
    stage_memory_budget_bytes: int | None = field(default=None, metadata=opt(
        "bytes each stage may hold (weights + KV cache + activations)", unit="bytes",
        flag="--stage-memory-budget", low=1, integer=True))
    balance: str = field(default="layers", metadata=opt(
        "layer split: layers (even) | decode (the last stage, which also runs the LM head, takes fewer)",
        choices=("layers", "decode")))
    warmup_runs: int = field(default=1, metadata=opt("untimed generations first", low=0, integer=True))

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


def check_causal_lm(spec) -> None:
    """The stream runtimes train and generate causal LMs only."""
    if spec.head != "lm" or not spec.causal:
        raise BadInput(f"stream runs causal LMs; {spec.name} has a {spec.head!r} head")


def workload_and_options(*, model: str = "tiny", layers=None, width=None, heads=None, vocab=None,
                         batch: int = 8, seq: int = 64, precision: str | None = None, sparsity: float = 0.0,
                         recompute: bool = False, **options):
    """(Workload, StreamOptions) from one flat set of keywords, the CLI's names (scripts and tests:
    `workload_and_options(model="tiny", layers=2, batch=4, seq=16, steps=3, device="cpu")`)."""
    from llmbench.point import Layout

    options.setdefault("device", "cpu")
    w = stream_workload(model, layers=layers, width=width, heads=heads, vocab=vocab, batch=batch, seq_len=seq,
                        precision=precision, sparsity=sparsity, layout=Layout(recompute="full" if recompute else None))
    return w, StreamOptions(**options)


def spec_of(cfg: PipelineConfig, context: int):
    """The ModelSpec the pipeline runs: its Workload's (resized, positions long enough for `context`).
    Torch-free: `stream infer` checks the prompt + generation against the model's positions with it
    before importing torch (issue 23: a 100,000-token prompt on a 128-position model answers at once)."""
    w = stream_workload(cfg.model, layers=cfg.layers, width=cfg.width, heads=cfg.heads, vocab=cfg.vocab,
                        suite="infer", batch=cfg.batch, seq_len=context)
    spec = w.spec()
    check_causal_lm(spec)
    return spec
