"""The physics of one serving step, and the serving engine as a knob (torch-free).

    from llmbench.perfmodel.serving import step_model
    sm = step_model(spec, hw, Workload(model=..., hardware=..., suite="infer", devices=1))
    sm.time_s(prefill_tokens=0, decode_seqs=64, kv_tokens_read=64 * 1100)   # one decode step, s
    sm.parts(0, 64, 64 * 1100).bound                                        # 'memory'
    sm.kv_capacity_tokens                                                   # per replica

A step of an engine runs `prefill_tokens` prompt tokens (whole prompts or chunks) and one token for
each of `decode_seqs` running sequences, reading `kv_tokens_read` cached tokens in attention. Times
are one replica's (tp x pp devices; pipeline stages run one after another for a step, except that
on wafers (sram_pipeline) a decode step's sequences go round the stages in up to pp groups at once):

    compute  = GEMM FLOPs / (peak x compute_max x prefill_efficiency), a GEMM of M rows costing as
               max(M, SMALL_M_TILE) rows (tensor-core tiles: M = 1 costs a 64-row tile on a GPU)
               + attention FLOPs (FlashAttention-class: no T^2 memory traffic)
    memory   = (weight bytes read + KV bytes read and written + activations) / (bandwidth x
               engine.bandwidth_fraction); a MoE step reads the experts its tokens route to
               (moe.experts_hit); weights beyond HBM on a DDR-tier device are read at DDR bandwidth;
               on a CPU a GEMM of >= 2 rows reads its weights GEMM_WEIGHT_PASSES times (packing);
               an engine release without a grouped-query decode kernel reads each KV head once
               per query head (RELEASES)
    step     = max(GEMM FLOPs, weights) + max(attention FLOPs, KV cache) + activations: the
               kernels one after another, each at its own roofline (at a large batch the GEMMs are
               compute-bound while attention streams the KV cache: the two add)
               + 2 all-reduces per layer under TP (latency-bound when small) + pipeline hops
               + engine.step_overhead_s + layers x engine.layer_floor_s (the small kernels a
               roofline does not time: norms, rotary, the KV-cache write, the activation)

A StepModel may instead carry its GEMMs' measured times (GemmTimes: F.linear timed by rows on the
device, measure/kernels.py): the GEMMs then cost what was measured, weights read included, and the
roofline keeps attention, the KV cache and activations. Profiling the kernels as Vidur (MLSys 2024)
does, for a device whose small-row GEMMs no roofline describes (a CPU BLAS: docs/serve.md).

Engines (engines.toml) carry the efficiencies a serving stack reaches and how it holds its KV
cache (memory fraction, paged block, MLA latent replicated under TP). docs/predict.md "Serving".
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmbench import footprint
from llmbench.footprint import KV_PRECISIONS
from llmbench._toml import tomllib
from llmbench._xp import backend_for, is_scalar
from llmbench.errors import BadInput
from .moe import experts_hit
from .params import ENGINE_FIT_FILE, resolve_params  # ENGINE_FIT_FILE: the pooled fit's engines
from .shapes import shape
from .step import attn_peak, gemm_peak, ring

ENGINES_FILE = Path(__file__).with_name("engines.toml")
#: the engine assumed per hardware family when none is given (docs/predict.md says why)
DEFAULT_ENGINE = {"NVIDIA": "trtllm", "AMD": "vllm", "Google": "jetstream"}
#: engines whose AMD (ROCm) build runs kernels of its own and so has efficiencies of its own
#: (engines.toml [vllm-rocm] says where from): on an AMD GPU the name means that build
ROCM_BUILD = {"vllm": "vllm-rocm"}
#: rows of the smallest GEMM tile a step's matmuls are padded to, per hardware kind: a GPU's
#: smallest tensor-core MMA is 16 rows (PTX ISA mma.sync m16n8k16, Ampere and Hopper; small-M
#: decode kernels use it); TPU MXU 128 x 128 (Google Cloud TPU docs, v5e); Gaudi MME and RDU:
#: 128 assumed; a wafer (per-row dataflow) and a CPU: no padding
SMALL_M_TILE = {"gpu": 16, "tpu": 128, "hpu": 128, "rdu": 128, "ipu": 16, "wafer": 1, "cpu": 1}
#: passes over a GEMM's weight bytes when it has M >= 2 rows (M = 1: one pass everywhere), per
#: hardware kind; 1 where absent. A CPU BLAS runs M = 1 as a matrix-vector product that streams the
#: weights once, and M >= 2 as a GEMM that first packs panels of the weight matrix into a contiguous
#: buffer, one thread doing it before the kernel reads the packed copy (Goto & van de Geijn, "Anatomy
#: of high-performance matrix multiplication", ACM TOMS 34(3), 2008; Intel, "Introducing the new
#: packed APIs for GEMM", 2016/2019: packing "can be costly, especially for input matrices with one
#: or more small dimensions"; torch's CPU build calls MKL sgemm). Measured on this 2-core EPYC
#: (benchmarks/cpu_small_m.py, F.linear of M rows x 256 against the 50,257 x 256 LM head, one
#: thread): t(M = 2..8) / t(M = 1) = 1.8-2.6 over four runs on 2026-12-03, fitted passes 1.8-2.5
#: by form and run; 2.0 taken (the lead's run: 13.3 / 6.3 ms = 2.1). Not fitted on any served
#: trace; the extra pass is weight time under the GEMMs' max(FLOPs, weights) (docs/serve.md "Checked against
#: a real runtime" says why not summed).
GEMM_WEIGHT_PASSES = {"cpu": 2.0}
#: activations between layers and the all-reduced tensors stay 16-bit under fp8/fp4 weights
ACT_BYTES = 2.0


@dataclass(frozen=True, kw_only=True)
class Engine:
    """A serving engine's efficiencies and KV-cache rules (engines.toml: each value's source)."""

    name: str
    description: str = ""
    bandwidth_fraction: float | None = None
    """share of device-memory bandwidth a decode step reaches (None: the hardware profile's)"""
    step_overhead_s: float | None = None
    """fixed time per step (None: the hardware profile's per-layer overheads x layers)"""
    layer_floor_s: float = 0.0
    """fixed time per decoder layer of every step: the small kernels a roofline does not time
    (norms, rotary, KV-cache write, activation, the attention kernel's floor), each launched once
    per layer; 0 for the native stack, whose per-layer latency is the hardware profile's"""
    prefill_efficiency: float = 1.0
    """multiplier on the hardware's large-GEMM efficiency (compute_max)"""
    request_overhead_s: float = 0.0
    """fixed time per request outside the engine steps, in its TTFT and end-to-end latency once:
    tokenizing the prompt, detokenizing the first token, the request's host round trip"""
    kv_mem_fraction: float = 0.9
    kv_mem_basis: str = "total"
    """'total': fraction x memory - weights; 'free': fraction x (memory - weights)"""
    block_tokens: int = 16
    mla_replicated_tp: bool = True
    chunked_prefill_tokens: int = 0
    """step token budget when the engine chunks prompts (0: whole prompts)"""
    fp8_kv_default: bool = False
    collective_latency_s: float | None = None
    """latency of one tensor-parallel all-reduce hop (None: the interconnect's): a custom one-shot
    all-reduce (TensorRT-LLM, vLLM) against NCCL's"""
    parent: str | None = None
    """an engine this one is a build of (engines.toml): in the pooled fit its rows see the parent's
    fitted efficiencies and fit only their own difference from them (pooled.design), so with no
    row of its own it runs at its parent's fit"""
    gqa_decode_kernel: bool = True
    """decode attention reads each KV head once for its group of query heads; False: once per
    query head (an engine release without a grouped-query generation kernel: RELEASES)"""
    max_num_seqs: int | None = None
    """sequences a replica runs at once by default, beyond which requests queue (an engine
    release's cap: RELEASES); None: no cap of the engine's own, the KV cache (or the client) binds"""
    sources: dict = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "sources"}


