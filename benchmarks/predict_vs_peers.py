"""llmbench's leave-one-source-out prediction beside two peer predictors, on every published row
(llmbench/reference/published_v2.csv) each peer can express, in one run (issue 20, build item 5).

    pip install --no-deps llm-analysis fire termcolor   # its huggingface-hub<0.15 pin clashes with tokenizers
    git --git-dir=<calculon mirror> archive HEAD | tar -x -C /tmp/calculon   # github:calculon-ai/calculon
    PYTHONPATH=. python benchmarks/predict_vs_peers.py --calculon /tmp/calculon [--rows] [--json]
                                                      [--no-calculon-search]

Nothing is downloaded at run time; a peer that is absent is skipped with one line saying so.

Peers and their documented settings (stated in the output too):
- llm-analysis 0.2.2 (cli99/llm-analysis): flops_efficiency 0.5 and hbm_memory_efficiency 0.9, the
  settings of its training example (examples/llama/run_train.sh; constant.py: "FLOPS efficiency
  achieved by Megatron-LM is ~0.5"); its shipped GPU configs only (gpu_configs/*.json:
  A100 SXM 40/80 GB, H100 SXM, MI250...), flash attention on, dtype w16a16e16 for fp16/bf16 and
  w8a8e16 for fp8 (its int8 peak is the H100's fp8 peak). Training: latency_per_iter; serving:
  inference() total latency, generated tokens / latency, the batch (when the row leaves it open)
  searched like llmbench's offline batch (powers of two, the best tokens/s that its memory check
  admits) and TP (when open) over the powers of two up to the row's devices.
- Calculon (calculon-ai/calculon, HEAD of its repository): its shipped system files only
  (systems/a100_80g.json, systems/h100_80g_nvl8.json), training only (it models no KV-cache decode);
  its example execution settings (fused activation, rs_ag = sequence parallel, no overlaps,
  optimizer sharding when DP > 1), TP on the NVLink tier and PP/DP there when they fit in 8, else on
  the second tier; bf16 run as its float16 (the same peak in its files). It has no GQA and no gated
  MLP: a SwiGLU model runs with feedforward 1.5 x d_ff (same MLP FLOPs and weights) and GQA as full
  multi-head attention (K/V projections over-counted); such rows are flagged `approx` and counted both
  ways. Every peer gets the row's stated layout, the knobs a row leaves open filled with the layout
  llmbench's planner chose for validate (validate.planned), the same for all predictors.
  `calculon-search` (on by default) then runs Calculon's own search over the execution knobs at that
  TP/PP/DP and micro-batch (calculon_grid) and keeps the fastest it admits; its TP/PP search
  (llm-optimal-execution, ~1 min a row) is not run.

Rows: every numeric row whose hardware has a peer config and whose metric is a throughput of one run
(tokens/s, samples/s, achieved TFLOP/s, MFU; serving: tokens/s, latency, TTFT, per-sequence decode
rate). Ratio rows of two runs (scaling efficiency, GAS 4 over 1, speedups), memory rows and MoE models
are outside this comparison. A peer's tokens/s becomes the row's metric with the FLOP count llmbench
uses for that row (metric / tokens_per_s of llmbench's own prediction: a unit conversion, independent
of any calibration). A row a peer refuses (its memory check, its layout rules) is counted as refused.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import io
import json
import logging
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from llmbench.perfmodel import validate as V
from llmbench.published import PUBLISHED_V2_CSV, parse_range, published_rows

#: llmbench hardware -> llm-analysis shipped gpu config (llm_analysis/gpu_configs/)
LLA_GPUS = {"a100-40gb": "a100-sxm-40gb", "a100-80gb": "a100-sxm-80gb", "h100-sxm": "h100-sxm-80gb",
            "mi250": "mi250-128gb"}
#: llmbench hardware -> Calculon shipped system file (calculon/systems/)
CALCULON_SYSTEMS = {"a100-80gb": "a100_80g.json", "h100-sxm": "h100_80g_nvl8.json"}
LLA_EFFICIENCY = 0.5      # llm-analysis examples/llama/run_train.sh; constant.py: Megatron-LM ~0.5
LLA_HBM_EFFICIENCY = 0.9  # llm-analysis examples/llama/run_train.sh
TRAIN_METRICS = ("tokens_per_s", "samples_per_s", "achieved_tflops", "mfu")
INFER_METRICS = ("tokens_per_s", "latency_s_p50", "time_to_first_token_s", "decode_tokens_per_s_per_seq")
BEYOND = 0.5


@dataclass(frozen=True)
class Case:
    """One published row as every predictor's inputs: the model, the layout (stated, or llmbench's
    planned one for the knobs left open; None: the peer searches it) and the unit conversion."""

    row_id: str
    kind: str               # training | serving
    metric: str
    hardware: str
    model: str
    precision: str
    batch: int | None       # serving: None = the offline batch is searched
    seq_len: int
    gen_len: int
    devices: int
    tp: int | None
    pp: int
    zero: int
    recompute: str
    micro_batch: int
    offload: str
    per_token_s: float      # training: metric value per token/s (llmbench's FLOP count)
    recompute_open: bool = False  # the row leaves recomputation open (the peer may choose it)
    approx: tuple[str, ...] = field(default=())   # what a peer cannot represent exactly (Calculon)


def expressible(row: dict, peer: str) -> str:
    """'' if `peer` can express `row`, else why not (rows are picked by this, never by error)."""
    if parse_range(row["value"]) is None:
        return "not numeric"
    task, hw = row["task"], row["system"]
    if " " in hw:
        return "cross-system ratio"
    metrics = TRAIN_METRICS if task == "train" else INFER_METRICS
    if row["metric"] not in metrics:
        return f"metric {row['metric']} is not one run's throughput"
    gpus = LLA_GPUS if peer == "llm-analysis" else CALCULON_SYSTEMS
    if hw not in gpus:
        return f"no shipped {peer} config for {hw}"
    if peer.startswith("calculon") and task != "train":
        return "Calculon models training only"
    spec = V.row_spec(V.row_workload(row))
    if spec.n_experts:
        return "MoE"
    if not spec.causal:
        return "encoder"
    if peer.startswith("calculon") and row["task"] == "train" and _zero(row) >= 2:
        return "Calculon shards no weights or gradients (ZeRO-2/3, FSDP)"
    return ""


def _zero(row: dict) -> int:
    try:
        return case_of(row).zero
    except ValueError:  # no layout from llmbench's planner either: the row's stated ZeRO stage
        return int(row["zero"] or 0)


def case_of(row: dict) -> Case:
    """The mapping from a published row to the peers' inputs (validate's own row_workload)."""
    w = V.row_workload(row)
    spec = V.row_spec(w)
    approx = tuple(a for a, on in (("swiglu", spec.activation in ("swiglu", "geglu")),
                                   ("gqa", (spec.n_kv_heads or spec.n_heads) != spec.n_heads)) if on)
    common = dict(row_id=row["id"], metric=row["metric"], hardware=w.hardware, model=spec.name,
                  precision=w.precision or "bf16", seq_len=w.seq_len, approx=approx)
    if row["task"] == "infer":
        open_batch = not row["batch"] and "batch" not in V.ASSUME.get(row["id"], {})
        return Case(kind="serving", batch=None if open_batch else w.batch, gen_len=w.gen_len,
                    devices=w.devices or 1, tp=w.layout.tp, pp=w.layout.pp or 1, zero=0, recompute="none",
                    micro_batch=1, offload="none", per_token_s=1.0, **common)
    p = V.planned(row["id"], w)
    lay = p.layout
    dp = p.devices // (lay.tp * lay.pp)
    micro = p.micro_batch or p.batch // (dp * (p.grad_accum or 1))
    r = V._train(w, V.with_framework(row, w, None), row["id"])  # as validate.predict_row runs it
    value = r.executed_tflops if row["id"].startswith("megatron-t1") else getattr(r, row["metric"])
    return Case(kind="training", batch=p.batch, gen_len=0, devices=p.devices, tp=lay.tp, pp=lay.pp,
                zero=lay.zero or 0, recompute=lay.recompute or "none", micro_batch=micro,
                offload=lay.offload or "none", per_token_s=value / r.tokens_per_s,
                recompute_open=w.layout.recompute is None, **common)


# ---------------------------------------------------------------- llm-analysis


def _quiet_lla():
    for name in ["llm_analysis", *logging.root.manager.loggerDict]:
        if name.startswith("llm_analysis"):
            logging.getLogger(name).setLevel(logging.ERROR)


def _lla(c: Case, tp: int, dp: int, eff: float = LLA_EFFICIENCY):
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import (ModelConfig, ParallelismConfig, get_dtype_config_by_name,
                                     get_gpu_config_by_name)

    from llmbench.models import get_model

    spec = get_model(c.model)
    mc = ModelConfig(name=spec.name, num_layers=spec.n_layers, n_head=spec.n_heads, hidden_dim=spec.d_model,
                     vocab_size=spec.vocab_size, max_seq_len=c.seq_len + c.gen_len,
                     num_key_value_heads=spec.n_kv_heads or spec.n_heads, ffn_embed_dim=spec.d_ff,
                     expansion_ratio=spec.d_ff / spec.d_model)
    dtype = get_dtype_config_by_name("w8a8e16" if c.precision == "fp8" else "w16a16e16")
    return LLMAnalysis(mc, get_gpu_config_by_name(LLA_GPUS[c.hardware]), dtype,
                       ParallelismConfig(tp_size=tp, pp_size=c.pp, dp_size=dp), flops_efficiency=eff,
                       hbm_memory_efficiency=LLA_HBM_EFFICIENCY), spec


def lla_train_tokens_per_s(c: Case) -> float:
    from llm_analysis.analysis import ActivationRecomputation, DSZeRO

    la, spec = _lla(c, c.tp, c.devices // (c.tp * c.pp))
    with contextlib.redirect_stdout(io.StringIO()):
        r = la.training(batch_size_per_gpu=c.micro_batch, global_batch_size=c.batch, seq_len=c.seq_len,
                        **_lla_train_kw(c, spec, ActivationRecomputation, DSZeRO))
    return c.batch * c.seq_len / r["latency_per_iter"]


def _lla_train_kw(c: Case, spec, recompute_enum, zero_enum) -> dict:
    return {"activation_recomputation": recompute_enum[c.recompute.upper()], "ds_zero": zero_enum(c.zero),
            "mlp_gated_linear_units": spec.activation in ("swiglu", "geglu"), "flash_attn": True}


def lla_serve(c: Case, tp: int, batch: int) -> dict:
    """llm-analysis inference of one replica of `tp` GPUs at `batch` concurrent requests."""
    la, _ = _lla(c, tp, 1)
    with contextlib.redirect_stdout(io.StringIO()):
        r = la.inference(batch_size_per_gpu=batch, seq_len=c.seq_len, num_tokens_to_generate=c.gen_len)
    replicas = c.devices // (tp * c.pp)
    return {"tokens_per_s": replicas * batch * c.gen_len / r["total_latency"],
            "latency_s_p50": r["total_latency"], "time_to_first_token_s": r["prefill_latency"],
            "decode_tokens_per_s_per_seq": 1.0 / r["decode_latency"]}


def lla_serving_value(c: Case) -> float:
    """The row's metric; the batch (offline rows) and TP (when open) searched for the most tokens/s
    among the settings llm-analysis's own memory check admits."""
    tps = [c.tp] if c.tp else [t for t in (1, 2, 4, 8) if t <= c.devices and c.devices % t == 0]
    batches = [c.batch] if c.batch else list(V.OFFLINE_BATCHES)
    if c.batch is None and c.metric == "time_to_first_token_s":  # a server's request: its own prefill
        batches = [1]
    best, why = None, ""
    for tp in tps:
        for b in batches:
            try:
                r = lla_serve(c, tp, b)
            except (AssertionError, ValueError, ZeroDivisionError) as e:
                why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
                continue
            if best is None or r["tokens_per_s"] > best["tokens_per_s"]:
                best = r
    if best is None:
        raise PeerRefused(f"llm-analysis admits no batch: {why}")
    return best[c.metric]


