"""Validation against llmbench/reference/published_v2.csv: every numeric row predicted with the
shipped profiles, with the pooled fit on all rows (in-sample) and with the pooled fit on all rows
but its own source's (leave-one-source-out, pooled.py); trends checked.

    llmbench validate [--json]        # ~6 s CPU alone; --json: rows, leave_one_source_out, in_sample

A row is a Workload with the layout columns its source states (row_workload); knobs it leaves open
are the planner's (planned), chosen once under the prior parameters. Where a row leaves a setting
the planner cannot choose (batch of a per-device study, prompt length), ASSUME says what is used and
why; the assumption is printed next to the row. Tolerances of the shipped-profile check:
TOL_NUMERIC for numeric rows, TOL_MEGATRON (mean abs error) for Megatron Table 1.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from llmbench.errors import BadInput
from llmbench.hardware import get_hardware

from llmbench.point import Workload
from llmbench.published import PUBLISHED_V2_CSV, parse_range, published_rows

from .infer import predict_infer
from .params import resolve_params
from .project import DATASETS, epoch_time_s
from .train import as_run, predict_train

TOL_NUMERIC = 0.25
TOL_MEGATRON = 0.05

#: MLPerf llama2-70b's prompts (OpenOrca, 24,576 samples, Llama 2 tokenizer): their mean length. The
#: result files do not state it; the benchmark's dataset does, sample by sample (tok_input_length of
#: open_orca_gpt4_tokenized_llama.sampled_24576.pkl.gz, kept by mlcommons/inference
#: language/llama2-70b/processorca.py at under 1,024 tokens), summarised per sample in
#: openshift-psap/performance-dashboard@7cd1065d mlperf-data/summaries/llama2-70b-99.csv: mean 222.3,
#: median 152, max 1,021 (computed here from that file's 24,576 rows)
OPENORCA_PROMPT = 222
OPENORCA_NOTE = ("prompt 222 tokens, the mean of the benchmark dataset's 24,576 prompts (median 152, max 1,021; "
                 "per-sample lengths in openshift-psap/performance-dashboard@7cd1065d)")

#: settings the rows leave open; documented in docs/predict.md
ASSUME: dict[str, dict] = {
    "cs2-gpt3-20b-pile-epoch": {"note": "one epoch of the Pile = 300e9 tokens (project.DATASETS)"},
    "cs2-bert-large-sst2-epoch": {"note": "SST-2 epoch = 67,349 samples / predicted samples per s"},
    "emani-scaling-gaudi2": {"batch_per_replica": 32, "note": "local batch 32 per HPU (Sec. IV-B); weak scaling 1 -> N"},
    "emani-scaling-bow": {"batch_per_replica": 1, "grad_accum": 128, "pp": 4,
                          "note": "4 IPUs (pipeline) per replica, local batch 1, GAS 128 (Sec. IV-B: 'a local batch "
                                  "size of 1 in FP16 combined with large GAS values of 128 and 1024')"},
    "emani-scaling-cs2": {"batch_per_replica": 56, "note": "global batch 112 on 2 systems (row)"},
    "emani-scaling-sn30": {"batch_per_replica": 32, "note": "two instances of micro-batch 16 per RDU (Sec. IV-B: the "
                           "1.5B model fits 4 tiles, half an RDU; 8 nodes = 128 data-parallel instances)"},
    "emani-scaling-mi250": {"batch_per_replica": 32, "note": "batch 16 per GPU (Sec. IV-B: 16 and 32 per GPU), and "
                            "an MI250 is two GPUs to ROCm (its GCDs): 32 per package"},
    "emani-scaling-a100": {"batch_per_replica": 1, "zero": 1, "grad_accum": 4,
                           "note": "micro-batch 1, GAS 4, ZeRO-1 (Fig. 6 set-up)"},
    "emani-gas-a100": {"zero": 1, "note": "micro-batch 1 on 64 GPUs, ZeRO-1"},
    "emani-gas-mi250": {"batch": 32, "note": "micro-batch 16 per GPU, two GPUs (GCDs) per MI250: 32 per package "
                        "on 4 packages"},
    "emani-sparsity-gpt2xl": {"batch": 112, "note": "batch 112 assumed (the CS-2 GPT-2 XL batch of Table II)"},
    "emani-sparsity-6.7b": {"batch": 112, "note": "batch 112 assumed"},
    "emani-sparsity-30b": {"batch": 112, "note": "batch 112 assumed"},
    "emani-sparsity-6.7b-multi": {"batch_per_replica": 112, "note": "batch 112 per system assumed; weak scaling"},
    "emani-genslm-sn30": {"batch": 512, "a100": {"tp": 8, "recompute": "full", "batch": 32},
                          "note": "SN30: 16 instances of micro-batch 32 on 8 RDUs (Sec. V-C: the 13B model with "
                                  "micro-batch 32 fits 4 tiles), batch 512; A100: micro-batch 32, TP8 + full "
                                  "recompute to hold 13B"},
    "emani-genslm-cs2": {"batch": 32, "a100": {"tp": 8, "recompute": "full"}, "note": "batch 32 on both; A100 TP8 + full recompute"},
    "megatron-h100-mfu": {"model": "gpt3-175b", "batch": 1536, "devices": 1536, "tp": 8, "pp": 8,
                          "recompute": "full", "note": "represented by GPT-3 175B, TP8 PP8, 1536 GPUs, seq 4096"},
    **{k: {"recompute": "full", "offload": "activations",
           "note": "the recipe's MaxText remat policy 'custom' offloads the decoder-layer inputs to the host "
                   "and recomputes the rest: full recompute with the saved layer inputs offloaded"}
       for k in ("tpurecipes-v6e-llama31-70b", "tpurecipes-v6e-llama31-405b")},
    **{f"oci-mi300x-405b-{k}": {"tp": 8, "note": "one vLLM instance over the node's 8 GPUs ('a single instance "
                                "... All eight GPUs were assigned for serving'): one replica, split by tensor "
                                "parallelism, vLLM's way of spreading an instance over a node's GPUs (the post "
                                "names no parallelism)"}
       for k in ("b1", "b8", "b32", "b128", "b256", "b1-latency", "tput-128-128", "tput-128-2048")},
    "cerebras-infer-8b": {"prompt_len": 128, "gen_len": 512, "note": "prompt 128, 512 generated tokens assumed"},
    "cerebras-infer-70b-wafers": {"prompt_len": 128, "gen_len": 512, "note": "bf16 weights + KV of one 640-token request"},
    "cerebras-infer-70b": {"prompt_len": 128, "gen_len": 512, "note": "prompt 128, 512 generated tokens assumed"},
    **{k: {"prompt_len": OPENORCA_PROMPT, "gen_len": 292,
           "note": "MLPerf llama2-70b (OpenOrca): 292 generated tokens (the notes' tokens/s / samples/s); "
                   + OPENORCA_NOTE}
       for k in ("mlperf41-amd-8xmi300x-offline", "mlperf41-amd-1xmi300x-offline", "mlperf41-amd-8xmi300x-server",
                 "mlperf41-amd-8xmi300x-server-ttft", "mlperf41-amd-8xmi300x-server-tpot",
                 "mlperf41-nv-8xh200-offline", "mlperf41-nv-8xh200-server", "mlperf41-nv-8xh100-offline",
                 "mlperf41-nv-8xh200-server-ttft")},
    **{k: {"prompt_len": OPENORCA_PROMPT, "gen_len": 292, "precision": "fp8",
           "note": "as the AMD rows; fp8 assumed (NVIDIA's closed llama2-70b submissions quantise to FP8 "
                   "with TensorRT-LLM; the result files do not state it)"}
       for k in ("mlperf41-nv-8xh200-offline", "mlperf41-nv-8xh200-server", "mlperf41-nv-8xh100-offline",
                 "mlperf41-nv-8xh200-server-ttft")},
    **{k: {"prompt_len": OPENORCA_PROMPT, "gen_len": 274,
           "note": "MLPerf llama2-70b (OpenOrca): 274 generated tokens (the offline row's notes: tokens/s / "
                   "samples/s); " + OPENORCA_NOTE}
       for k in ("mlperf41-nv-1xb200-offline", "mlperf41-nv-1xb200-server")},
    **{k: {"prompt_len": OPENORCA_PROMPT, "gen_len": 273, "precision": "fp4",
           "note": "MLPerf llama2-70b (OpenOrca): 273 generated tokens (the offline row's notes: tokens/s / "
                   "samples/s); " + OPENORCA_NOTE + "; fp4 assumed: the "
                   "TensorRT-LLM harness on B200, whose llama2-70b runs NVIDIA's own v4.1 B200 submission "
                   "made in FP4 (rows mlperf41-nv-1xb200-*)"}
       for k in ("mlperf50-google-8xb200-offline", "mlperf50-google-8xb200-server",
                 "mlperf50-google-8xb200-server-ttft", "mlperf50-google-8xb200-server-tpot")},
    **{k: {"prompt_len": OPENORCA_PROMPT, "gen_len": 292,
           "note": "MLPerf llama2-70b (OpenOrca): 292 generated tokens (the row's notes: tokens/s / samples/s); "
                   + OPENORCA_NOTE}
       for k in ("mlperf40-intel-8xgaudi2-offline", "mlperf40-intel-8xgaudi2-server",
                 "mlperf40-intel-8xgaudi2-server-ttft", "mlperf40-intel-8xgaudi2-server-tpot")},
    **{k: {"prompt_len": 161, "gen_len": 338,
           "note": "ShareGPT prompts: mean 161 input and 338 output tokens (Kwon et al., vLLM, SOSP 2023, Sec. 6.1 "
                   "dataset statistics); the row's batch is the engine's (offline: the most that fit)"}
       for k in ("aimultiple-h100-llama-3.1-8b-sglang-offline", "aimultiple-h100-llama-3.1-8b-lmdeploy-offline",
                 "aimultiple-h100-llama-3.1-8b-vllm-offline")},
    **{f"gpustack-h100-qwen3-8b-{e}-c4-{m}": {"requests": 100, "note": "vllm bench serve, 100 prompts at max "
                                                "concurrency 4 (the page's command), simulated as that closed loop"}
       for e in ("vllm", "sglang", "trtllm", "sglang-fp8") for m in ("tput", "tpot", "ttft")},
    **{f"gpustack-8xh200-deepseek-r1-{e}-sharegpt": {
        "requests": 1000, "note": "vllm bench serve, 1,000 prompts sent at once (no request rate, no "
                                  "--max-concurrency: 1,000 in flight at the peak, as the page prints), simulated "
                                  "as that closed loop at the prompts' and outputs' means"}
       for e in ("vllm", "sglang", "trtllm", "sglang-dpattn")},
    **{k: {"prompt_len": 1024, "gen_len": 128, "beams": 4, "batch": 32, "tp": 4, "batch_wait_s": 4.0,
           "note": "MLPerf GPT-J (CNN/DailyMail): prompts up to 1,919 tokens, 1,024 assumed; 128 generated tokens "
                   "(the cap) with 4 beams sharing their prompt's KV cache; Saxml static batches of 32 requests "
                   "on the 4 chips' model-parallel mesh, the server batcher waiting up to 4.0 s for a batch "
                   "(code/gptj-99/README.md: GPTJ4BS32Int8Opt10Early offline, GPTJ4BS32Int8Opt10Wait40MB6 "
                   "server; params/gptj.py: BATCH_SIZE 32, ICI_MESH_SHAPE [1, 1, 4], BATCH_WAIT_SECS 4.0); "
                   "their int8 weights are run as bf16 (the model has no weight-only int8)"}
       for k in ("mlperf31-google-4xtpuv5e-gptj-offline", "mlperf31-google-4xtpuv5e-gptj-server-p50")},
}


#: sources whose client keeps a row's `concurrency` requests in flight (a closed loop), and how it
#: takes its figures. Such a row runs through the serving simulator's closed loop (queueing.sim: the
#: engine's scheduler and chunked prefill), not as one static batch: each finished request is
#: replaced at once, so new prompts land in the other requests' decode steps (ITL and TPOT under
#: load) and the requests fall out of step. "steady": NVIDIA's AIPerf (GenAI-Perf before it)
#: reports a stable measurement window (NIM benchmarking guide, "Using AIPerf to Benchmark"): the
#: simulated requests between the first `concurrency` (sent together at the start) and the last
#: `concurrency` (the drain), CLOSED_LOOP_REQUESTS x concurrency in all (a choice: NIM's c = 50 and
#: c = 250 figures move under 0.5% from 10 x to 40 x); "run": vllm bench serve with
#: --max-concurrency, or with none (every request sent at once: concurrency = requests), every
#: request of the run (ASSUME "requests": how many the page says ran)
CLOSED_LOOP = {"NVIDIA NIM LLM benchmarking guide": "steady", "GPUStack performance lab": "run"}
CLOSED_LOOP_REQUESTS = 10

#: ASSUME keys that are Workload fields (prompt_len is the inference seq_len)
_ROW_FIELDS = ("model", "precision", "batch", "devices", "seq_len", "gen_len", "tp", "pp", "zero", "recompute",
               "offload", "grad_accum", "micro_batch")
_INT_COLS = ("batch", "devices", "seq_len", "gen_len", "tp", "pp", "zero", "grad_accum", "micro_batch")
#: metrics predicted as ratios of runs a paper describes per device (Emani et al.): plain layouts
RATIO_METRICS = ("scaling_efficiency", "gas4_over_gas1", "s0.9_over_dense", "speedup_over_1_system",
                 "per_device_speedup", "speedup")


def row_workload(row: dict) -> Workload:
    """The one conversion of a published row (after ASSUME's settings) into a Workload: the global
    batch, sequence, precision and every layout column the source states; knobs it leaves empty
    stay None for the planner (training) or the serving search (inference). Ratio rows of
    per-device studies (RATIO_METRICS) run the plain layout (train.plain_layout), except where
    the vendor's software sets the micro-batch (vendor_chooses_layout: the planner's)."""
    a = ASSUME.get(row["id"], {})
    r = {**row, "system": row["system"].split()[0], **{k: a[k] for k in _ROW_FIELDS if k in a}}
    if "prompt_len" in a:
        r["seq_len"] = a["prompt_len"]
    r.update({k: str(r[k]) for k in _INT_COLS if r.get(k) not in (None, "")})
    w = _ran_its_length(Workload.from_row(r))
    if w.micro_batch is not None and w.grad_accum is not None:  # both stated: the batch says the rest
        w = w.with_(grad_accum=None)
    if row["metric"] not in RATIO_METRICS or vendor_chooses_layout(get_hardware(w.hardware)):
        return w.with_(devices=w.devices or 1)
    lay = w.layout
    w = w.with_(tp=lay.tp or 1, pp=lay.pp or 1, zero=lay.zero or 0, recompute=lay.recompute or "none",
                devices=w.devices or 1)
    if w.layout.pp > 1 and w.grad_accum is None and w.micro_batch is None:
        return w.with_(micro_batch=1)
    return w if w.micro_batch is not None else w.with_(grad_accum=w.grad_accum or 1)


def _ran_its_length(w: Workload) -> Workload:
    """A rotary model run past its config's positions by the source (TensorRT-LLM's GPT-J at 2,048
    + 2,048 tokens on 2,048 positions): the run happened, so its workload states the stretch
    (rope_scaling = the ratio, rounded up) instead of being refused by Workload.spec's rule."""
    from llmbench.models import get_model

    spec, need = get_model(w.model), w.seq_len + (w.gen_len or 0)
    if spec.position != "learned" and w.rope_scaling is None and need > spec.max_seq_len:
        return w.with_(rope_scaling=float(math.ceil(need / spec.max_seq_len)))
    return w


