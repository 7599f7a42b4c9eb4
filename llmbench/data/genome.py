"""Genomes for GenSLM: a FASTA reader and a codon tokenizer (64 codons + special tokens).

    from llmbench.data.genome import CodonTokenizer, read_fasta
    tok = CodonTokenizer()                      # vocab 69, as the GenSLM NeoX models
    records = read_fasta(GENOME)                # [(header, sequence), ...]
    ids = tok.encode(records[0][1])             # [BOS] codon codon ... [EOS]

GenSLM (Zvyagin et al. 2022, bioRxiv 10.1101/2022.10.10.511571) tokenizes a gene as its
3-nucleotide codons; its NeoX models have 69 tokens = 64 codons + 5 specials.
"""
from __future__ import annotations

from itertools import product
from pathlib import Path

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CODONS = tuple("".join(c) for c in product("ACGT", repeat=3))  # 64, in lexicographic order


class CodonTokenizer:
    """Codons (A, C, G, T triplets) -> ids 5..68; specials 0..4. A codon containing anything else
    (N, IUPAC ambiguity codes) is [UNK]; a trailing partial codon is dropped."""

    name = "codon"

    def __init__(self):
        self.vocab = {t: i for i, t in enumerate(SPECIALS + CODONS)}
        self.inverse = {i: t for t, i in self.vocab.items()}
        self.pad, self.unk, self.bos, self.eos, self.mask = (self.vocab[s] for s in SPECIALS)
        self.eot = self.eos

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, sequence: str, *, special: bool = True) -> list[int]:
        seq = "".join(sequence.split()).upper().replace("U", "T")
        ids = [self.vocab.get(seq[i:i + 3], self.unk) for i in range(0, len(seq) - len(seq) % 3, 3)]
        return [self.bos, *ids, self.eos] if special else ids

    def decode(self, ids: list[int]) -> str:
        return "".join(self.inverse[i] for i in ids if i >= len(SPECIALS))


def read_fasta(path: str | Path) -> list[tuple[str, str]]:
    """(header, sequence) pairs; headers without '>', sequence lines joined, blank lines skipped."""
    records, header, chunks = [], None, []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(";"):
            continue
        if line.startswith(">"):
            if header is not None:
                records.append((header, "".join(chunks)))
            header, chunks = line[1:].strip(), []
        elif header is None:
            raise ValueError(f"{path}:{lineno}: sequence before the first '>' header")
        else:
            chunks.append(line)
    if header is not None:
        records.append((header, "".join(chunks)))
    return records


def genome_tokens(path: str | Path | None = None, tokenizer: CodonTokenizer | None = None) -> list[int]:
    """All records of a FASTA file, codon-tokenized and concatenated ([CLS] ... [SEP] each)."""
    from llmbench.data import GENOME
    tok = tokenizer or CodonTokenizer()
    out: list[int] = []
    for _, seq in read_fasta(path or GENOME):
        out += tok.encode(seq)
    return out