def llm_analysis_value(c: Case) -> float:
    if c.kind == "serving":
        return lla_serving_value(c)
    try:
        return lla_train_tokens_per_s(c) * c.per_token_s
    except (AssertionError, ValueError, KeyError, ZeroDivisionError) as e:
        raise PeerRefused(f"llm-analysis: {str(e).splitlines()[0][:100] if str(e) else type(e).__name__}")


class PeerRefused(Exception):
    """The peer's own checks refuse the row's setting (counted, not compared)."""


# ---------------------------------------------------------------- Calculon


def calculon_app(c: Case) -> dict:
    """Calculon's application JSON: gated MLPs as feedforward 1.5 x d_ff (the same FLOPs and
    weights in its 2-matrix MLP), GQA as full multi-head attention (it has multihead/multiquery only)."""
    from llmbench.models import get_model

    spec = get_model(c.model)
    ff = spec.d_ff * 3 // 2 if "swiglu" in c.approx else spec.d_ff
    return {"hidden": spec.d_model, "feedforward": ff, "seq_size": c.seq_len, "attn_heads": spec.n_heads,
            "attn_size": spec.d_head, "num_blocks": spec.n_layers}


def calculon_exe(c: Case, node: int = 8) -> dict:
    """Calculon's execution JSON: its example's settings; TP on the NVLink tier (0), PP then DP
    there too while the tier still holds them, the rest on tier 1."""
    dp = c.devices // (c.tp * c.pp)
    used, nets = c.tp, {}
    for name, n in (("pipeline_par_net", c.pp), ("data_par_net", dp)):
        fits = n == 1 or (used * n <= node and node % (used * n) == 0)
        nets[name] = 0 if fits else 1
        used *= n if fits else 1
    return {"num_procs": c.devices, "tensor_par": c.tp, "pipeline_par": c.pp, "data_par": dp,
            "tensor_par_net": 0, **nets, "batch_size": c.batch, "microbatch_size": c.micro_batch,
            "datatype": "float8" if c.precision == "fp8" else "float16", "fused_activation": True,
            "attention_type": "multihead",
            "activation_recompute": {"selective": "attn_only"}.get(c.recompute, c.recompute),
            "pipeline_interleaving": 1, "optimizer_sharding": dp > 1 and c.zero >= 1,
            "tensor_par_comm_type": "rs_ag", "tensor_par_overlap": "none", "seq_par_ag_redo": False,
            "data_par_overlap": False, "weight_offload": False, "activations_offload": False,
            "optimizer_offload": c.offload == "optimizer", "training": True}


