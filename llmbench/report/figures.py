"""The report's plots (matplotlib, Agg backend): one function per figure, each taking the report's
`Data` and returning a Figure, or None when the database holds nothing for it.

    from llmbench.report.figures import FIGURES
    fig = FIGURES[0].draw(data)

Measured points are green circles, predicted values lines with small squares in the hardware's
colour, published values red stars (`style.py`); every legend entry says which it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .plots_machine import (
    draw_block, draw_llm_inference, draw_parity, draw_roofline, draw_streaming, draw_time_to_train,
)
from .plots_studies import (
    draw_bert_latency, draw_bert_throughput, draw_gas, draw_genslm, draw_scaling, draw_seq_length,
    draw_sparsity,
)
from .economics import draw_economics
from .runs import draw_runs
from .plots_seed import draw_sparse_loss
from .serving import draw_serving
from .rows import Data


@dataclass(frozen=True)
class FigureSpec:
    id: str
    title: str
    studies: tuple[str, ...]
    """studies whose rows the figure draws (the caption names their commands)"""
    how_to_read: str
    draw: Callable[[Data], object]


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec("roofline", "Roofline per accelerator", ("ceilings", "transformer-block", "dp-scaling"),
               "Each panel is one accelerator: the grey line is its roof (dense peak FLOP/s, then the slope "
               "of its device-memory bandwidth at low intensity). Squares are predicted training points "
               "(one GPT-2 XL layer at batch 8-64, and the whole GPT-2 XL model) placed at their "
               "arithmetic intensity from models/ counting, and triangles BERT-base inference at batch "
               "1-1024. The last panel is this machine: measured GEMM and copy ceilings (green line) "
               "with the measured points (green circles). A point far below its roof is losing time "
               "to something the roof does not count: on CS-2/CS-3 that is streaming the weights "
               "from MemoryX (training) and small batches that cannot fill the wafer.",
               draw_roofline),
    FigureSpec("block", "Transformer block by precision and batch", ("transformer-block",),
               "One GPT-2 XL layer (d_model 1600, seq 1024) on the five systems of arXiv:2310.04607 Figs. 3/4, "
               "at each precision the catalog has a peak for (Gaudi2 has none for fp32/fp16, so it appears "
               "in bf16 only). Differs from the seed: the seed draws forward (Fig. 3) and backward (Fig. 4) "
               "apart; the model predicts forward + backward together (measure block measures both, on "
               "this CPU). The A100 fp32 line uses the 19.5 TFLOP/s non-tensor peak, so fp16/fp32 is ~14x "
               "where the seed says ~4x; the model has no pipeline fill term for the SN30, whose rise with "
               "batch comes from GEMM efficiency. Right: what this CPU measured (green), with the "
               "prediction for this CPU as a grey line when present. Hollow squares: predicted not to fit "
               "device memory.", draw_block),
    FigureSpec("bert_throughput", "BERT training throughput against batch (CS-2)", ("bert-train-batch",),
               "Left: predicted samples/s of BERT-base (solid) and BERT-large (dashed) on one CS-2, with "
               "the published points (stars: arXiv:2409.00287 peak values and ALCF run logs). Right: "
               "BERT training measured on this machine against its global batch.", draw_bert_throughput),
    FigureSpec("bert_latency", "BERT inference latency against batch", ("bert-infer-batch",),
               "Predicted latency of one classification batch (sequence 128) per accelerator, log-log; a "
               "slope of 1 means compute-bound. The paper reports CS-2 latency nearly flat in batch; in the "
               "model the CS-2/CS-3 flat start is a fitted fixed cost per layer (layer_overhead_s, fitted on "
               "training rows) plus a per-request overhead, not the time to read the weights from SRAM "
               "(microseconds). On GPUs the flat start is reading the weights once per batch. Right: p50 "
               "latency measured here.", draw_bert_latency),
    FigureSpec("scaling", "GPT-2 XL scaling over devices", ("dp-scaling",),
               "Left: predicted GPT-2 XL training tokens/s against device count (16 sequences per "
               "device, the layout the planner picks). Right: scaling efficiency T(n)/(n·T(1)); 1.0 is "
               "perfect. Stars are the published efficiencies of arXiv:2310.04607 Table II at their device "
               "counts; green is the 2-process data-parallel run measured here. Where a line stays at 1.0 "
               "the model hides the gradient all-reduce under the backward pass at 16 sequences per "
               "device; the published 0.76-0.80 (A100, SN30, MI250) are not reached with this layout "
               "(llmbench validate reaches 0.78 for the A100 with micro-batch 1, GAS 4, ZeRO-1). "
               "Hollow squares: predicted not to fit device memory.", draw_scaling),
    FigureSpec("seq_length", "Sequence length", ("gpt2-seq-length",),
               "Table III's axis: GPT-2 XL at 1K-8K with its learned positions extended (the seed extends "
               "them too), 16k tokens per batch, one device; the attention square grows with T, so "
               "throughput falls as T grows. Dashed: the seed's SN30 run of a 13B model up to 64K tokens "
               "on one RDU (batch 1; GPT-3 13B shape). Hollow squares: predicted not to fit device memory. "
               "Right: measured on this CPU with a shrunk model at short sequences.", draw_seq_length),
    FigureSpec("gas", "Gradient accumulation (GAS)", ("gas",),
               "arXiv:2310.04607 Fig. 6, three panels. (a) Throughput at GAS g relative to GAS 1, same "
               "micro-batch: accumulation spreads one gradient all-reduce (and the optimizer step) over g "
               "micro-batches, so the gain is large where those were exposed; dashed are the papers' set-ups "
               "in bf16 without ZeRO (llmbench validate uses fp16 with ZeRO-1 and gets 1.83 for the A100). "
               "(b) SN30, 8 RDUs, samples/s at local batch 1 / 4 / 16 and GAS 1-16: a large gain at a small "
               "local batch that saturates as it grows. (c) Graphcore POD16 (4 replicas of 4 IPUs, GAS "
               "16-2048): hollow where the model says GPT-2 XL does not fit 4 IPUs' SRAM.", draw_gas),
    FigureSpec("sparsity", "Weight sparsity: throughput against sparsity", ("sparsity",),
               "arXiv:2310.04607 Fig. 7's axes: tokens/s relative to dense at weight sparsity 0 / 0.6 / 0.8 / "
               "0.9 for GPT-2 XL, GPT-3 6.7B and 30B at batch 112. CS-2/CS-3 skip zero weights (fitted "
               "efficiency: 84% of the zeros' work saved), so their gain grows with sparsity and with model "
               "size (dense-layer FLOPs grow faster than attention). The A100 line is not unstructured "
               "sparsity: the model gives it its 2:4 structured-sparse peak once sparsity reaches 0.5, "
               "hence a step then a plateau; unstructured masks give GPUs no speed-up (docs/measure.md). "
               "Stars: the published CS-2 speed-ups at 0.9 (the GPT-2 XL value is a range). Hollow: does "
               "not fit. Right: measured on this CPU (dense kernels: no speed-up expected).", draw_sparsity),
    FigureSpec("sparse_loss", "Sparse against dense training loss (measured)", ("sparse-loss",),
               "arXiv:2310.04607 Fig. 8, measured on this machine: the same small GPT (same initial "
               "weights, same data order) pre-trained on the shipped corpus at weight sparsity 0 / 0.6 / 0.8 "
               "/ 0.9 (static unstructured magnitude masks on every dense-layer weight, re-applied after each "
               "step), then the 0.9 model fine-tuned dense. The seed trains GPT-3 XL-size models on 3B "
               "tokens and finds the 0.9 model ~15% higher, recovered by dense fine-tuning; this run is "
               "far shorter and smaller, so the size of the gap is not comparable, its sign and order are "
               "(the fidelity table, row 002-34, computes the gap).", draw_sparse_loss),
    FigureSpec("genslm", "GenSLM", ("genslm",),
               "GenSLM (a GPT over codons, vocabulary 71, sequence 1024): predicted tokens/s on one "
               "device against model size, and what this machine measured. The published comparisons "
               "(Table IV of arXiv:2310.04607) are ratios between systems: see the table below.",
               draw_genslm),
    FigureSpec("runs", "Your runs: every measured workload against its prediction", (),
               "Every measured row of the database (any model, any suite, the built-in studies and your own "
               "llmbench measure runs), at x, against llmbench's prediction of the same workload on the same "
               "hardware, at y; one panel per metric, one marker per suite, both axes log. Points on the "
               "diagonal are predicted exactly; the table 'Every measured run' lists each one. llmbench "
               "report predicts, in memory, the runs the database has no prediction for.", draw_runs),
    FigureSpec("parity", "Predicted against published", ("validation",),
               "Every numeric row of published.csv: x the published value, y llmbench's prediction for "
               "the same configuration, both axes log. Points inside the grey band are within 25%.",
               draw_parity),
    FigureSpec("time_to_train", "Time to train one epoch", ("time-to-train",),
               "Predicted time for one epoch on one device (bars), against the published CS-2 "
               "projections (stars): the Pile for GPT-3 20B (hours), SST-2 for BERT-large (seconds).",
               draw_time_to_train),
    FigureSpec("llm_inference", "LLM inference: tokens/s per user and devices needed",
               ("llm-inference",),
               "Predicted decode tokens/s per sequence at batch 1 for Llama-3.1 models; the number on a "
               "bar is how many devices (wafers for CS-2/CS-3 in SRAM-pipeline mode) hold the model. "
               "Stars: Cerebras' published 1,800 tokens/s for Llama-3.1-8B on one CS-3.",
               draw_llm_inference),
    FigureSpec("economics", "Energy and cost: speed against devices and price", ("llm-inference", "dp-scaling"),
               "Left and middle (seed 004): predicted decode tokens/s per user at batch 1, and cost per million "
               "generated tokens (catalog price per device-hour x devices / tokens/s), against the devices that "
               "hold the model (wafers for CS-2/CS-3 in SRAM-pipeline mode). More wafers hold larger "
               "models and longer contexts at a higher cost per token; the model has no pipelining across "
               "wafers, so extra wafers add no throughput. Right (seed 001): GPT-2 XL training cost per "
               "million tokens against tokens/s on one device. Prices: cloud on-demand list prices, or for "
               "CS-2 a $2.5M purchase amortised over 5 years (seed 001); CS-3 has no published price and is "
               "left out of the cost panel. The table 'Energy and cost per token' gives J/token with each "
               "number's source.",
               draw_economics),
    FigureSpec("serving", "Serving: latency against request rate", ("serving",),
               "llmbench serve's simulator (continuous batching with each hardware's default engine, paged "
               "KV, the per-step cost model of predict infer) fed Poisson arrivals of Llama-3.1-8B requests "
               "(prompts lognormal mean 1,000 tokens, outputs mean 250) at 1-32 requests/s. Left and middle: "
               "TTFT and TPOT, p50 solid and p99 dashed, with the SLOs dotted; right: output tokens/s, which "
               "stops growing where a replica saturates and the queue (TTFT) explodes. The capacity plan "
               "for Llama-3.1-70B over the catalog is the table 'Capacity plan for serving'.",
               draw_serving),
    FigureSpec("streaming", "Weight streaming on this machine", ("streaming",),
               "The same small GPT trained twice in one process with the same seed: with its weights "
               "resident, and streamed layer by layer from a host-side parameter store (the "
               "MemoryX/SwarmX idea, llmbench/streaming). Left: the two loss curves should lie on top "
               "of each other. Right: tokens/s of each; a ratio near 1 means the streaming is hidden "
               "behind compute.", draw_streaming),
)