#: engine releases before a kernel the current one has: engine -> ((first release with it, the
#: Engine fields of the releases before it), ...). TensorRT-LLM's XQA kernel, its generation-phase
#: kernel for multi- and grouped-query attention, came with v0.8 (TensorRT-LLM blog "New XQA-kernel
#: provides 2.4x more Llama-70B throughput within the same latency budget": "will be included in
#: the v0.8 releases"; Llama-70B, 1 H200, 128/2048: 1,227 tok/s/GPU without XQA, 2,941 with): before
#: it, each query head's decode attention read its KV head on its own
#: vLLM built upstream for ROCm kept its custom all-reduce off before v0.8.3 ("Disabled the custom
#: all-reduce kernel because it is not supported on AMD GPUs", vllm-project/vllm PR #16010,
#: 2025-04-03, enabling it on gfx94; AMD's own build had one: engines.toml vllm-rocm): every TP
#: all-reduce went through RCCL, 46-55 us for 8 B-64 KB on 8 MI300X
#: (ROCm/rccl issue #1562, all_reduce_perf -g 8, RCCL 2.20.5): half of ~50 us per hop, as
#: collective_latency_s counts two.
#: vLLM's V0 engine ran at most 256 sequences a step unless told otherwise (EngineArgs max_num_seqs
#: default 256). V1 became the default at 0.8.0 on CUDA; on ROCm it stayed opt-in and "experimental"
#: through 0.9.0 (vLLM 0.9.0.2's warning, vllm-project/vllm issue #19332) and became the default with
#: PR #19440 (merged 2025-06-10): 0.9.1 is taken as the first ROCm release with it. V1's own
#: defaults depend on the device (on_device). A run that set --max-num-seqs says so in its release
#: text (`release`: "max_num_seqs=N")
_V0_CAP = {"max_num_seqs": 256}
RELEASES = {"trtllm": (((0, 8, 0), {"gqa_decode_kernel": False}),),
            "vllm": (((0, 8, 0), _V0_CAP),),
            "vllm-rocm": (((0, 9, 1), _V0_CAP),),
            "vllm-rocm-upstream": (((0, 8, 3), {"collective_latency_s": 25e-6}),)}


def release(eng: Engine, version: str | None) -> Engine:
    """`eng` as its release `version` ran (RELEASES); '<X.Y' is the last release before X.Y (a row
    whose source names none but whose date bounds it: it lacks what X.Y brought); a version that
    does not start with a release number ('not stated', '') is taken as the current release; a
    pre-release (X.Y.Zrc1, .dev) as the release before X.Y.Z. 'max_num_seqs=N' anywhere in the
    text is a cap the run set itself, over the release's. A build (Engine.parent) ran its parent's
    releases and its own."""
    text = (version or "").strip()
    m = re.match(r"(<)?\s*[vV]?(\d+)\.(\d+)(?:\.(\d+))?(rc|dev|a|b|\.dev)?", text)
    changes = {}
    if m is not None:
        before = m.group(1) or m.group(5)
        v = tuple(int(x or 0) for x in m.groups()[1:4])
        for first, fields in RELEASES.get(eng.parent, ()) + RELEASES.get(eng.name, ()):  # a build: its parent's too
            if v < first or (before and v <= first):
                changes.update(fields)
    stated = re.search(r"max_num_seqs\s*=\s*(\d+)", text)
    if stated:
        changes["max_num_seqs"] = int(stated.group(1))
    return replace(eng, **changes) if changes else eng


