"""Text: the shipped corpus and its tokenizer (BPE trained here, or bytes as a fallback).

    from llmbench.data.text import load_tokenizer, corpus_tokens
    tok = load_tokenizer()            # BPE from bpe_kjv.json, or ByteTokenizer without `tokenizers`
    ids = corpus_tokens(tok)          # list[int] of the whole corpus
"""
from __future__ import annotations

from pathlib import Path

from llmbench.data import BPE, CORPUS


class ByteTokenizer:
    """UTF-8 bytes as tokens (256) plus an end-of-text token: works with no dependency."""

    name = "bytes"
    eot = 256

    @property
    def vocab_size(self) -> int:
        return 257

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


class BPETokenizer:
    """A `tokenizers` byte-level BPE loaded from JSON."""

    def __init__(self, path: Path = BPE):
        from tokenizers import Tokenizer
        self._tok = Tokenizer.from_file(str(path))
        self.name = f"bpe:{Path(path).name}"
        self.eot = self._tok.token_to_id("<|endoftext|>")

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids)


def load_tokenizer(kind: str = "auto"):
    """'bpe', 'bytes' or 'auto' (BPE when `tokenizers` is installed and the file is there)."""
    if kind not in ("auto", "bpe", "bytes"):
        raise ValueError(f"tokenizer must be auto, bpe or bytes, got {kind!r}")
    if kind == "bytes":
        return ByteTokenizer()
    try:
        return BPETokenizer()
    except (ImportError, OSError, Exception) as exc:  # tokenizers missing or file unreadable
        if kind == "bpe":
            raise ValueError(f"BPE tokenizer unavailable: {exc}") from None
        import warnings

        warnings.warn(f"corpus tokenized as bytes, not BPE ({type(exc).__name__}: {exc}); "
                      "`pip install 'llmbench[torch]'` brings the tokenizers package", stacklevel=2)
        return ByteTokenizer()


def corpus_text(path: Path = CORPUS) -> str:
    return Path(path).read_text(encoding="utf-8")


def corpus_tokens(tokenizer=None, path: Path = CORPUS) -> list[int]:
    tok = tokenizer or load_tokenizer()
    return tok.encode(corpus_text(path))


def train_bpe(text_path: Path, vocab_size: int = 4096):
    """Train a byte-level BPE on a text file (what make_data.py does for bpe_kjv.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train([str(text_path)], trainer)
    return tok