def row_spec(w: Workload):
    """The model of `w`; a learned-position model gets a position table as long as the run
    (the MPT benchmarks size it to the sequence: needed_models.csv)."""
    from llmbench.models import get_model

    need = w.seq_len + (w.gen_len or 0)
    if get_model(w.model).position == "learned" and need > w.resize.get("max_seq_len", 0):
        w = w.with_(resize={**w.resize, "max_seq_len": max(need, get_model(w.model).max_seq_len)})
    return w.spec()


#: training layouts the planner chose for a row (id -> Workload), under the prior parameters, so a
#: fit moves efficiencies, never the layout under it (a layout is a user's choice, not a fit)
_LAYOUTS: dict[str, Workload] = {}


def planned(row_id: str, w: Workload) -> Workload:
    """`w` with every open layout knob chosen by the planner (perfmodel/plan.py) with the prior
    parameters; cached per row."""
    from .train import _defaults, open_knobs

    key = f"{row_id}:{w!r}"
    if key not in _LAYOUTS:
        h = get_hardware(w.hardware)
        w = _defaults(w, h)
        if open_knobs(w):
            from .params import resolve_params
            from .plan import plan

            # memory_fraction 1: a published run ran, so its layouts are searched up to the whole
            # device (the default reserve, reserve.py, is for layouts no one has run yet)
            w = plan(row_spec(w), h, w, resolve_params(h, {"memory_fraction": 1.0}, use_profile=False)).best()
        _LAYOUTS[key] = w
    return _LAYOUTS[key]