#: Engine fields a fit may move (validate's engine fit; shipped in profiles/engines.json)
FITTED = ("bandwidth_fraction", "step_overhead_s", "prefill_efficiency", "request_overhead_s")


def _engine(name: str, data: dict, fit: dict) -> Engine:
    body = {k: v for k, v in data.items() if k != "sources"}
    body.update({k: v for k, v in fit.items() if k in FITTED})
    return Engine(name=name, sources=dict(data.get("sources", {})), **body)


def load_engines(fitted: bool = True) -> dict[str, Engine]:
    """Every engine of engines.toml: its priors, with the pooled fit's values over them when
    `fitted` (ENGINE_FIT_FILE of the calibration in use: the one beside the hardware profiles
    params.profile_dirs reads first), so a prediction runs the engines `validate` fitted."""
    return _load_engines(engine_fit_path() if fitted else None)


@lru_cache(maxsize=8)
def _load_engines(fit_path: str | None) -> dict[str, Engine]:
    with open(ENGINES_FILE, "rb") as f:
        data = tomllib.load(f)
    fit = read_engine_fit(fit_path)["engines"] if fit_path else {}
    return {name: _engine(name, _inherited(data, name), fit.get(name, {}).get("params", {})) for name in data}


def _inherited(data: dict, name: str) -> dict:
    """Engine `name`'s table over its parent's (Engine.parent; sources likewise): a build of an
    engine states only what differs."""
    body = data[name]
    if "parent" not in body:
        return body
    base = _inherited(data, body["parent"])
    return {**base, **body, "sources": {**base.get("sources", {}), **body.get("sources", {})}}


def engine_fit_path() -> str | None:
    """ENGINE_FIT_FILE in the first profile folder that has one (a profile file: its folder)."""
    from .params import profile_dirs

    for d in profile_dirs():
        f = (d.parent if d.is_file() else d) / ENGINE_FIT_FILE
        if f.exists():
            return str(f)
    return None


@lru_cache(maxsize=8)
def read_engine_fit(path: str) -> dict:
    """What calibrate.write_engine_fit writes: {"engines": {name: {"params": {FITTED name: a
    positive finite number}, "rows": n, "sources": [...]}}}; else BadInput naming the file and key."""
    import math

    from llmbench._files import read_small_json

    data = read_small_json(path, "engine fit")
    engines = data.get("engines") if isinstance(data, dict) else None
    if not isinstance(engines, dict):
        raise BadInput(f"engine fit {path}: must be a JSON object with an 'engines' object")
    for name, e in engines.items():
        ps = e.get("params") if isinstance(e, dict) else None
        if not isinstance(ps, dict):
            raise BadInput(f"engine fit {path}: engines.{name}.params must be an object")
        for k, v in ps.items():
            ok = k in FITTED and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            if not ok:
                raise BadInput(f"engine fit {path}: engines.{name}.params.{k} must be one of "
                               f"{', '.join(FITTED)} with a positive finite number, got {v!r}")
    return data


def engine_names() -> tuple[str, ...]:
    return tuple(load_engines())


def engine(name: str, fitted: bool = True) -> Engine:
    """The engine called `name` (BadInput naming the choices otherwise)."""
    eng = load_engines(fitted).get(name)
    if eng is None:
        raise BadInput(f"unknown engine {name!r}; one of {', '.join(engine_names())}")
    return eng


def default_engine_name(hw) -> str:
    """NVIDIA GPUs: TensorRT-LLM; AMD GPUs: vLLM; TPUs: JetStream; wafers, RDUs, IPUs, Gaudi and
    CPUs: the vendor's own stack ('native', efficiencies from the hardware profile)."""
    if hw.kind in ("gpu", "tpu"):
        return build_for(DEFAULT_ENGINE.get(hw.vendor, "vllm" if hw.kind == "gpu" else "jetstream"), hw)
    return "native"


def default_engine(hw) -> Engine:
    return engine(default_engine_name(hw))


def build_for(name: str, hw) -> str:
    """The engine `name` as it runs on `hw`: its ROCm build on an AMD GPU (ROCM_BUILD)."""
    return ROCM_BUILD.get(name, name) if hw.vendor == "AMD" else name


def kv_precision_for(precision: str, eng: Engine, kv_precision: str | None = None) -> str:
    """The KV-cache precision: as asked; else fp8 when the weights are fp8/fp4 and the engine pairs
    them with an fp8 cache; else the activations' 16-bit type (fp32 on a CPU run in fp32)."""
    if kv_precision is not None:
        if kv_precision not in KV_PRECISIONS:
            raise BadInput(f"--kv-precision must be one of {', '.join(KV_PRECISIONS)}, got {kv_precision!r}")
        return kv_precision
    if precision in ("fp8", "fp4"):
        return "fp8" if eng.fp8_kv_default else "bf16"
    return "fp32" if precision in ("fp32", "tf32") else "bf16" if precision == "cbf16" else precision


