"""llmbench predict vs llm-analysis (cli99/llm-analysis, pip) on the same configurations, both
against the published numbers: Megatron Table 1 (arXiv:2104.04473) and Llama-2-70B on 64 Gaudi2.

    pip install --no-deps llm-analysis fire   # its huggingface-hub<0.15 pin clashes with tokenizers
    .venv/bin/python benchmarks/predict_vs_llm_analysis.py

llm-analysis takes a FLOPs efficiency from the user (default 1.0; its constant.py says Megatron-LM
reaches ~0.5): both settings are shown. TFLOP/s per GPU for both tools = the same FLOP count (ours,
models/counting with full recompute = Megatron Eq. 3) / the tool's step time / GPUs.
"""
from __future__ import annotations

import contextlib
import io
import logging
import sys

from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.models.counting import training_flops
from llmbench.perfmodel.validate import planned, predict_row, row_workload
from llmbench.published import PUBLISHED_V2_CSV, published_rows


def lla_step_time(spec, gpu, *, batch, seq, devices, tp, pp, recompute, eff, dtype="w16a16e16", zero=0):
    from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
    from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name

    mc = ModelConfig(name=spec.name, num_layers=spec.n_layers, n_head=spec.n_heads, hidden_dim=spec.d_model,
                     vocab_size=spec.vocab_size, max_seq_len=seq, num_key_value_heads=spec.n_kv_heads or spec.n_heads,
                     ffn_embed_dim=spec.d_ff, expansion_ratio=spec.d_ff / spec.d_model)
    dp = devices // (tp * pp)
    la = LLMAnalysis(mc, gpu, get_dtype_config_by_name(dtype) if isinstance(dtype, str) else dtype,
                     ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp), flops_efficiency=eff,
                     hbm_memory_efficiency=1.0 if eff == 1.0 else 0.9)
    with contextlib.redirect_stdout(io.StringIO()):
        r = la.training(batch_size_per_gpu=1, global_batch_size=batch, seq_len=seq,
                        activation_recomputation=ActivationRecomputation[recompute.upper()],
                        ds_zero=DSZeRO(zero), mlp_gated_linear_units=spec.activation == "swiglu")
    return r["latency_per_iter"]


def ours(row: dict):
    """(llmbench's value, the Workload it ran) for a published row, as `llmbench validate` makes
    them: the row's Workload (validate.row_workload), knobs the source leaves open chosen once by
    the planner (validate.planned), the source's framework terms (validate.predict_row)."""
    return predict_row(row), planned(row["id"], row_workload(row))


def main() -> int:
    try:
        import llm_analysis  # noqa: F401
        from llm_analysis.config import GPUConfig, get_gpu_config_by_name
    except ImportError as e:
        print(f"llm-analysis cannot run here: {e}; pip install llm-analysis")
        return 1
    logging.getLogger("llm_analysis").setLevel(logging.ERROR)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("llm_analysis"):
            logging.getLogger(name).setLevel(logging.ERROR)
    a100 = get_gpu_config_by_name("a100-sxm-80gb")
    print(f"{'row':<26} {'published':>10} {'llmbench':>10} {'err':>7} {'lla(1.0)':>10} {'err':>7} "
          f"{'lla(0.5)':>10} {'err':>7}")
    errs = {"llmbench": [], "lla1": [], "lla05": []}
    for row in published_rows(PUBLISHED_V2_CSV):
        if not row["id"].startswith("megatron-t1"):
            continue
        spec = get_model(row["model"])
        ours_tflops, w = ours(row)
        B, S, N, tp, pp = w.batch, w.seq_len, w.devices, w.layout.tp, w.layout.pp
        pub = float(row["value"])
        fl = training_flops(spec, B, S, "full")["hardware"]
        t1 = lla_step_time(spec, a100, batch=B, seq=S, devices=N, tp=tp, pp=pp, recompute="full", eff=1.0)
        t5 = lla_step_time(spec, a100, batch=B, seq=S, devices=N, tp=tp, pp=pp, recompute="full", eff=0.5)
        l1, l5 = fl / t1 / N / 1e12, fl / t5 / N / 1e12
        _row(row["id"], pub, ours_tflops, l1, l5, errs)
    # Llama-2-70B on 64 Gaudi2, fp8 (Intel's model-performance page): llm-analysis has no Gaudi2,
    # so its GPUConfig is built from our catalog entry (the same datasheet numbers)
    row = next(r for r in published_rows(PUBLISHED_V2_CSV) if r["id"] == "gaudi2-llama2-70b-train")
    g = get_hardware("gaudi2")
    ours_tps, w = ours(row)
    lay = w.layout
    gcfg = GPUConfig(name="gaudi2", mem_per_GPU_in_GB=g.device_memory.capacity_bytes / 1e9,
                     hbm_bandwidth_in_GB_per_sec=g.device_memory.bandwidth_bytes_per_s / 1e9,
                     intra_node_bandwidth_in_GB_per_sec=g.interconnect.bandwidth_bytes_per_s / 1e9,
                     intra_node_min_message_latency=g.interconnect.latency_s,
                     peak_fp16_TFLOPS=g.peak("bf16") / 1e12, peak_i8_TFLOPS=g.peak("fp8") / 1e12,
                     peak_i4_TFLOPS=g.peak("fp8") / 1e12,
                     inter_node_bandwidth_in_GB_per_sec=g.interconnect.inter_node_bandwidth_bytes_per_s / 1e9)
    spec = get_model("llama-2-70b")
    B, S, N = w.batch, w.seq_len, w.devices
    from llm_analysis.config import DtypeConfig
    w8 = DtypeConfig(name="w8a8e16", weight_bits=8, activation_bits=8, embedding_bits=16)
    t1, t5 = (lla_step_time(spec, gcfg, batch=B, seq=S, devices=N, tp=lay.tp, pp=lay.pp, recompute=lay.recompute,
                            eff=eff, dtype=w8, zero=lay.zero) for eff in (1.0, 0.5))
    _row("gaudi2-llama2-70b (tok/s)", float(row["value"]), ours_tps, B * S / t1, B * S / t5, errs)
    print()
    for k, label in (("llmbench", "llmbench predict (calibrated)"), ("lla1", "llm-analysis, efficiency 1.0 (default)"),
                     ("lla05", "llm-analysis, efficiency 0.5")):
        meg = errs[k][:10]
        print(f"{label:<40} Megatron mean abs error {sum(meg) / len(meg):6.1%}   Gaudi2 Llama-2-70B "
              f"{errs[k][10]:6.1%}")
    return 0


def _row(rid, pub, ours, l1, l5, errs):
    e = [abs(x / pub - 1) for x in (ours, l1, l5)]
    for k, v in zip(("llmbench", "lla1", "lla05"), e):
        errs[k].append(v)
    print(f"{rid:<26} {pub:>10,.1f} {ours:>10,.1f} {ours / pub - 1:>+7.1%} {l1:>10,.1f} {l1 / pub - 1:>+7.1%} "
          f"{l5:>10,.1f} {l5 / pub - 1:>+7.1%}")


if __name__ == "__main__":
    sys.exit(main())
