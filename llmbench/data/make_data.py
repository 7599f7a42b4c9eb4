"""Rebuild the shipped data files (run once by a maintainer; nothing here runs at install or run time).

    python -m llmbench.data.make_data            # writes bpe_kjv.json and genome_sample.fasta

The corpus itself was dumped from Debian's `bible-kjv-text` package (4.38; the King James Version
is in the public domain) with:

    apt-get install bible-kjv
    bible -f "Gen1:1-Ex20:26" | sed -E 's/^[A-Za-z]+[0-9]+:[0-9]+ //' > kjv_genesis_exodus.txt
"""
from __future__ import annotations

from llmbench.data import BPE, CORPUS, GENOME

STOPS = ("TAA", "TAG", "TGA")


class LCG:
    """Numerical Recipes' 32-bit linear congruential generator: the same numbers on any Python."""

    def __init__(self, seed: int):
        self.state = seed & 0xFFFFFFFF

    def next(self, n: int) -> int:
        self.state = (1664525 * self.state + 1013904223) & 0xFFFFFFFF
        return (self.state >> 8) % n


def synthetic_genome(n_genes: int = 64, seed: int = 2022) -> list[tuple[str, str]]:
    """Open reading frames: ATG, 300..900 random sense codons (no in-frame stop), a stop codon."""
    from itertools import product
    sense = ["".join(c) for c in product("ACGT", repeat=3) if "".join(c) not in STOPS]
    rng = LCG(seed)
    genes = []
    for i in range(n_genes):
        n = 300 + rng.next(601)
        body = "".join(sense[rng.next(len(sense))] for _ in range(n))
        genes.append((f"synthetic_gene_{i:03d} length={3 * (n + 2)} seed={seed} (llmbench make_data.py)",
                      "ATG" + body + STOPS[rng.next(3)]))
    return genes


def write_fasta(records, path, width: int = 60) -> None:
    with open(path, "w") as f:
        for header, seq in records:
            f.write(f">{header}\n")
            for i in range(0, len(seq), width):
                f.write(seq[i:i + width] + "\n")


def main() -> None:
    from llmbench.data.text import train_bpe
    train_bpe(CORPUS, 4096).save(str(BPE))
    write_fasta(synthetic_genome(), GENOME)
    print(f"wrote {BPE} and {GENOME}")


if __name__ == "__main__":
    main()