def vendor_chooses_layout(hw) -> bool:
    """True where the vendor's software, not the user, sets the micro-batch: on a Cerebras wafer
    'GAS is determined automatically by the Cerebras software stack to drive the best throughput
    given the global batch and number of CS-2s' (arXiv:2310.04607 Sec. V-B3). Its ratio rows then
    run on the planner's layout, which fits the SRAM, not one micro-batch of the whole batch."""
    return hw.default_mode_train == "weight_streaming"


def _train(w: Workload, params: dict | None, row_id: str = ""):
    """One training prediction (no fit check: validation compares throughput)."""
    h = get_hardware(w.hardware)
    p = params.get(h.name) if params else None
    plan = bool(row_id) or vendor_chooses_layout(h)
    if plan:
        w = planned(row_id, w)
    return predict_train(row_spec(w), h, w if plan else as_run(w, h), p)


#: offline max-throughput rows (no batch: the server's batcher fills memory): batches tried
OFFLINE_BATCHES = tuple(1 << k for k in range(13))


#: engines as published rows name them -> the engine llmbench models them with (engines.toml);
#: docs/predict.md "Serving" says why each is mapped so
ENGINE_OF = {"nim": "trtllm",  # NVIDIA NIM runs Llama on its TensorRT-LLM backend
             "cerebras": "native", "sambaflow": "native", "synapseai": "native", "optimum-habana": "native",
             "saxml": "jetstream",  # Google's TPU serving stack; JetStream's parameters stand in
             "lmdeploy": "sglang",  # C++/Python engine with paged KV, CUDA graphs and continuous batching
             "gpt-fast": "gptfast"}