def load_calculon(root: Path):
    """(Llm, System) from a Calculon checkout, loading only the modules one calculation needs:
    its package __init__ also imports the CSV-writing search commands, which need pandas."""
    import importlib
    import types

    if "calculon.llm.llm" not in sys.modules:
        pkg = types.ModuleType("calculon")
        pkg.__path__ = [str(root / "calculon")]
        sys.modules["calculon"] = pkg
        for sub in ("util", "io", "system"):  # what calculon/__init__.py re-exports
            m = importlib.import_module(f"calculon.{sub}")
            pkg.__dict__.update({k: v for k, v in vars(m).items() if not k.startswith("_")})
        llm_pkg = types.ModuleType("calculon.llm")
        llm_pkg.__path__ = [str(root / "calculon" / "llm")]
        sys.modules["calculon.llm"] = llm_pkg
    llm = importlib.import_module("calculon.llm.llm")
    return llm.Llm, sys.modules["calculon.system"].System


def _calculon_time(c: Case, root: Path, exe: dict) -> float:
    """Calculon's step time (s) of one execution of the row's model on its shipped system file."""
    Llm, System = load_calculon(root)
    sysj = json.loads((root / "systems" / CALCULON_SYSTEMS[c.hardware]).read_text())
    model = Llm(Llm.Application(calculon_app(c)), logging.getLogger("calculon"))
    try:
        model.compile(System(sysj), Llm.Execution.from_json(exe))
        model.run(System(sysj))
    except (Llm.Error, AssertionError) as e:
        raise PeerRefused(f"Calculon: {str(e)[:100] or type(e).__name__}")
    return model.get_total_time()