# ---------------------------------------------------------------- KV memory as engines hold it
# the rules are footprint's (the one memory model); these bind them to an Engine


def kv_split(spec, tp: int, eng: Engine) -> float:
    """footprint.kv_split under the engine's MLA rule."""
    return footprint.kv_split(spec, tp, eng.mla_replicated_tp)


def kv_bytes_per_token_device(spec, kv_precision: str, tp: int, pp: int, eng: Engine) -> float:
    """KV-cache bytes one device of a tp x pp replica holds per token of context (footprint)."""
    return footprint.kv_bytes_per_token_device(spec, kv_precision, tp, pp, eng.mla_replicated_tp)


def kv_budget_bytes(capacity_bytes: float, weights_bytes: float, eng: Engine) -> float:
    """footprint.kv_budget_bytes at the engine's memory fraction and basis."""
    return footprint.kv_budget_bytes(capacity_bytes, weights_bytes, eng.kv_mem_fraction, eng.kv_mem_basis)


kv_capacity_tokens = footprint.kv_capacity_tokens
seqs_that_fit = footprint.seqs_that_fit


# ---------------------------------------------------------------- the step model


@dataclass(frozen=True)
class GemmTimes:
    """Measured seconds of one device's GEMMs in a step, by rows: `body_s[i]` all the layers'
    GEMMs (every layer, summed) over `rows[i]` token rows, `head_s[i]` the LM head over `rows[i]`
    rows (measure/kernels.time_gemms). Between measured rows: linear interpolation; beyond the
    largest: the largest's time per row (its FLOP rate); 0 rows: 0."""

    rows: tuple
    body_s: tuple
    head_s: tuple

    def __post_init__(self):
        r = list(self.rows)
        if not r or r != sorted(set(r)) or r[0] < 1 or len(self.body_s) != len(r) or len(self.head_s) != len(r):
            raise ValueError("GemmTimes: rows must be increasing from >= 1, one body and one head time per row")

    def body(self, M, xp):
        return self._at(M, self.body_s, xp)

    def head(self, M, xp):
        return self._at(M, self.head_s, xp)

    def _at(self, M, times, xp):
        import numpy as np

        r, t = np.asarray(self.rows, dtype=float), np.asarray(times, dtype=float)
        last, M = float(r[-1]), xp.asarray(M, dtype=float)
        inside = np.interp(np.minimum(M, last), r, t)
        inside = float(inside) if is_scalar(xp) else inside
        return xp.where(M <= 0, 0.0, xp.where(M > last, float(t[-1]) * M / last, inside))


@dataclass(frozen=True, kw_only=True)
class StepParts:
    """The terms of one step (seconds; arrays when the arguments are)."""

    compute_s: Any
    memory_s: Any
    comm_s: Any
    overhead_s: Any
    time_s: Any
    bound: Any
    """'memory' where the kernels whose bytes set their time (the GEMMs when their weights outlast
    their FLOPs, attention when its KV cache does, the elementwise ones) take the larger share of
    the busy time, else 'compute'; 'network' where the collectives and
    pipeline hops take longer than both, 'latency' where the fixed per-step time (launches, the
    engine's scheduling, a wafer's per-layer fabric latency) takes longer than everything else"""
    attention_compute_s: Any = None
    attention_memory_s: Any = None
    other_s: Any = None
    """the step's busy time is max(attention_compute_s, attention_memory_s) + other_s (its GEMMs
    and elementwise kernels, each at its own roofline), then the collectives and overheads"""