def row_engine(row: dict, hw) -> str:
    """The engine a serving row ran on (its `engine` column through ENGINE_OF, as built for the
    row's hardware: serving.build_for; vLLM on AMD GPUs built from the upstream repository, as
    its engine_version says, is vllm-rocm-upstream), else the hardware's default engine
    (default_engine_name)."""
    from .serving import build_for, default_engine_name, engine_names

    name = (row.get("engine") or "").strip().lower()
    name = build_for(ENGINE_OF.get(name, name), hw)
    if name == "vllm-rocm" and "upstream" in (row.get("engine_version") or ""):
        name = "vllm-rocm-upstream"  # built from the repository, not AMD's Docker image (engines.toml)
    return name if name in engine_names() else default_engine_name(hw)


def row_engine_params(name: str, params: dict | None, version: str | None = None):
    """The Engine a prediction uses, as release `version` ran (serving.release): the shipped
    (fitted) one without params; under a fit, the engine's priors with the fit's values for it
    (params["engine:NAME"], pooled.py)."""
    from .serving import engine, release, with_fitted

    if params is None:
        return release(engine(name), version)
    return release(with_fitted(engine(name, fitted=False), params.get(f"engine:{name}", {})), version)


def _infer(w: Workload, params: dict | None, offline: bool = False, eng: str | None = None,
           version: str | None = None, kv: str | None = None):
    """Serving prediction on the row's devices (tp as stated, the rest searched) by engine `eng`
    at its release `version`, with the KV cache in `kv` when the row states it (None: the engine's
    default). offline: the batch that gives the most tokens/s (the engine holds what its KV cache
    fits)."""
    h = get_hardware(w.hardware)
    w = w.with_(suite="infer", zero=None, recompute=None)
    p = params.get(h.name) if params else None
    spec = row_spec(w)
    name = eng or row_engine({}, h)
    if offline:
        w = w.with_(batch=offline_batch(spec, h, w, name, version, kv))
    return predict_infer(spec, h, w, p, engine=row_engine_params(name, params, version), kv_precision=kv)


#: offline batches chosen (workload repr -> batch), under the prior parameters, like _LAYOUTS
_BATCHES: dict[str, int] = {}


def offline_batch(spec, h, w: Workload, eng: str, version: str | None = None, kv: str | None = None) -> int:
    """The batch of OFFLINE_BATCHES with the most tokens/s (a batch beyond the KV cache is served
    at the concurrency that fits), under the priors."""
    from .params import resolve_params
    from .serving import engine, release

    key = f"{w!r}:{eng}:{version}:{kv}"
    if key not in _BATCHES:
        p, best = resolve_params(h, use_profile=False), None
        for b in OFFLINE_BATCHES:
            try:
                r = predict_infer(spec, h, w.with_(batch=b), p, engine=release(engine(eng, fitted=False), version),
                                  kv_precision=kv)
            except ValueError:
                continue
            if r.fits and (best is None or r.tokens_per_s > best[1] * 1.001):
                best = (b, r.tokens_per_s)
        if best is None:
            raise BadInput(f"{spec.name} fits no batch on {w.devices} x {h.name}")
        _BATCHES[key] = best[0]
    return _BATCHES[key]


def _per_replica(w: Workload, batch: int, devices: int) -> Workload:
    """`w` on `devices` devices at global batch `batch` (a weak-scaling point)."""
    return w.with_(batch=batch, devices=devices)


#: serving metrics published rows carry that predict_infer does not give yet (issue 21): skipped, not refused
SERVING_UNPREDICTED: dict[str, str] = {}


def skip_reason(row: dict) -> str:
    """Why a numeric row is not predicted ('' when it is)."""
    if row["task"] == "infer" and row["metric"] in SERVING_UNPREDICTED:
        return f"skipped: {row['metric']}: {SERVING_UNPREDICTED[row['metric']]}"
    return ""