def calculon_value(c: Case, root: Path) -> float:
    return c.batch * c.seq_len / _calculon_time(c, root, calculon_exe(c)) * c.per_token_s


def calculon_grid(c: Case, root: Path) -> list[dict]:
    """The executions Calculon's own search (llm/optimal_execution.py) tries at the row's TP, PP, DP,
    batch and micro-batch: recomputation when the row leaves it open, optimizer sharding, TP
    communication and overlap, DP overlap, all-gather redo, pipeline interleaving (offloads off:
    no row offloads; networks as calculon_exe)."""
    Llm, _ = load_calculon(root)
    base = calculon_exe(c)
    tp, dp, blocks = c.tp, base["data_par"], calculon_app(c)["num_blocks"]
    if blocks % c.pp:  # its own search's rule (Llm.get_all_pipeline_parallelisms)
        raise PeerRefused(f"Calculon: {blocks} blocks do not divide into {c.pp} pipeline stages")
    out = []
    for rc, shard, comm, tpo, dpo, inter in itertools.product(
            ("none", "attn_only", "full") if c.recompute_open else (base["activation_recompute"],),
            (True, False) if dp > 1 else (False,), ("ar", "p2p_rs_ag", "rs_ag") if tp > 1 else ("rs_ag",),
            ("none", "ring", "pipe") if tp > 1 else ("none",), (True, False) if dp > 1 else (False,),
            tuple(Llm.get_valid_pipeline_interleavings(blocks, c.pp))):
        for redo in ((True, False) if Llm.can_redo_ag(comm, rc) else (False,)):
            out.append({**base, "activation_recompute": rc, "optimizer_sharding": shard,
                        "tensor_par_comm_type": comm, "tensor_par_overlap": tpo, "data_par_overlap": dpo,
                        "pipeline_interleaving": inter, "seq_par_ag_redo": redo})
    return out