@dataclass(frozen=True, kw_only=True)
class StepModel:
    """One replica of a serving layout, built once; time_s() of any step, vectorised."""

    spec: Any
    hw: Any
    engine: Engine
    precision: str
    kv_precision: str
    tp: int
    pp: int
    mode: str
    weights_bytes: float
    """weights of the whole model at the precision (one replica)"""
    weights_bytes_per_device: float
    weights_ddr_bytes_per_device: float
    """the part of a device's weights held in its DDR tier (a model larger than HBM on an RDU)"""
    kv_bytes_per_token: float
    """KV cache of one token, all layers, whole replica (before replication)"""
    kv_bytes_per_token_per_device: float
    kv_capacity_tokens: int
    """tokens of KV cache one replica holds at once (engine memory fraction, whole blocks)"""
    memory_capacity_bytes: float
    """device memory the weights + KV cache live in (HBM; on-chip SRAM in sram_pipeline)"""
    fits: bool
    """the weights fit with room for one block of KV cache"""
    bandwidth_bytes_per_s: float
    """achievable bandwidth of the memory holding weights and cache (x engine fraction)"""
    ddr_bandwidth_bytes_per_s: float
    peak_gemm: float
    peak_attn: float
    compute_eff: float
    m_tile: float
    weight_passes: float = 1.0
    """passes over a GEMM's weights at M >= 2 rows (GEMM_WEIGHT_PASSES: a CPU's packing)"""
    gemm_times: GemmTimes | None = None
    """measured GEMM times (GemmTimes) in place of the roofline's GEMM FLOPs and weight bytes"""
    kv_read_passes: float = 1.0
    """reads of each cached KV head a decode step makes: its query heads per KV head when the
    engine has no grouped-query kernel (Engine.gqa_decode_kernel), else 1"""
    comm_overlapped: bool = False
    """the collectives run under the step's compute and memory traffic (COMM_OVERLAPPED_KINDS)"""
    overhead_per_step_s: float
    overhead_prefill_s: float
    """added to a step that holds prefill tokens"""
    dense_weight_elems: float
    """weights every step reads (all but the routed experts), per replica"""
    token_nk: float
    """GEMM weight elements one token multiplies by outside the routed experts, layers + head"""
    sh: Any = field(repr=False)
    params: dict = field(repr=False)

    @property
    def block_tokens(self) -> int:
        return self.engine.block_tokens

    def seqs_that_fit(self, context_tokens: int) -> int:
        return seqs_that_fit(self.kv_capacity_tokens, context_tokens, self.block_tokens)

    def time_s(self, prefill_tokens, decode_seqs, kv_tokens_read, *, prefill_seqs=None, prefill_attn_pairs=None):
        """Seconds of one step (numpy arrays broadcast; scalars give a float)."""
        return self.parts(prefill_tokens, decode_seqs, kv_tokens_read, prefill_seqs=prefill_seqs,
                          prefill_attn_pairs=prefill_attn_pairs).time_s

    def parts(self, prefill_tokens, decode_seqs, kv_tokens_read, *, prefill_seqs=None,
              prefill_attn_pairs=None) -> StepParts:
        """The step's compute, memory, collective and overhead terms. prefill_seqs: prompts in the
        step (their last token goes through the LM head; default: 1 when prefill_tokens > 0);
        prefill_attn_pairs: causal query x key pairs of the prefill (default: one prompt of
        prefill_tokens, P (P + 1) / 2)."""
        xp = backend_for(*(x for x in (prefill_tokens, decode_seqs, kv_tokens_read, prefill_seqs,
                                        prefill_attn_pairs) if x is not None))
        P, D, C = (xp.asarray(x, dtype=float) for x in (prefill_tokens, decode_seqs, kv_tokens_read))
        if self.pp > 1 and self.mode == "sram_pipeline":
            # tokens pipelined across the wafers: the decoding sequences go round in up to pp groups,
            # each stage working on one group while the next holds another, so every sequence moves
            # one token per pass of one group through all stages (decode steps; prompts as one group)
            groups = xp.where(P > 0, 1.0, xp.minimum(xp.maximum(D, 1.0), float(self.pp)))
            D, C = D / groups, C / groups
        ps = xp.minimum(P, 1.0) if prefill_seqs is None else xp.asarray(prefill_seqs, dtype=float)
        pairs = P * (P + 1.0) / 2.0 if prefill_attn_pairs is None else xp.asarray(prefill_attn_pairs, dtype=float)
        M = P + D
        attn_c, gemm_c = self._attn_s(pairs, C), self._gemm_s(M, D + ps, xp)
        comp = gemm_c + attn_c
        weights_m, kv_m, act_m = self._bytes_s(M, C, xp)
        comm = self._comm_s(M, xp)
        over = xp.where(M > 0, self.overhead_per_step_s, 0.0) + xp.where(P > 0, self.overhead_prefill_s, 0.0)
        if self.weight_passes != 1.0 and self.gemm_times is None:  # a CPU: packed GEMMs read their weights again
            weights_m = weights_m + self._extra_pass_s(M, D + ps, xp)
        mem = weights_m + kv_m + act_m
        if self.gemm_times is not None:  # kernels one after another: the measured GEMMs, then attention's
            gemms = self._gemm_measured_s(M, D + ps, xp)  # FLOPs or its bytes (KV, activations), the larger
            attn_m, other = mem, gemms
            mem = mem + gemms
        else:  # the kernels one after another, each at its own roofline: the GEMMs (their FLOPs or
            # their weights), attention (its FLOPs or the KV cache), the elementwise kernels (bytes)
            attn_m, other = kv_m, xp.maximum(gemm_c, weights_m) + act_m
        core = xp.maximum(attn_c, attn_m) + other
        busy = xp.maximum(core, comm) if self.comm_overlapped else core + comm
        t = xp.where(M > 0, busy + over, 0.0)
        if self.gemm_times is None:  # memory-bound: the kernels whose bytes set their time take the larger share
            mem_busy = xp.where(weights_m >= gemm_c, weights_m, 0.0) + xp.where(attn_m >= attn_c, attn_m, 0.0) + act_m
            memory_bound = mem_busy >= core - mem_busy
        else:
            memory_bound = mem >= comp
        bound = xp.where(over > xp.maximum(core, comm), "latency",
                         xp.where(comm > core, "network", xp.where(memory_bound, "memory", "compute")))
        if not is_scalar(xp):
            bound = xp.asarray(bound)
        return StepParts(compute_s=comp, memory_s=mem, comm_s=comm, overhead_s=over, time_s=t, bound=bound,
                         attention_compute_s=attn_c, attention_memory_s=attn_m, other_s=other)

    def _attn_s(self, pairs, ctx_read):
        """Attention FLOPs (prefill pairs, decode's cached tokens) at the attention rate."""
        sh = self.sh
        attn = (pairs * self._prefill_pair_flops() + ctx_read * sh.decode_attn_flops_ctx) * sh.L / self.tp
        return attn / (self.peak_attn * self.compute_eff)

    def _gemm_measured_s(self, M, head_rows, xp):
        return self.gemm_times.body(M, xp) + self.gemm_times.head(head_rows, xp)

    def _extra_pass_s(self, M, head_rows, xp):
        """(weight_passes - 1) x the weight bytes of the step's GEMMs with >= 2 rows, over the
        bandwidth: the layers' GEMMs run M = tokens rows, the LM head one row per token read
        (a 64-token prompt alone: layers packed, head matrix-vector). In the weights' term, under
        the GEMMs' max(FLOPs, weights): on the runtime's calibration steps that fitted
        better than the packing summed with the FLOPs (docs/serve.md), though the LM head alone
        at 16 rows prefers the sum. The routed experts of a MoE model are left at one pass."""
        sh = self.sh
        head = float(sum(n * k for n, k in sh.head_tok))
        body = max(self.dense_weight_elems - head, 0.0)
        elems = xp.where(M > 1, body, 0.0) + xp.where(head_rows > 1, head, 0.0)
        return (self.weight_passes - 1.0) * elems * sh.s / self.tp / self.bandwidth_bytes_per_s

    def _gemm_s(self, M, head_rows, xp):
        """The GEMMs' FLOPs (padded to the tile; routed experts per expert), per device of the tp
        group, all stages one after another, at the GEMM rate; or their measured times."""
        sh, tp, tile = self.sh, self.tp, self.m_tile
        if self.gemm_times is not None:  # measured: what the device's kernels took for these rows
            return self._gemm_measured_s(M, head_rows, xp)
        rate = self.peak_gemm * self.compute_eff
        head_nk = sum(n * k for n, k in sh.head_tok)
        body = 2.0 * xp.maximum(M, tile) * (self.token_nk - head_nk) / tp
        head = 2.0 * xp.maximum(head_rows, tile) * head_nk / tp
        t = (body + head) / rate
        mo = sh.moe
        if mo is not None:
            hit = xp.maximum(experts_hit(mo, M, xp), 1e-9)
            rows = xp.where(M > 0, M * mo.rows_per_token / hit, 0.0)
            nk = sum(n * k for n, k, _ in mo.expert_gemms)
            t = t + mo.moe_layers * hit * 2.0 * xp.maximum(rows, tile) * nk / tp / rate
        return t

    def _prefill_pair_flops(self) -> float:
        """Attention FLOPs per causal (query, key) pair per layer in prefill (non-absorbed MLA)."""
        s = self.spec
        if s.is_mla:
            return 2.0 * s.n_heads * (s.qk_nope_head_dim + s.qk_rope_head_dim + s.v_head_dim)
        return 2.0 * s.n_heads * (s.d_head + s.d_head_v)

    def _bytes_s(self, M, ctx_read, xp):
        """Seconds of the bytes one device moves in the step, by the kernels that move them: (the
        GEMMs' weights (routed experts: those the step's tokens touch; weights held in DDR at the
        DDR tier's bandwidth), attention's KV cache (read, and the new tokens' written), the
        elementwise kernels' activations)."""
        sh, tp = self.sh, self.tp
        any_tok = xp.where(M > 0, 0.0 if self.gemm_times is not None else 1.0, 0.0)  # measured GEMMs read them
        w = any_tok * self.dense_weight_elems * sh.s / tp
        mo = sh.moe
        if mo is not None:
            nk = sum(n * k for n, k, _ in mo.expert_gemms)
            w = w + mo.moe_layers * experts_hit(mo, M, xp) * nk * sh.s / tp
        share_ddr = self.weights_ddr_bytes_per_device / max(self.weights_bytes_per_device, 1.0)
        kv = (ctx_read * self.kv_read_passes + M) * self.kv_bytes_per_token_per_device * self.pp
        act = M * (sh.ew_bytes_tok * sh.L + sh.outer_bytes_tok) / tp
        bw = self.bandwidth_bytes_per_s
        slow = w * share_ddr / self.ddr_bandwidth_bytes_per_s if share_ddr > 0 else 0.0
        return w * (1.0 - share_ddr) / bw + slow, kv / bw, act / bw

    def link_bytes_per_token(self) -> float:
        """Bytes one token moves between the replica's devices: per layer two all-reduces of its
        activations under TP (a ring sends 2 (tp - 1) / tp of them from each of tp devices) and
        one hop of its activations from each pipeline stage to the next (what _comm_s times)."""
        a = self.sh.d * ACT_BYTES
        return 2.0 * self.sh.L * a * 2.0 * (self.tp - 1) + (self.pp - 1) * a

    def _comm_s(self, M, xp):
        """Two all-reduces per layer under TP (one-shot when small: step.ring), pipeline hops."""
        hw, tp, pp = self.hw, self.tp, self.pp
        ic = hw.interconnect
        if ic is None or (tp <= 1 and pp <= 1):
            return xp.zeros_like(M)
        nbytes = M * self.sh.d * ACT_BYTES
        lat = self.engine.collective_latency_s if self.engine.collective_latency_s is not None else ic.latency_s
        dpn = max(ic.devices_per_node, 1)
        inter = ic.inter_node_bandwidth_bytes_per_s or ic.bandwidth_bytes_per_s
        # a tp group wider than a node all-reduces over the links between nodes (vLLM, TensorRT-LLM
        # multi-node TP): the slower ones set the pace
        tp_bw = inter if tp > dpn else ic.bandwidth_bytes_per_s
        t = 2.0 * self.sh.L * ring(nbytes, float(tp), tp_bw, lat, self.params["network"], xp)
        if pp > 1:
            cross = tp * pp > dpn and self.mode != "sram_pipeline"
            bw = inter if cross else ic.bandwidth_bytes_per_s
            t = t + (pp - 1) * (ic.latency_s + nbytes / tp / bw)
        return xp.where(M > 0, t, 0.0)