def predict_row(row: dict, params: dict | None = None) -> float | None:
    """The model's value for one numeric row of published_v2.csv (None: not a numeric row, or a
    serving metric not predicted yet: skip_reason). params: {hardware name: parameter dict}."""
    metric = row["metric"]
    if metric not in METRIC_KINDS or skip_reason(row):
        return None
    a = ASSUME.get(row["id"], {})
    w = row_workload(row)
    params = with_framework(row, w, params)
    if row["task"] == "infer":
        return _infer_metric(w, row, params)
    if metric in ("samples_per_s", "tokens_per_s", "epoch_time_s", "epoch_time_h", "achieved_tflops", "mfu",
                  "peak_mem_bytes"):
        r = _train(w, params, row["id"])
        if metric == "epoch_time_s":
            return epoch_time_s(DATASETS["sst2"], tokens_per_s=r.tokens_per_s, samples_per_s=r.samples_per_s)
        if metric == "epoch_time_h":
            return epoch_time_s(DATASETS["pile"], tokens_per_s=r.tokens_per_s,
                                samples_per_s=r.samples_per_s) / 3600
        # Megatron Table 1 counts the recomputation FLOPs (executed); the other sources model FLOPs
        if metric == "achieved_tflops" and row["id"].startswith("megatron-t1"):
            return r.executed_tflops
        return getattr(r, metric)
    if metric == "scaling_efficiency":
        return _scaling(w, a, params)
    if metric == "gas4_over_gas1":
        n, micro = w.devices, w.batch
        t = [_train(w.with_(batch=micro * n * g, grad_accum=g, micro_batch=None), params).samples_per_s
             for g in (1, 4)]
        return t[1] / t[0]
    if metric == "s0.9_over_dense":
        t = [_train(w.with_(sparsity=s), params).samples_per_s for s in (0.9, 0.0)]
        return t[0] / t[1]
    if metric == "speedup_over_1_system":
        bpr = a["batch_per_replica"]
        t = [_train(_per_replica(w, bpr * n, n), params).samples_per_s for n in (w.devices, 1)]
        return t[0] / t[1]
    return _genslm(w, row, a, params)  # per_device_speedup, speedup


def with_framework(row: dict, w: Workload, params: dict | None) -> dict | None:
    """params with the framework the row's source ran (frameworks.py): its fitted efficiency terms
    (the fit's, params[pooled.FRAMEWORK_KEY]; params None: the shipped ones) and its mechanism
    overrides, on the row's hardware; params None: the shipped parameters of that hardware."""
    from . import frameworks as F
    from .pooled import FRAMEWORK_KEY

    fw = F.framework_of(row.get("source", ""))
    if fw is None:
        return params
    terms = params.get(FRAMEWORK_KEY, {}) if params else F.shipped_terms()
    h = w.hardware
    base = (params or {}).get(h) or resolve_params(get_hardware(h))
    return {**(params or shipped_engines()), h: F.apply(base, fw, terms)}


def shipped_engines() -> dict:
    """{"engine:NAME": its fitted parameters} as shipped (serving.load_engines), in the form a
    fit's params carry them (row_engine_params)."""
    from .serving import FITTED, load_engines

    return {f"engine:{n}": {k: getattr(e, k) for k in FITTED if getattr(e, k) is not None}
            for n, e in load_engines().items()}


#: a serving row that states no prompt or output length: 128 each (the per-user speed rows of
#: vendor pages; printed with the row)
SERVING_DEFAULT_LEN = 128


def serving_workload(w: Workload, row: dict) -> Workload:
    """`w` with SERVING_DEFAULT_LEN where the row and ASSUME leave the prompt or output length
    open; where the row states no device count, on the fewest devices that hold the model, or as
    the vendor places it: an RDU model on one SambaNova node (SambaNova: Llama 3.1 405B served on
    16 SN40L, 'SambaNova Cloud' launch blog 2024-09)."""
    a = ASSUME.get(row["id"], {})
    if not row.get("seq_len") and "prompt_len" not in a:
        w = w.with_(seq_len=SERVING_DEFAULT_LEN)
    if not row.get("gen_len") and "gen_len" not in a and row["metric"] != "devices_needed":
        w = w.with_(gen_len=SERVING_DEFAULT_LEN)
    if row.get("devices"):
        return w
    h = get_hardware(w.hardware)
    if h.kind == "rdu" and h.interconnect:  # SambaNova Cloud serves each model on one 16-RDU node
        return w.with_(devices=h.interconnect.devices_per_node)
    return w.with_(devices=None)


def _infer_metric(w: Workload, row: dict, params) -> float:
    """A serving row's metric: output tokens/s, per-user tokens/s, TTFT, TPOT/ITL, E2E latency,
    requests/s, on the row's engine. A server-scenario row (request_rate) runs at the concurrency
    Little's law gives (server_batch); an open batch at the engine's offline best."""
    metric = row["metric"]
    eng, ver = row_engine(row, get_hardware(w.hardware)), row.get("engine_version")
    kv = row.get("kv_precision") or None  # what the row states ran; else the engine's default

    def infer(w: Workload, offline: bool = False):  # the row's engine, release and KV cache
        return _infer(w, params, offline=offline, eng=eng, version=ver, kv=kv)

    w = serving_workload(w, row)
    if ASSUME.get(row["id"], {}).get("beams", 1) > 1:
        return _beam_metric(w, row, params, eng, ver, kv)
    how = closed_loop(row)
    if how and int(row["concurrency"]) > 1:
        return _closed_loop_metric(w, row, params, infer(w), eng, ver, kv, how)
    if metric == "devices_needed":
        return float(infer(w).devices)
    open_batch = not row.get("batch") and "batch" not in ASSUME.get(row["id"], {})
    rate = float(row.get("request_rate") or 0)
    server = "server" in (row.get("metric_kind") or "")
    if metric == "time_to_first_token_s" and (open_batch or rate):
        return _ttft_open(w, row, params, infer, eng, ver, kv, rate, server)
    if metric == "decode_tokens_per_s_per_seq" and open_batch and not (rate or server):  # a user's speed
        return infer(w.with_(batch=1)).decode_tokens_per_s_per_seq
    if rate:
        w = w.with_(batch=server_batch(w, rate, eng, version=ver, kv=kv))
        open_batch = False
    r = infer(w, offline=open_batch)
    if metric == "time_per_output_token_s":
        if not r.decode_tokens_per_s_per_seq:
            raise BadInput(f"{row['id']}: no generated tokens to time (gen_len 0)")
        return 1.0 / r.decode_tokens_per_s_per_seq
    if metric == "samples_per_s":  # requests per second (beam-search rows: _beam_metric)
        return r.tokens_per_s / max(r.workload.gen_len, 1)
    return getattr(r, metric)


