"""Shipped data: corpus + BPE (and the byte fallback), codon tokenizer, FASTA reader, generator."""
import pytest

from llmbench.data import CORPUS, GENOME
from llmbench.data.genome import CodonTokenizer, read_fasta
from llmbench.data.make_data import synthetic_genome
from llmbench.data.text import ByteTokenizer, load_tokenizer


def test_corpus_is_small_public_domain_text():
    text = CORPUS.read_text()
    assert 100_000 < len(text.encode()) < 400_000
    assert text.startswith("In the beginning God created the heaven and the earth.")


def test_bpe_round_trip_and_compression():
    tok = load_tokenizer("bpe")
    sample = CORPUS.read_text()[:5000]
    ids = tok.encode(sample)
    assert tok.decode(ids) == sample
    assert tok.vocab_size == 4096 and len(ids) < len(sample.encode()) / 3  # BPE merges really work


def test_byte_fallback(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_tokenizers(name, *a, **k):
        if name == "tokenizers":
            raise ImportError("no tokenizers")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_tokenizers)
    tok = load_tokenizer("auto")
    assert isinstance(tok, ByteTokenizer)
    assert tok.decode(tok.encode("Let there be light")) == "Let there be light"
    with pytest.raises(ValueError, match="BPE tokenizer unavailable"):
        load_tokenizer("bpe")


def test_codon_tokenizer():
    tok = CodonTokenizer()
    assert tok.vocab_size == 69  # 64 codons + 5 specials, as GenSLM's NeoX models
    ids = tok.encode("ATG aaa\nTGA N")
    assert ids[0] == tok.bos and ids[-1] == tok.eos and len(ids) == 5  # the partial 'N' is dropped
    assert tok.decode(ids) == "ATGAAATGA"
    assert tok.encode("ANG", special=False) == [tok.unk]
    assert tok.encode("AUG", special=False) == tok.encode("ATG", special=False)  # RNA


def test_fasta_reader(tmp_path):
    p = tmp_path / "x.fasta"
    p.write_text(">a first\nACGT\nAC\n\n;comment\n>b\nTTT\n")
    assert read_fasta(p) == [("a first", "ACGTAC"), ("b", "TTT")]
    p.write_text("ACGT\n>a\nA\n")
    with pytest.raises(ValueError, match="before the first"):
        read_fasta(p)


def test_shipped_genome_is_what_the_generator_makes():
    records = read_fasta(GENOME)
    assert records == synthetic_genome()
    for _, seq in records:
        assert seq.startswith("ATG") and seq[-3:] in ("TAA", "TAG", "TGA") and len(seq) % 3 == 0
