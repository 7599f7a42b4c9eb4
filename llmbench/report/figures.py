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
               "One GPT-2 XL layer (d_model 1600, seq 1024), forward + backward. Left panels: predicted "
               "TFLOP/s per accelerator for each precision as the batch grows; the curve flattens where "
               "the layer becomes compute-bound. Right: what this CPU measured (green), with the "
               "prediction for this CPU as a grey line when present.", draw_block),
    FigureSpec("bert_throughput", "BERT training throughput against batch (CS-2)", ("bert-train-batch",),
               "Left: predicted samples/s of BERT-base (solid) and BERT-large (dashed) on one CS-2, with "
               "the published points (stars: arXiv:2409.00287 peak values and ALCF run logs). Right: "
               "BERT training measured on this machine against its global batch.", draw_bert_throughput),
    FigureSpec("bert_latency", "BERT inference latency against batch", ("bert-infer-batch",),
               "Predicted latency of one classification batch (sequence 128) per accelerator, log-log: a "
               "flat start means the batch is latency- or memory-bound (the weights are read once per "
               "batch), a slope of 1 means compute-bound. The paper reports CS-2 latency nearly flat in "
               "batch. Right: p50 latency measured here.", draw_bert_latency),
    FigureSpec("scaling", "GPT-2 XL scaling over devices", ("dp-scaling",),
               "Left: predicted GPT-2 XL training tokens/s against device count (16 sequences per "
               "device). Right: scaling efficiency T(n)/(n·T(1)); 1.0 is perfect. Stars are the published "
               "efficiencies of arXiv:2310.04607 Table II at their device counts; green is the "
               "2-process data-parallel run measured here.", draw_scaling),
    FigureSpec("seq_length", "Sequence length", ("gpt2-seq-length",),
               "Tokens/s against sequence length at a constant 16k tokens per batch: the attention "
               "square grows with T, so throughput falls as T grows; how fast depends on how much of "
               "the step is attention.", draw_seq_length),
    FigureSpec("gas", "Gradient accumulation (GAS)", ("gas",),
               "Throughput at GAS g relative to GAS 1, same micro-batch: accumulation spreads one "
               "gradient all-reduce over g micro-batches, so the gain is large where communication "
               "was exposed (many devices, small micro-batch) and about 1 on one device.", draw_gas),
    FigureSpec("sparsity", "Weight sparsity speed-up against model size", ("sparsity",),
               "Speed-up of 90% unstructured weight sparsity over dense, against model size. Only "
               "hardware that skips zero weights (CS-2, CS-3) gains; its gain grows with size because "
               "dense-layer FLOPs grow faster than attention and element-wise work. Stars: "
               "arXiv:2310.04607 Fig. 7 (the GPT-2 XL value is a range).", draw_sparsity),
    FigureSpec("genslm", "GenSLM", ("genslm",),
               "GenSLM (a GPT over codons, vocabulary 71, sequence 1024): predicted tokens/s on one "
               "device against model size, and what this machine measured. The published comparisons "
               "(Table IV of arXiv:2310.04607) are ratios between systems: see the table below.",
               draw_genslm),
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
    FigureSpec("streaming", "Weight streaming on this machine", ("streaming",),
               "The same small GPT trained twice in one process with the same seed: with its weights "
               "resident, and streamed layer by layer from a host-side parameter store (the "
               "MemoryX/SwarmX idea, llmbench/streaming). Left: the two loss curves should lie on top "
               "of each other. Right: tokens/s of each; a ratio near 1 means the streaming is hidden "
               "behind compute.", draw_streaming),
)
