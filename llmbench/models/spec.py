"""ModelSpec: the shape of a transformer language model, as pure data (no torch).

    from llmbench.models import get_model
    spec = get_model("gpt2-xl")
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

FAMILIES = ("gpt", "bert", "llama", "gptj", "neox")
ACTIVATIONS = ("gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rotary")
HEADS = ("lm", "mlm", "cls", "none")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    name: str
    family: str
    """gpt | bert | llama | gptj | neox"""
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int = 0
    """key/value heads (grouped-query attention); 0 means n_heads"""
    d_ff: int = 0
    """hidden width of the MLP; 0 means 4 * d_model"""
    vocab_size: int
    max_seq_len: int
    """positions the model supports (learned-position table size for learned)"""
    activation: str = "gelu"
    norm: str = "layernorm"
    position: str = "learned"
    rotary_pct: float = 1.0
    """fraction of each head's dimensions that rotary embeddings rotate (GPT-J/NeoX: partial)"""
    tied_embeddings: bool = True
    """LM head shares the token-embedding matrix"""
    causal: bool = True
    biases: bool = True
    """MLP linear layers carry biases (and attention ones, unless attn_biases says otherwise)"""
    attn_biases: bool | None = None
    """QKV and attention-output projections carry biases; None means the same as biases"""
    lm_head_bias: bool = False
    parallel_residual: bool = False
    """attention and MLP read the same input (GPT-J, NeoX): one norm (gptj) or two (neox)"""
    n_token_types: int = 0
    """segment embeddings (BERT: 2)"""
    embedding_norm: bool = False
    """a norm right after the embeddings (BERT)"""
    final_norm: bool = True
    """a norm after the last layer (pre-LN models)"""
    head: str = "lm"
    """lm (causal LM head) | mlm (BERT masked-LM head) | cls (BERT pooler + classifier) | none"""
    n_classes: int = 2
    """classifier outputs when head == 'cls'"""
    source: str = ""
    """where the shape comes from (paper table, config file)"""
    notes: str = ""

    # derived, filled in __post_init__
    d_head: int = field(init=False)

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"model {self.name!r}: {name} {why}")

        if self.family not in FAMILIES:
            raise bad("family", f"must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        for name in ("n_layers", "d_model", "n_heads", "vocab_size", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise bad(name, f"must be a positive integer, got {value!r}")
        for name in ("n_kv_heads", "d_ff", "n_token_types"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise bad(name, f"must be a non-negative integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise bad("d_model", f"({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.n_kv_heads == 0:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.n_heads % self.n_kv_heads:
            raise bad("n_kv_heads", f"({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        if self.d_ff == 0:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        if self.activation not in ACTIVATIONS:
            raise bad("activation", f"must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if self.norm not in NORMS:
            raise bad("norm", f"must be one of {', '.join(NORMS)}, got {self.norm!r}")
        if self.position not in POSITIONS:
            raise bad("position", f"must be one of {', '.join(POSITIONS)}, got {self.position!r}")
        if not 0.0 < self.rotary_pct <= 1.0:
            raise bad("rotary_pct", f"must be in (0, 1], got {self.rotary_pct!r}")
        if self.head not in HEADS:
            raise bad("head", f"must be one of {', '.join(HEADS)}, got {self.head!r}")
        if self.head == "cls" and self.n_classes <= 0:
            raise bad("n_classes", f"must be positive, got {self.n_classes!r}")
        if self.head == "lm" and not self.causal:
            raise bad("head", "'lm' needs causal=True (use 'mlm' or 'cls' for encoders)")
        if self.attn_biases is None:
            object.__setattr__(self, "attn_biases", self.biases)
        object.__setattr__(self, "d_head", self.d_model // self.n_heads)

    @property
    def kv_dim(self) -> int:
        """width of K (and of V): n_kv_heads * d_head"""
        return self.n_kv_heads * self.d_head

    def with_(self, **changes) -> "ModelSpec":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


INIT_FIELDS = tuple(f.name for f in fields(ModelSpec) if f.init)


def resize(spec: ModelSpec, **changes) -> ModelSpec:
    """A copy of `spec` with new sizes that keeps its proportions: the GQA group size and the
    d_ff / d_model ratio follow n_heads and d_model unless given (tiny test models, --quick)."""
    n_heads = changes.get("n_heads", spec.n_heads)
    group = spec.n_heads // spec.n_kv_heads
    changes.setdefault("n_kv_heads", max(1, n_heads // group) if n_heads % group == 0 else n_heads)
    d_model = changes.get("d_model", spec.d_model)
    changes.setdefault("d_ff", max(1, round(spec.d_ff * d_model / spec.d_model)))
    return spec.with_(**changes)