def closed_loop(row: dict) -> str | None:
    """How the row's client measured a closed loop of `concurrency` requests (CLOSED_LOOP), or None."""
    if not row.get("concurrency"):
        return None
    return next((how for src, how in CLOSED_LOOP.items() if row["source"].startswith(src)), None)


def _closed_loop_metric(w: Workload, row: dict, params, r, eng: str, ver, kv, how: str) -> float:
    """A closed-loop row (CLOSED_LOOP): `concurrency` requests of the row's lengths kept in flight
    on the layout predict_infer chose for them (`r`), simulated step by step (queueing.sim) on the
    engine's scheduler; the row's metric as its client takes it (mean or median, as metric_kind says)."""
    from llmbench.queueing import trace as tr
    from llmbench.queueing.sim import engine_scheduler, simulate

    from .serving import step_model

    c = int(row["concurrency"])
    h = get_hardware(w.hardware)
    sm = step_model(row_spec(r.workload), h, r.workload, engine=row_engine_params(eng, params, ver),
                    params=params.get(h.name) if params else None, kv_precision=kv)
    n = int(ASSUME.get(row["id"], {}).get("requests", CLOSED_LOOP_REQUESTS * c))
    trace = tr.synthetic(n, rate_per_s=math.inf, prompt=tr.parse_length(str(w.seq_len)),
                         output=tr.parse_length(str(w.gen_len)), seed=0)
    # the client never has more than c in flight: the engine as it starts on the device (sm.engine,
    # serving.on_device: the step model's own) runs them all unless it caps them lower
    sched = engine_scheduler(sm.engine, max_num_seqs=min(c, sm.engine.max_num_seqs or c), max_concurrency=c,
                             replicas=max(1, r.workload.devices // (sm.tp * sm.pp)))
    rec = simulate(trace, sm, sched).records
    if not rec.completed().all():
        raise BadInput(f"{row['id']}: {int((~rec.completed()).sum())} of {n} requests do not fit the KV cache")
    keep = np.arange(n)
    if how == "steady" and n > 2 * c:
        keep = keep[c:n - c]
    stat = np.median if "median" in (row.get("metric_kind") or "") else np.mean
    metric = row["metric"]
    if metric == "tokens_per_s":
        if how == "steady":  # Little's law for the closed loop: c requests in flight at once
            return c * float(np.mean(rec.output_tokens[keep])) / float(np.mean(rec.e2el_s()[keep]))
        return float(rec.output_tokens.sum()) / float(rec.finish_s.max() - rec.arrival_s.min())
    if metric == "time_to_first_token_s":
        return float(stat(rec.ttft_s()[keep]))
    if metric == "time_per_output_token_s":
        return float(stat(rec.tpot_s()[keep]))
    raise BadInput(f"{row['id']}: metric {metric} of a closed loop is not simulated")


def _beam_metric(w: Workload, row: dict, params, eng: str, ver, kv) -> float:
    """A beam-search row (ASSUME beams > 1: MLPerf GPT-J): static batches of ASSUME batch requests,
    each prompt prefilled once and shared by its beams (infer.beam_batch_s), on one replica of the
    row's devices. Offline (samples_per_s): full batches back to back. Server (latency_s_p50 at a
    request rate): a batch leaves when it is full or batch_wait_s after it opened, whichever is
    first; a request waits half that window at the median (Poisson arrivals are uniform within it),
    then its batch runs; queueing behind an earlier batch is not modelled (one batch runs in less
    than the window)."""
    from .infer import beam_batch_s
    from .serving import step_model

    a = ASSUME[row["id"]]
    h = get_hardware(w.hardware)
    w = w.with_(devices=a["tp"], tp=a["tp"])
    sm = step_model(row_spec(w), h, w, engine=row_engine_params(eng, params, ver),
                    params=params.get(h.name) if params else None, kv_precision=kv)
    replicas = int(row.get("devices") or a["tp"]) // a["tp"]
    batch, rate = a["batch"], float(row.get("request_rate") or 0)
    if row["metric"] == "samples_per_s":
        return replicas * batch / sum(beam_batch_s(sm, batch, a["beams"], w.seq_len, w.gen_len))
    if row["metric"] == "latency_s_p50" and rate:
        window = min(a["batch_wait_s"], batch * replicas / rate)
        filled = max(1, min(batch, round(rate / replicas * window)))
        return window / 2 + sum(beam_batch_s(sm, filled, a["beams"], w.seq_len, w.gen_len))
    raise BadInput(f"{row['id']}: beam search is predicted for offline samples/s and a server's p50 latency")


def _ttft_open(w: Workload, row: dict, params, infer, eng: str, ver, kv, rate: float, server: bool) -> float:
    """TTFT of one request to a server. Idle (no load stated): its own prefill. Under a server
    scenario's load (continuous batching at the concurrency the row's TPOT is predicted at: Little's
    law at its rate, else the offline batch): the request first waits out the decode step in
    flight, half a step at the median for Poisson arrivals, then its prefill runs, in a step of its
    own, or, where the engine mixes prompts into the running batch's steps (chunked prefill,
    Engine.chunked_prefill_tokens > 0), in a step that also decodes that batch. Queueing behind
    other prompts is not modelled (a server below saturation)."""
    alone = infer(w.with_(batch=1)).time_to_first_token_s
    if not server:
        return alone
    busy = infer(w.with_(batch=server_batch(w, rate, eng, version=ver, kv=kv))) if rate else infer(w, offline=True)
    step = 1.0 / busy.decode_tokens_per_s_per_seq
    mixed = row_engine_params(eng, params, ver).chunked_prefill_tokens > 0
    return alone + step * (0.5 + mixed)


#: server-scenario concurrency chosen (workload repr -> batch), under the priors, like _BATCHES
_SERVER: dict[str, int] = {}


def server_batch(w: Workload, rate: float, eng: str, iters: int = 64, version: str | None = None,
                 kv: str | None = None) -> int:
    """Requests in flight at `rate` requests/s: Little's law, c = rate x latency(c), solved by
    fixed-point iteration under the priors (a multiple of the replicas; at most what the KV cache
    holds, beyond which requests queue)."""
    from .params import resolve_params
    from .serving import engine, release

    key = f"{w!r}:{eng}:{rate}:{version}:{kv}"
    if key not in _SERVER:
        h = get_hardware(w.hardware)
        spec, p, c = row_spec(w), resolve_params(h, use_profile=False), 1
        for _ in range(iters):
            r = predict_infer(spec, h, w.with_(batch=c), p, engine=release(engine(eng, fitted=False), version),
                              kv_precision=kv)
            dp = r.devices // (r.workload.layout.tp * r.workload.layout.pp)
            nxt = max(dp, int(round(rate * r.latency_s_p50 / dp)) * dp)
            nxt = min(nxt, max(r.concurrency, dp) if r.concurrency < c else nxt)
            if nxt == c:
                break
            c = nxt
        _SERVER[key] = c
    return _SERVER[key]


#: the metrics predict_row knows how to predict
METRIC_KINDS = ("samples_per_s", "tokens_per_s", "epoch_time_s", "epoch_time_h", "achieved_tflops", "mfu",
                "peak_mem_bytes", "scaling_efficiency", "gas4_over_gas1", "s0.9_over_dense",
                "speedup_over_1_system", "per_device_speedup", "speedup", "decode_tokens_per_s_per_seq",
                "time_to_first_token_s", "latency_s_p50", "devices_needed", "time_per_output_token_s")


def _scaling(w: Workload, a: dict, params):
    """Weak scaling: throughput on N devices / (N/r x throughput of one replica of r devices)."""
    pp, bpr, g = w.layout.pp or 1, a["batch_per_replica"], w.grad_accum or 1
    reps = w.devices // pp
    one = _train(_per_replica(w, bpr * g, pp), params)
    many = _train(_per_replica(w, bpr * g * reps, w.devices), params)
    return many.samples_per_s / (reps * one.samples_per_s)


def _genslm(w: Workload, row, a, params):
    """GenSLM (Table IV): SN30 vs A100 per device on 8 devices; one CS-2 vs eight A100."""
    w = w.with_(batch=a.get("batch") or (int(row["batch"]) if row["batch"] else 32))
    akw = a.get("a100", {})
    a100 = _train(w.with_(hardware="a100-40gb", devices=8, precision="fp16", **akw), params)
    if row["metric"] == "per_device_speedup":
        return _train(w, params).samples_per_s / a100.samples_per_s
    return _train(w.with_(devices=1), params).samples_per_s / a100.samples_per_s


def error(pred: float, lo: float, hi: float) -> float:
    """Relative error against a value, or against the nearest end of a published range (0 inside)."""
    if lo <= pred <= hi:
        return 0.0 if lo != hi else pred / lo - 1.0
    ref = lo if pred < lo else hi
    return pred / ref - 1.0


def numeric_rows(params: dict | None = None) -> list[dict]:
    out = []
    for row in published_rows(PUBLISHED_V2_CSV):
        rng = parse_range(row["value"])
        if rng is None:
            continue
        try:
            pred = predict_row(row, params)
            err_msg = ""
        except ValueError as e:
            pred, err_msg = None, str(e)
        lo, hi = rng
        err = error(pred, lo, hi) if pred is not None and math.isfinite(pred) else None
        tol = TOL_MEGATRON if row["id"].startswith("megatron-t1") else TOL_NUMERIC
        out.append({"id": row["id"], "system": row["system"], "model": row["model"],
                    "metric": row["metric"], "published": row["value"], "predicted": pred,
                    "error": err, "tolerance": tol,
                    "within_tolerance": err is not None and abs(err) <= TOL_NUMERIC,
                    "assumption": ASSUME.get(row["id"], {}).get("note", "") or _default_note(row),
                    "problem": skip_reason(row) or err_msg, "skipped": bool(skip_reason(row))})
    return out


def _default_note(row) -> str:
    if row["id"].startswith("megatron-t1"):
        return "TP/PP from the notes, full recompute, micro-batch 1 under pipelining, fp16"
    return ""


def summary(rows: list[dict]) -> dict:
    by = {}
    for r in rows:
        if r["error"] is not None:
            by.setdefault(r["system"], []).append(abs(r["error"]))
    out = {k: {"rows": len(v), "mean_abs_error": float(np.mean(v)), "median_abs_error": float(np.median(v)),
               "max_abs_error": float(np.max(v))} for k, v in sorted(by.items())}
    meg = [abs(r["error"]) for r in rows if r["id"].startswith("megatron-t1") and r["error"] is not None]
    if meg:
        out["megatron-table1"] = {"rows": len(meg), "mean_abs_error": float(np.mean(meg)),
                                  "median_abs_error": float(np.median(meg)), "max_abs_error": float(np.max(meg))}
    return out


def fit_points() -> list[dict]:
    """Numeric rows of one hardware each (cross-system ratios are predicted, never fitted)."""
    return [{**row, "range": rng} for row in published_rows(PUBLISHED_V2_CSV)
            if (rng := parse_range(row["value"])) is not None and " " not in row["system"]]


_FITS: dict = {}


def pooled_fit():
    """(points, linearisation, fit on all, {source: fit without it}) of fit_points(), computed once
    per process for a given set of rows (validate and calibrate --published share it)."""
    from . import pooled

    pts = fit_points()
    key = tuple(pt["id"] for pt in pts)
    if key not in _FITS:
        lin = pooled.linearise(pts, predict_row, fit_engine)
        _FITS.clear()
        _FITS[key] = (pts, lin, *pooled.folds(lin, pts, predict_row))
    return _FITS[key]


def fit_engine(row: dict) -> str | None:
    """The serving engine whose parameters a fitted row sees (None: a training row)."""
    return row_engine(row, get_hardware(row["system"].split()[0])) if row.get("task") == "infer" else None


def kind_of(row: dict) -> str:
    """'serving' for an inference row, else 'training' (validation by kind)."""
    return "serving" if row.get("task") == "infer" else "training"


def by_group(rows: list[dict], key: str) -> dict:
    """{group: rows, sources, raw, in_sample, leave_one_source_out} over the rows' `key` values."""
    out = {}
    for g in sorted({r[key] for r in rows if r.get(key)}):
        rs = [r for r in rows if r.get(key) == g]
        out[g] = {"rows": len(rs), "sources": len({r["source"] for r in rs}), "raw": spread(rs, "error"),
                  "in_sample": spread(rs, "in_sample_error"), "leave_one_source_out": spread(rs, "loso_error")}
    return out


def engines_fitted(fitted: dict) -> dict:
    """{engine: fitted parameters} of the pooled fit on every row (shipped: profiles/engines.json)."""
    return {k.split(":", 1)[1]: v for k, v in sorted(fitted.items()) if k.startswith("engine:")}


def out_of_sample(rows: list[dict]) -> dict:
    """Fit the pooled profiles (pooled.py) on every row (in-sample) and once per source without
    it (leave-one-source-out); adds in_sample_* and loso_* to each row; returns the summaries."""
    from . import pooled

    pts, lin, fitted, by_source = pooled_fit()
    src_of = {row["id"]: row["source"] for row in published_rows(PUBLISHED_V2_CSV)}
    for r in rows:
        rng = parse_range(r["published"])
        fold = by_source.get(src_of[r["id"]], fitted)
        r["source"] = src_of[r["id"]]
        row = _ROWS_BY_ID()[r["id"]]
        r["kind"] = kind_of(row)
        r["engine"] = fit_engine(row) or ""
        for key, fit in (("in_sample", fitted), ("loso", fold)):
            pred = _try(r, pooled.full(lin, fit))
            r[f"{key}_predicted"] = pred
            r[f"{key}_error"] = error(pred, *rng) if pred is not None and math.isfinite(pred) else None
    kinds = by_group(rows, "kind")
    loso = {**spread(rows, "loso_error"), "by_kind": {k: v["leave_one_source_out"] for k, v in kinds.items()},
            "by_engine": {k: v["leave_one_source_out"] for k, v in by_group(rows, "engine").items()}}
    ins = {**spread(rows, "in_sample_error"), "by_kind": {k: v["in_sample"] for k, v in kinds.items()}}
    return {"in_sample": ins, "leave_one_source_out": loso, "fitted": fitted, "by_hardware": by_hardware(rows),
            "by_kind": kinds, "by_engine": by_group(rows, "engine"), "engines_fitted": engines_fitted(fitted)}


def _try(r: dict, params: dict) -> float | None:
    row = _ROWS_BY_ID()[r["id"]]
    try:
        return predict_row(row, params)
    except ValueError:
        return None


@lru_cache(maxsize=1)
def _ROWS_BY_ID() -> dict:  # noqa: N802
    return {r["id"]: r for r in published_rows(PUBLISHED_V2_CSV)}


def spread(rows: list[dict], key: str) -> dict:
    """median and mean |error|, share of rows beyond 50%, rows counted (None: no prediction)."""
    e = np.abs([r[key] for r in rows if r.get(key) is not None])
    n = len(e)
    return {"rows": n, "unpredicted": sum(r.get(key) is None for r in rows),
            "median_abs_error": float(np.median(e)) if n else None,
            "mean_abs_error": float(np.mean(e)) if n else None,
            "share_beyond_50pct": float(np.mean(e > 0.5)) if n else None}


def by_hardware(rows: list[dict]) -> dict:
    out = {}
    for sysname in sorted({r["system"] for r in rows}):
        rs = [r for r in rows if r["system"] == sysname]
        out[sysname] = {"rows": len(rs), "sources": len({r["source"] for r in rs}),
                        "raw": spread(rs, "error"), "in_sample": spread(rs, "in_sample_error"),
                        "leave_one_source_out": spread(rs, "loso_error")}
    return out


def run(params: dict | None = None, loso: bool = True) -> dict:
    """rows (prior-profile `predicted`/`error`, then in-sample and leave-one-source-out fits),
    per-hardware and overall summaries, trends."""
    from .trends import trend_checks

    rows = numeric_rows(params)
    oos = out_of_sample(rows) if loso else {}
    trends = trend_checks(params)
    n_ok = sum(r["within_tolerance"] for r in rows)
    meg = summary(rows).get("megatron-table1", {})
    return {"rows": rows, "summary": summary(rows), "trends": trends, **oos,
            "sources": len({r["source"] for r in published_rows(PUBLISHED_V2_CSV)}),
            "numeric_within_tolerance": n_ok, "numeric_rows": len(rows),
            "refused": [r["id"] for r in rows if r["predicted"] is None and not r["skipped"]],
            "skipped": [r["id"] for r in rows if r["skipped"]],
            "trends_passed": sum(t["passed"] for t in trends), "trends_total": len(trends),
            "megatron_mean_abs_error": meg.get("mean_abs_error"),
            "megatron_within_tolerance": meg.get("mean_abs_error", 1.0) <= TOL_MEGATRON,
            "tolerances": {"numeric": TOL_NUMERIC, "megatron_mean": TOL_MEGATRON}}