#: the hardware streaming efficiency an engine's bandwidth_fraction is stated against (the GPU
#: prior of params.PARAMS["memory"])
MEMORY_REF = 0.8


#: device kinds whose compiler overlaps a step's tensor-parallel collectives with its compute and
#: weight streaming: SambaNova's SN40L runs them "fused and pipelined with other computations into
#: the same kernel" (Prabhakar et al., "SambaNova SN40L: Scaling the AI Memory Wall with Dataflow
#: and Composition of Experts", MICRO 2024, arXiv:2405.07518, Sec. VII). GPU engines launch the
#: all-reduce between the GEMMs (vLLM, TensorRT-LLM without their fused AR+norm variants): summed
COMM_OVERLAPPED_KINDS = frozenset({"rdu"})


def bandwidth_fraction(eng: Engine, p: dict) -> float:
    """Share of the memory bandwidth a step reaches: the engine's, scaled by how far this
    hardware's fitted streaming efficiency (p["memory"], shared with training) sits from MEMORY_REF
    (an engine runs slower on a chip whose memory system streams worse); the hardware's own
    where the engine states none ('native')."""
    if eng.bandwidth_fraction is None:
        return p["memory"]
    return min(1.0, eng.bandwidth_fraction * p["memory"] / MEMORY_REF)