def calculon_search_value(c: Case, root: Path) -> tuple[float, str]:
    """The fastest execution of calculon_grid that Calculon admits (its optimal-execution rule)."""
    best = None
    for exe in calculon_grid(c, root):  # raises PeerRefused when the row's PP is outside it
        try:
            t = _calculon_time(c, root, exe)
        except PeerRefused:
            continue
        if best is None or t < best[0]:
            best = (t, exe)
    if best is None:
        raise PeerRefused("Calculon: no execution of its search fits")
    e = best[1]
    return (c.batch * c.seq_len / best[0] * c.per_token_s,
            f"search: recompute {e['activation_recompute']}, tp comm {e['tensor_par_comm_type']}/"
            f"{e['tensor_par_overlap']}, dp overlap {e['data_par_overlap']}, interleave {e['pipeline_interleaving']}")


# ---------------------------------------------------------------- the run


PEERS = ("llm-analysis", "calculon", "calculon-search")


def available(calculon_dir: str | None, search: bool = False) -> dict[str, str]:
    """peer -> '' when it can run here, else the line saying why it is skipped (calculon-search:
    only when asked for)."""
    out = {}
    try:
        import llm_analysis.analysis  # noqa: F401 (imports fire, termcolor)
        _quiet_lla()
        out["llm-analysis"] = ""
    except ImportError as e:
        out["llm-analysis"] = (f"llm-analysis cannot be imported ({e}; pip install --no-deps llm-analysis fire "
                               "termcolor): skipped")
    root = Path(calculon_dir) if calculon_dir else None
    if root is None or not (root / "calculon" / "llm" / "llm.py").is_file():
        out["calculon"] = (f"Calculon not found at {calculon_dir!r} (--calculon DIR: a checkout of "
                           "github:calculon-ai/calculon): skipped")
    else:
        out["calculon"] = ""
    if search:
        out["calculon-search"] = out["calculon"]
    return out


#: recomputation tried, fastest first, when a row leaves it open and the peer refuses llmbench's choice
RECOMPUTE_ORDER = ("none", "selective", "full")


def peer_value(peer: str, c: Case, calculon_dir: str | None) -> tuple[float, str]:
    """(the peer's value of the row's metric, a note). A recomputation the row leaves open: the
    planner's choice first; if the peer's own memory check refuses it, the fastest of none,
    selective, full that it admits (what its own search would pick; a row's stated setting is kept)."""
    if peer == "calculon-search":
        return calculon_search_value(c, Path(calculon_dir).resolve())

    def one(x: Case) -> float:
        return llm_analysis_value(x) if peer == "llm-analysis" else calculon_value(x, Path(calculon_dir).resolve())

    tries = [c.recompute] + [r for r in RECOMPUTE_ORDER if c.recompute_open and r != c.recompute]
    first = None
    for rc in tries:
        try:
            v = one(replace(c, recompute=rc))
        except PeerRefused as e:
            first = first or e
            continue
        return v, "" if rc == c.recompute else f"recompute {rc} (open in the row; {c.recompute} refused)"
    raise first


