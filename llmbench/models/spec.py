"""ModelSpec: the shape of a transformer language model, as pure data (no torch).

    from llmbench.models import get_model
    spec = get_model("gpt2-xl")

Dense GPT/BERT/Llama-style models, and on top of them: mixture-of-experts layers (routed top-k
experts, shared experts, dense first layers: Mixtral, Qwen3-MoE, DeepSeek-V3), multi-head latent
attention (DeepSeek-V2/V3), grouped-query attention with a head width other than d_model / n_heads
(Gemma, Qwen3), q/k norms, sliding-window layers and attention-logit soft-capping (Gemma 2/3).
`docs/models.md` says how each is counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

FAMILIES = ("gpt", "bert", "llama", "gptj", "neox", "qwen", "mistral", "gemma", "phi3", "deepseek",
            "falcon")
ACTIVATIONS = ("gelu", "swiglu", "geglu")
NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rotary")
#: the supported ceilings of a model's shape (issue 23: a config.json with 10^9 layers hung
#: `models show`, whose counting loops over the layers): 2^16 layers is 500x the deepest published
#: LLM (Llama 3.1 405B: 126); 2^40 for every width, count and position table, which only enter
#: arithmetic (the measure tests make an allocator fail with a 2^40-token vocabulary)
MAX_LAYERS = 1 << 16
MAX_SHAPE = 1 << 40
SHAPE_FIELDS = ("n_layers", "d_model", "n_heads", "vocab_size", "max_seq_len", "n_kv_heads", "head_dim", "d_ff",
                "n_token_types", "sliding_window", "global_attn_every", "q_lora_rank", "kv_lora_rank",
                "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "n_experts", "n_experts_active",
                "n_shared_experts", "d_ff_expert", "first_dense_layers", "moe_every")
HEADS = ("lm", "mlm", "cls", "none")
ROUTER_SCORES = ("softmax", "sigmoid")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    name: str
    family: str
    """gpt | bert | llama | gptj | neox | qwen | mistral | gemma | phi3 | deepseek | falcon (a label;
    only bert (post-LN) and gptj (one shared norm) change the layer)"""
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int = 0
    """key/value heads (grouped-query attention); 0 means n_heads"""
    head_dim: int = 0
    """width of one query/key/value head; 0 means d_model // n_heads (Gemma, Qwen3: wider)"""
    d_ff: int = 0
    """hidden width of the (dense) MLP; 0 means 4 * d_model"""
    vocab_size: int
    max_seq_len: int
    """positions the model supports (learned-position table size for learned)"""
    activation: str = "gelu"
    """gelu (up, GELU, down) | swiglu (SiLU-gated) | geglu (GELU-gated, Gemma)"""
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
    """Q/K/V projections carry biases; None means the same as biases"""
    attn_out_bias: bool | None = None
    """the attention-output projection carries a bias; None means the same as attn_biases
    (Qwen2: biases on Q/K/V only)"""
    lm_head_bias: bool = False
    parallel_residual: bool = False
    """attention and MLP read the same input (GPT-J, NeoX, Falcon)"""
    single_norm: bool | None = None
    """one norm feeds both branches of a parallel layer (GPT-J, Falcon-7B); None: True for gptj"""
    post_norms: bool = False
    """a norm after the attention and after the MLP output as well (Gemma 2/3: four per layer)"""
    qk_norm: bool = False
    """RMSNorm over each query and key head before the dot product (Qwen3, Gemma 3)"""
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
    # ---- attention variants
    sliding_window: int = 0
    """tokens a windowed layer attends to (itself included); 0: every layer sees the whole context"""
    global_attn_every: int = 0
    """with a window: every n-th layer (layer i with (i + 1) % n == 0) attends to the whole context
    (Gemma 2: 2, Gemma 3: 6); 0: every layer uses the window (Mistral 7B v0.1)"""
    attn_logit_softcap: float = 0.0
    """cap * tanh(score / cap) on the attention logits (Gemma 2: 50); 0: none"""
    final_logit_softcap: float = 0.0
    """the same on the LM-head logits (Gemma 2: 30); 0: none"""
    # ---- multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank 0 means ordinary attention
    q_lora_rank: int = 0
    """rank of the query down-projection; 0 means a full-rank query projection"""
    kv_lora_rank: int = 0
    """width of the compressed key/value latent (what the KV cache holds, with the rope key)"""
    qk_nope_head_dim: int = 0
    """per-head query/key dimensions without rotary embedding"""
    qk_rope_head_dim: int = 0
    """per-head query/key dimensions with rotary embedding (the key part is shared by all heads)"""
    v_head_dim: int = 0
    """per-head value width"""
    # ---- mixture of experts; n_experts 0 means a dense model
    n_experts: int = 0
    """routed experts per MoE layer"""
    n_experts_active: int = 0
    """experts each token is routed to (top-k)"""
    n_shared_experts: int = 0
    """experts every token goes through as well (DeepSeek: 1), each d_ff_expert wide"""
    d_ff_expert: int = 0
    """hidden width of one expert's MLP; 0 means d_ff"""
    first_dense_layers: int = 0
    """the first layers keep a dense MLP of width d_ff (DeepSeek-V3: 3)"""
    moe_every: int = 1
    """after those, layer i is an MoE layer when (i + 1) % moe_every == 0 (1: every layer)"""
    router_score: str = "softmax"
    """softmax (Mixtral, Qwen3-MoE) | sigmoid (DeepSeek-V3) over the router logits"""
    router_norm_topk: bool = True
    """the top-k gate weights are renormalised to sum to one"""
    router_bias: bool = False
    """a per-expert bias used only to choose experts (DeepSeek-V3 e_score_correction_bias)"""
    capacity_factor: float | None = None
    """expert capacity = ceil(capacity_factor * tokens * top_k / n_experts) slots, padded and
    computed in full, overflow dropped (GShard/Switch); None: dropless"""
    source: str = ""
    """where the shape comes from (paper table, config file)"""
    notes: str = ""

    # derived, filled in __post_init__
    d_head: int = field(init=False)
    """query/key width of one head (MLA: qk_nope_head_dim + qk_rope_head_dim)"""
    d_head_v: int = field(init=False)
    """value width of one head (MLA: v_head_dim; else d_head)"""

    def __post_init__(self) -> None:
        self._check_sizes()
        if self.head_dim == 0 and not self.is_mla and self.d_model % self.n_heads:
            raise self._bad("d_model", f"({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.n_kv_heads == 0 or self.is_mla:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.n_heads % self.n_kv_heads:
            raise self._bad("n_kv_heads", f"({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        if self.d_ff == 0:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        self._check_choices()
        if self.attn_biases is None:
            object.__setattr__(self, "attn_biases", self.biases)
        if self.attn_out_bias is None:
            object.__setattr__(self, "attn_out_bias", self.attn_biases)
        if self.single_norm is None:
            object.__setattr__(self, "single_norm", self.family == "gptj")
        if self.single_norm and not self.parallel_residual:
            raise self._bad("single_norm", "needs parallel_residual=True (one norm feeds both branches)")
        self._check_attention()
        self._check_moe()
        if self.is_mla:
            d_head, d_head_v = self.qk_nope_head_dim + self.qk_rope_head_dim, self.v_head_dim
        else:
            d_head = self.head_dim or self.d_model // self.n_heads
            d_head_v = d_head
        object.__setattr__(self, "d_head", d_head)
        object.__setattr__(self, "d_head_v", d_head_v)

    def _bad(self, name: str, why: str) -> ValueError:
        return ValueError(f"model {self.name!r}: {name} {why}")

    def _check_sizes(self) -> None:
        if self.family not in FAMILIES:
            raise self._bad("family", f"must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        for name in ("n_layers", "d_model", "n_heads", "vocab_size", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise self._bad(name, f"must be a positive integer, got {value!r}")
        for name in ("n_kv_heads", "head_dim", "d_ff", "n_token_types", "sliding_window",
                     "global_attn_every", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                     "qk_rope_head_dim", "v_head_dim", "n_experts", "n_experts_active",
                     "n_shared_experts", "d_ff_expert", "first_dense_layers", "moe_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise self._bad(name, f"must be a non-negative integer, got {value!r}")
        for name in SHAPE_FIELDS:  # bounded: per-layer loops (counting, models show) end quickly
            top = MAX_LAYERS if name in ("n_layers", "first_dense_layers") else MAX_SHAPE
            if getattr(self, name) > top:
                raise self._bad(name, f"{getattr(self, name):,} exceeds the supported 2^{top.bit_length() - 1}")
        for name in ("attn_logit_softcap", "final_logit_softcap"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise self._bad(name, f"must be a non-negative number, got {value!r}")

    def _check_choices(self) -> None:
        for name, choices in (("activation", ACTIVATIONS), ("norm", NORMS), ("position", POSITIONS),
                              ("head", HEADS), ("router_score", ROUTER_SCORES)):
            if getattr(self, name) not in choices:
                raise self._bad(name, f"must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        if not 0.0 < self.rotary_pct <= 1.0:
            raise self._bad("rotary_pct", f"must be in (0, 1], got {self.rotary_pct!r}")
        if self.head == "cls" and self.n_classes <= 0:
            raise self._bad("n_classes", f"must be positive, got {self.n_classes!r}")
        if self.head == "lm" and not self.causal:
            raise self._bad("head", "'lm' needs causal=True (use 'mlm' or 'cls' for encoders)")

    def _check_attention(self) -> None:
        if self.global_attn_every and not self.sliding_window:
            raise self._bad("global_attn_every", "needs a sliding_window")
        if self.is_mla:
            if self.qk_rope_head_dim == 0 or self.qk_rope_head_dim % 2:
                raise self._bad("qk_rope_head_dim", f"must be a positive even number with MLA, "
                                f"got {self.qk_rope_head_dim}")
            if self.v_head_dim == 0:
                raise self._bad("v_head_dim", "must be positive with MLA (kv_lora_rank > 0)")
            if self.position != "rotary":
                raise self._bad("position", "must be 'rotary' with MLA")
        elif self.q_lora_rank or self.qk_nope_head_dim or self.qk_rope_head_dim or self.v_head_dim:
            raise self._bad("kv_lora_rank", "must be positive when MLA fields (q_lora_rank, "
                            "qk_*_head_dim, v_head_dim) are set")

    def _check_moe(self) -> None:
        if not self.n_experts:
            for name in ("n_experts_active", "n_shared_experts", "d_ff_expert", "first_dense_layers"):
                if getattr(self, name):
                    raise self._bad(name, "needs n_experts > 0")
            if self.capacity_factor is not None:
                raise self._bad("capacity_factor", "needs n_experts > 0")
            return
        if not 1 <= self.n_experts_active <= self.n_experts:
            raise self._bad("n_experts_active", f"must be in 1..n_experts ({self.n_experts}), "
                            f"got {self.n_experts_active}")
        if self.moe_every < 1:
            raise self._bad("moe_every", f"must be at least 1, got {self.moe_every}")
        if self.first_dense_layers >= self.n_layers:
            raise self._bad("first_dense_layers", f"({self.first_dense_layers}) leaves no MoE layer "
                            f"of {self.n_layers}")
        if self.capacity_factor is not None and not self.capacity_factor > 0:
            raise self._bad("capacity_factor", f"must be positive or None (dropless), got {self.capacity_factor!r}")
        if self.d_ff_expert == 0:
            object.__setattr__(self, "d_ff_expert", self.d_ff)
        if self.n_moe_layers == 0:
            raise self._bad("moe_every", f"({self.moe_every}) leaves no MoE layer of {self.n_layers}")

    # ---- derived shapes

    @property
    def kv_dim(self) -> int:
        """width of K (and of V): n_kv_heads * d_head"""
        return self.n_kv_heads * self.d_head

    @property
    def q_dim(self) -> int:
        """width of all query heads: n_heads * d_head (d_model unless head_dim says otherwise)"""
        return self.n_heads * self.d_head

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    def is_moe_layer(self, i: int) -> bool:
        """Layer i (from 0) has routed experts."""
        return self.is_moe and i >= self.first_dense_layers and (i + 1) % self.moe_every == 0

    @property
    def n_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.n_layers))

    def window(self, i: int) -> int:
        """Keys a query of layer i attends to at most (itself included); 0: the whole context."""
        if not self.sliding_window:
            return 0
        if self.global_attn_every and (i + 1) % self.global_attn_every == 0:
            return 0
        return self.sliding_window

    @property
    def norms_per_layer(self) -> int:
        return (1 if self.single_norm else 2) + (2 if self.post_norms else 0)

    def with_(self, **changes) -> "ModelSpec":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


INIT_FIELDS = tuple(f.name for f in fields(ModelSpec) if f.init)


def resize(spec: ModelSpec, **changes) -> ModelSpec:
    """A copy of `spec` with new sizes that keeps its proportions: the GQA group size, the
    d_ff / d_model and expert-width / d_model ratios, an explicit head width relative to
    d_model / n_heads, and MLA ranks and head widths follow n_heads and d_model unless given
    (tiny test models, --quick). Expert counts and top-k are kept."""
    n_heads = changes.get("n_heads", spec.n_heads)
    group = spec.n_heads // spec.n_kv_heads
    if not spec.is_mla:
        changes.setdefault("n_kv_heads", max(1, n_heads // group) if n_heads % group == 0 else n_heads)
    d_model = changes.get("d_model", spec.d_model)
    scale = d_model / spec.d_model
    head_scale = (d_model / n_heads) / (spec.d_model / spec.n_heads)
    changes.setdefault("d_ff", max(1, round(spec.d_ff * scale)))
    if spec.is_moe:
        changes.setdefault("d_ff_expert", max(1, round(spec.d_ff_expert * scale)))
    if spec.head_dim:
        changes.setdefault("head_dim", max(1, round(spec.head_dim * head_scale)))
    if spec.is_mla:
        for name in ("q_lora_rank", "kv_lora_rank"):
            changes.setdefault(name, max(1, round(getattr(spec, name) * scale)) if getattr(spec, name) else 0)
        for name in ("qk_nope_head_dim", "v_head_dim"):
            changes.setdefault(name, max(1, round(getattr(spec, name) * head_scale)))
        changes.setdefault("qk_rope_head_dim", max(2, round(spec.qk_rope_head_dim * head_scale / 2) * 2))
    if spec.sliding_window and "max_seq_len" in changes:
        changes.setdefault("sliding_window", min(spec.sliding_window, changes["max_seq_len"]))
    return spec.with_(**changes)