def _memory_tier(hw, mode: str):
    """(the tier holding weights + KV cache, the DDR tier a vendor spills weights to or None)."""
    if mode == "sram_pipeline":
        return hw.tier("sram") or hw.memory_tiers[0], None
    ddr = hw.tier("dram") if hw.kind == "rdu" else None  # SambaNova: weights in DDR, hot in HBM
    return hw.device_memory, ddr


def _overhead(eng: Engine, sh, p: dict) -> tuple[float, float]:
    """(fixed time of every step, extra time of a step with prefill). An engine's own figures: its
    step overhead and its floor per decoder layer; the native stack: the hardware profile's
    per-layer latency of a generated token (a wafer's fabric traversal) and, for a prefill pass, its
    per-layer overhead (as a training pass)."""
    if eng.step_overhead_s is not None:
        return eng.step_overhead_s + sh.L * eng.layer_floor_s, 0.0
    return sh.L * p["token_layer_latency_s"], sh.L * p["layer_overhead_s"]


def _token_nk(sh) -> float:
    """GEMM weight elements a token multiplies by outside the routed experts (layers + head)."""
    nk = sh.L * sum(n * k for n, k, _ in sh.gemms) + sum(n * k for n, k in sh.head_tok)
    mo = sh.moe
    if mo is not None:
        nk += mo.moe_layers * sum(n * k for n, k, _ in mo.token_gemms)
        nk += mo.dense_layers * sum(n * k for n, k, _ in mo.dense_gemms)
    return float(nk)


def _dense_weight_elems(spec, sh) -> float:
    """Weights every step reads: all but the routed experts and an untied embedding table (a step
    gathers only its tokens' rows; a tied table is read whole by the LM head)."""
    from llmbench.models.counting import param_breakdown

    embed = 0.0 if spec.tied_embeddings else float(param_breakdown(spec)["embedding"])
    return float(sh.params) - (sh.moe.expert_params if sh.moe is not None else 0.0) - embed


def _weights_split(weights_dev: float, tier, ddr, eng: Engine) -> tuple[float, bool]:
    """(bytes of a device's weights in DDR, whether the weights fit): HBM first, up to the engine's
    fraction less one block of cache; the rest in DDR where the device has one."""
    room = eng.kv_mem_fraction * tier.capacity_bytes
    if weights_dev <= room:
        return 0.0, True
    if ddr is None:
        return 0.0, False
    spill = weights_dev - 0.5 * room  # the vendor keeps half of HBM for the hot weights' cache
    return spill, spill <= ddr.capacity_bytes


def build_step_model(spec, hw, *, precision: str, tp: int = 1, pp: int = 1, mode: str = "resident",
                     eng: Engine | None = None, kv_precision: str | None = None, params: dict | None = None) -> StepModel:
    """The StepModel of one replica of tp x pp devices of `hw` serving `spec` at `precision`."""
    eng = eng or default_engine(hw)
    p = params if params is not None else resolve_params(hw)
    sh = shape(spec, precision)
    kvp = kv_precision_for(precision, eng, kv_precision)
    tier, ddr = _memory_tier(hw, mode)
    weights = float(sh.params) * sh.s
    w_dev = weights / (tp * pp)
    ddr_dev, fits = _weights_split(w_dev, tier, ddr, eng)
    kv_dev = kv_bytes_per_token_device(spec, kvp, tp, pp, eng) if spec.causal and spec.head == "lm" else 0.0
    if mode == "sram_pipeline":  # the wafers' SRAM holds everything; no engine fraction
        budget = max(0.0, tier.capacity_bytes - w_dev)
    else:
        budget = kv_budget_bytes(tier.capacity_bytes, w_dev - ddr_dev, eng)
    cap = kv_capacity_tokens(budget, kv_dev, eng.block_tokens)
    frac = bandwidth_fraction(eng, p)
    return StepModel(
        spec=spec, hw=hw, engine=eng, precision=precision, kv_precision=kvp, tp=tp, pp=pp, mode=mode,
        weights_bytes=weights, weights_bytes_per_device=w_dev, weights_ddr_bytes_per_device=ddr_dev,
        kv_bytes_per_token=kv_dev * pp * kv_split(spec, tp, eng), kv_bytes_per_token_per_device=kv_dev,
        kv_capacity_tokens=cap, memory_capacity_bytes=tier.capacity_bytes,
        fits=fits and (kv_dev == 0 or cap >= eng.block_tokens),
        bandwidth_bytes_per_s=tier.bandwidth_bytes_per_s * frac,
        ddr_bandwidth_bytes_per_s=(ddr.bandwidth_bytes_per_s * frac) if ddr is not None else 1.0,
        peak_gemm=gemm_peak(hw, precision, p), peak_attn=attn_peak(hw, precision),
        compute_eff=p["compute_max"] * eng.prefill_efficiency, m_tile=float(SMALL_M_TILE.get(hw.kind, 64)),
        weight_passes=GEMM_WEIGHT_PASSES.get(hw.kind, 1.0),
        kv_read_passes=1.0 if eng.gqa_decode_kernel else spec.n_heads / spec.n_kv_heads,
        comm_overlapped=hw.kind in COMM_OVERLAPPED_KINDS,
        overhead_per_step_s=_overhead(eng, sh, p)[0], overhead_prefill_s=_overhead(eng, sh, p)[1],
        dense_weight_elems=_dense_weight_elems(spec, sh),
        token_nk=_token_nk(sh), sh=sh, params=p)


