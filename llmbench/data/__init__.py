"""Small data shipped with llmbench (nothing is downloaded at run time). No torch.

- kjv_genesis_exodus.txt: King James Version, Genesis 1:1 to Exodus 20:26 (public domain text;
  dumped from Debian's bible-kjv-text 4.38, see make_data.py), about 270 KB.
- bpe_kjv.json: a byte-level BPE tokenizer (vocab 4096) trained on that text by make_data.py with
  the `tokenizers` package; `text.load_tokenizer()` falls back to plain bytes without it.
- genome_sample.fasta: 64 synthetic protein-coding sequences, generated deterministically by
  make_data.py (a fixed-seed linear congruential generator; not a real organism).
"""
from pathlib import Path

DATA_DIR = Path(__file__).parent
CORPUS = DATA_DIR / "kjv_genesis_exodus.txt"
BPE = DATA_DIR / "bpe_kjv.json"
GENOME = DATA_DIR / "genome_sample.fasta"