def compare(loso_rows: list[dict], peers: dict[str, str], calculon_dir: str | None, only=None) -> list[dict]:
    """One record per (row, peer that can express it): published, llmbench LOSO, peer, errors."""
    by_id = {r["id"]: r for r in loso_rows}
    out = []
    for row in published_rows(PUBLISHED_V2_CSV):
        if only and row["id"] not in only:
            continue
        for peer in PEERS:
            if peer not in peers or peers[peer] or expressible(row, peer):
                continue
            out.append(_record(row, peer, by_id.get(row["id"], {}), calculon_dir))
    return out


def _record(row: dict, peer: str, ours: dict, calculon_dir: str | None) -> dict:
    lo, hi = parse_range(row["value"])
    try:
        c = case_of(row)
        (v, note), refused = peer_value(peer, c, calculon_dir), ""
    except PeerRefused as e:
        v, note, refused = None, "", str(e)
    except ValueError as e:  # llmbench's planner finds no layout to give the peer (validate: unpredicted)
        c, v, note, refused = None, None, "", f"no layout to give the peer: {str(e)[:80]}"
    pred = ours.get("loso_predicted")
    kind = "serving" if row["task"] == "infer" else "training"
    return {"id": row["id"], "source": row["source"], "peer": peer, "kind": kind, "hardware": row["system"], "metric": row["metric"],
            "published": row["value"], "llmbench_loso": pred,
            "llmbench_error": V.error(pred, lo, hi) if pred is not None and math.isfinite(pred) else None,
            "llmbench_in_sample_error": ours.get("in_sample_error"),
            "peer_value": v, "peer_error": V.error(v, lo, hi) if v is not None and math.isfinite(v) else None,
            "refused": refused, "note": note, "approx": list(c.approx) if c and peer.startswith("calculon") else [],
            "case": asdict(c) if c else None}


def table(records: list[dict]) -> list[dict]:
    """By peer and kind: rows expressible, refused, compared (both predicted), median |error| of
    each on exactly the compared rows, rows beyond 50%. Calculon also on exact architectures only."""
    groups = []
    for peer in PEERS:
        for kind in ("training", "serving"):
            rs = [r for r in records if r["peer"] == peer and r["kind"] == kind]
            if not rs:
                continue
            groups.append(_group(f"{peer}", kind, rs))
            if peer.startswith("calculon") and any(r["approx"] for r in rs):
                groups.append(_group(f"{peer} (exact arch.)", kind, [r for r in rs if not r["approx"]]))
    return groups


def by_source(records: list[dict]) -> list[dict]:
    """The same figures per peer, kind and source: where llmbench is ahead and where it is not."""
    out = []
    for peer in PEERS:
        for kind in ("training", "serving"):
            rs = [r for r in records if r["peer"] == peer and r["kind"] == kind]
            for src in sorted({r["source"] for r in rs}):
                out.append({**_group(peer, kind, [r for r in rs if r["source"] == src]), "source": src})
    return out


def _group(peer: str, kind: str, rs: list[dict]) -> dict:
    both = [r for r in rs if r["peer_error"] is not None and r["llmbench_error"] is not None]
    pe, le = (np.abs([r[k] for r in both]) for k in ("peer_error", "llmbench_error"))
    med = (lambda e: float(np.median(e)) if len(e) else None)
    return {"peer": peer, "kind": kind, "expressible": len(rs), "refused": sum(bool(r["refused"]) for r in rs),
            "compared": len(both), "peer_median_abs_error": med(pe), "llmbench_loso_median_abs_error": med(le),
            "peer_beyond_50pct": int(np.sum(pe > BEYOND)), "llmbench_beyond_50pct": int(np.sum(le > BEYOND)),
            "llmbench_better_rows": int(np.sum(le < pe)),
            "llmbench_ahead": bool(len(both)) and med(le) < med(pe)}


def _pct(x) -> str:
    return "   -  " if x is None else f"{x:6.1%}"