def step_model(spec, hw, w, engine=None, params: dict | None = None, kv_precision: str | None = None) -> StepModel:
    """The StepModel of Workload `w` (suite infer): its precision (default the hardware's), layout
    (tp, pp; default 1), mode; `engine` an Engine or a name (default: default_engine(hw))."""
    from llmbench.point import precision_for

    eng = resolve_engine(engine, hw)
    lay = w.layout
    mode = lay.mode or hw.default_mode_infer
    mode = "resident" if mode in ("weight_streaming", "auto") else mode
    return build_step_model(spec, hw, precision=precision_for(hw, w.precision), tp=lay.tp or 1, pp=lay.pp or 1,
                            mode=mode, eng=eng, kv_precision=kv_precision, params=params)


def parent_of(name: str) -> str | None:
    """The engine `name` is a build of (Engine.parent), or None (also for an unknown name)."""
    eng = load_engines(fitted=False).get(name) if name else None
    return eng.parent if eng is not None else None


def check_runs_on(name: str, hw) -> None:
    """BadInput for an engine asked for on hardware it does not run on: TensorRT-LLM on NVIDIA GPUs
    only, vLLM's ROCm builds on AMD GPUs only, JetStream on TPUs only; wafers, RDUs and IPUs serve
    with their vendor's own stack ('native'; 'ideal' is a bound that runs anywhere)."""
    own = hw.kind in ("wafer", "rdu", "ipu")
    wrong = (own and name not in ("native", "ideal")
             or name == "trtllm" and not (hw.kind == "gpu" and hw.vendor == "NVIDIA")
             or "vllm-rocm" in (name, parent_of(name)) and not (hw.kind == "gpu" and hw.vendor == "AMD")
             or name == "jetstream" and hw.kind != "tpu")
    if wrong:
        where = f"{hw.name} serves with its vendor's own stack: --engine native" if own else \
            f"{name} does not run on {hw.name} ({hw.vendor} {hw.kind})"
        raise BadInput(f"--engine {name}: {where}")


def resolve_engine(choice, hw) -> Engine:
    """`choice` an Engine, a name (its build for `hw`: build_for), or None (the default engine of
    `hw`); an empty or unknown name is BadInput, not the default, and so is an engine `hw` does not
    run (check_runs_on). Its defaults as it starts on `hw` (on_device)."""
    if isinstance(choice, Engine):
        return on_device(choice, hw)
    if choice is None:
        return on_device(default_engine(hw), hw)
    eng = engine(build_for(choice, hw))
    check_runs_on(eng.name, hw)
    return on_device(eng, hw)


#: vLLM V1's server defaults by device (vllm/engine/arg_utils.py get_batch_defaults,
#: vllm-project/vllm@99d7eb5): on a GPU of at least 70 GiB that is not an A100 ("For GPUs like H100
#: and MI300x", the A100 left out for PR #17885's throughput regression) --max-num-seqs 1,024 and
#: --max-num-batched-tokens 8,192 for the OpenAI server; elsewhere 256 and 2,048
V1_BIG_GPU_BYTES = 70 * 2**30
V1_DEFAULTS = {True: {"max_num_seqs": 1024, "chunked_prefill_tokens": 8192},
               False: {"max_num_seqs": 256, "chunked_prefill_tokens": 2048}}


def on_device(eng: Engine, hw) -> Engine:
    """`eng` with the defaults it takes on `hw`: a vLLM build whose release has no cap of its own
    (V1: release() gives V0's 256 and a run's stated max_num_seqs) starts with V1's per-device
    --max-num-seqs and token budget (V1_DEFAULTS); other engines as they are."""
    if not eng.name.startswith("vllm") or eng.max_num_seqs is not None or hw.kind != "gpu":
        return eng
    # the memory of the GPU vLLM sees: one GCD of an MI250 (logical_gpus), the whole device elsewhere
    big = hw.one_logical_gpu().device_memory.capacity_bytes >= V1_BIG_GPU_BYTES and "a100" not in hw.name
    return replace(eng, **V1_DEFAULTS[big])


def with_fitted(eng: Engine, values: dict) -> Engine:
    """`eng` with fitted FITTED values over it (validate's engine fit)."""
    return replace(eng, **{k: float(v) for k, v in values.items() if k in FITTED})
