"""GenSLM: a GPT over codons (Zvyagin et al. 2022), trained on the shipped genome sample.

    llmbench measure genslm --model genslm-25m --batch 2 --seq 512 --steps 5

The train suite with data = codon-tokenized llmbench/data/genome_sample.fasta (synthetic genes,
see llmbench/data/make_data.py); the model's vocabulary must hold the 69 codon-tokenizer ids.
"""
from __future__ import annotations

from dataclasses import replace

from llmbench.measure.train import run_train


def run_genslm(w, run, device) -> tuple[dict, dict]:
    """run_train on the genome sample: (metrics, info), info naming the tokenizer and the data."""
    from llmbench.data import GENOME
    from llmbench.data.genome import CodonTokenizer, read_fasta

    metrics, info = run_train(w, replace(run, data="genome"), device)
    records = read_fasta(GENOME)
    info.update({"tokenizer": "codon", "tokenizer_vocab": CodonTokenizer().vocab_size,
                 "genome_sequences": len(records),
                 "genome_nucleotides": sum(len(s) for _, s in records)})
    return metrics, info