def print_table(groups: list[dict]) -> None:
    print(f"{'peer':<29} {'kind':<9} {'rows':>4} {'refused':>7} {'compared':>8} {'peer med|err|':>13} "
          f"{'llmbench LOSO':>13} {'>50% peer':>9} {'>50% ours':>9} {'ours closer':>11}")
    for g in groups:
        print(f"{g['peer']:<29} {g['kind']:<9} {g['expressible']:>4} {g['refused']:>7} {g['compared']:>8} "
              f"{_pct(g['peer_median_abs_error']):>13} {_pct(g['llmbench_loso_median_abs_error']):>13} "
              f"{g['peer_beyond_50pct']:>9} {g['llmbench_beyond_50pct']:>9} "
              f"{g['llmbench_better_rows']:>5}/{g['compared']:<5}")


def print_sources(groups: list[dict]) -> None:
    print(f"\n{'peer':<15} {'kind':<9} {'source':<48} {'compared':>8} {'peer':>7} {'llmbench':>8}  ahead")
    for g in groups:
        if g["compared"]:
            print(f"{g['peer']:<15} {g['kind']:<9} {g['source'][:48]:<48} {g['compared']:>8} "
                  f"{_pct(g['peer_median_abs_error']):>7} {_pct(g['llmbench_loso_median_abs_error']):>8}  "
                  f"{'yes' if g['llmbench_ahead'] else 'NO'}")


def print_rows(records: list[dict]) -> None:
    print(f"\n{'row':<44} {'peer':<15} {'published':>12} {'llmbench':>12} {'err':>7} {'peer':>12} {'err':>7}")
    for r in records:
        pv = "refused" if r["refused"] else f"{r['peer_value']:,.4g}"
        pe = "" if r["peer_error"] is None else f"{r['peer_error']:+.1%}"
        lv = "-" if r["llmbench_loso"] is None else f"{r['llmbench_loso']:,.4g}"
        le = "" if r["llmbench_error"] is None else f"{r['llmbench_error']:+.1%}"
        tag = " approx:" + "+".join(r["approx"]) if r["approx"] else ""
        tag += f" [{r['refused'] or r['note']}]" if r["refused"] or r["note"] else ""
        print(f"{r['id'][:44]:<44} {r['peer']:<15} {r['published']:>12} {lv:>12} {le:>7} {pv:>12} {pe:>7}{tag}")


SETTINGS = {
    "llm-analysis": f"flops_efficiency {LLA_EFFICIENCY}, hbm_memory_efficiency {LLA_HBM_EFFICIENCY}, "
                    f"shipped gpu configs {sorted(set(LLA_GPUS.values()))}, flash attention, "
                    "w16a16e16 / w8a8e16 (fp8)",
    "calculon": f"shipped systems {sorted(set(CALCULON_SYSTEMS.values()))}, its example execution settings, "
                "the row's layout (open knobs: llmbench's planned layout), training only",
    "calculon-search": "as calculon, then the fastest execution Calculon admits over its own search's knobs "
                       "(recompute when open, optimizer sharding, TP comm and overlap, DP overlap, AG redo, "
                       "interleaving) at the row's TP/PP/DP and micro-batch",
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--calculon", metavar="DIR", help="a checkout of github:calculon-ai/calculon")
    ap.add_argument("--calculon-search", action=argparse.BooleanOptionalAction, default=True,
                    help="also Calculon's own execution search per row (about a minute more; default on)")
    ap.add_argument("--json", action="store_true", help="records and table as JSON")
    ap.add_argument("--rows", action="store_true", help="print every compared row too")
    a = ap.parse_args(argv)
    peers = available(a.calculon, a.calculon_search)
    for line in dict.fromkeys(filter(None, peers.values())):  # calculon-search shares calculon's line
        print(line, file=sys.stderr)
    if all(peers.values()):
        print("no peer can run here", file=sys.stderr)
        return 2
    res = V.run()
    records = compare(res["rows"], peers, a.calculon)
    groups, sources = table(records), by_source(records)
    if a.json:
        print(json.dumps({"settings": SETTINGS, "skipped": {k: v for k, v in peers.items() if v},
                          "table": groups, "by_source": sources, "rows": records}, indent=1))
        return 0
    for peer, s in SETTINGS.items():
        if peers.get(peer) == "":
            print(f"{peer}: {s}")
    print(f"llmbench: leave-one-source-out prediction of each row (validate.run(); overall median "
          f"{res['leave_one_source_out']['median_abs_error']:.1%} on {res['leave_one_source_out']['rows']} rows)\n")
    print_table(groups)
    print_sources(sources)
    if a.rows:
        print_rows(records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
