"""Torch transformer modules built from a ModelSpec: GPT-2/3, Llama, GPT-J, NeoX, BERT.

    from llmbench.models import get_model
    from llmbench.measure.modeling import build_model
    model = build_model(get_model("gpt2-small"))          # materialised, initialised
    big = build_model(get_model("llama-2-70b"), meta=True)  # shapes only; to_empty + init_weights later

The model is `head(blocks(embed(idx)))`: `embed`, each entry of `blocks` and `head` are
self-contained (a block reads only its own parameters), so a streaming runtime can move one block's
weights to the device while it runs. Parameter counts equal `llmbench.models.counting.param_count`
exactly, and the matmul FLOPs FlopCounterMode sees equal `counting`'s `matmul_flops`
(tests/test_measure_modeling.py checks both).
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from llmbench.models.spec import ModelSpec

INIT_STD = 0.02  # GPT-2 / BERT initializer_range


# ---------------------------------------------------------------- pieces

class RMSNorm(nn.Module):
    """Zhang & Sennrich 2019 (arXiv:1910.07467), as Llama uses it."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def make_norm(spec: ModelSpec) -> nn.Module:
    if spec.norm == "rmsnorm":
        return RMSNorm(spec.d_model)
    return nn.LayerNorm(spec.d_model, eps=1e-12 if spec.family == "bert" else 1e-5)


def rotary_cos_sin(n_rot: int, positions: torch.Tensor, dtype: torch.dtype, base: float = 10000.0):
    """cos and sin (T, n_rot) for rotate-half rotary embeddings (Su et al. arXiv:2104.09864).
    Computed per call (cheap next to the matmuls), so a block holds no cached tensors."""
    inv_freq = 1.0 / base ** (torch.arange(0, n_rot, 2, device=positions.device, dtype=torch.float32) / n_rot)
    freqs = torch.outer(positions.float(), inv_freq)  # (T, n_rot/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, n_rot)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first cos.shape[-1] dims of each head of x (B, h, T, hd); the rest pass through."""
    n_rot = cos.shape[-1]
    xr, xp = x[..., :n_rot], x[..., n_rot:]
    x1, x2 = xr[..., : n_rot // 2], xr[..., n_rot // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    xr = xr * cos + rotated * sin
    return torch.cat((xr, xp), dim=-1) if xp.shape[-1] else xr


class KVCache:
    """Keys and values of one layer for generation: (B, n_kv_heads, max_len, d_head), filled in order."""

    def __init__(self, batch: int, max_len: int, n_kv_heads: int, d_head: int, *, device=None,
                 dtype=torch.float32):
        shape = (batch, n_kv_heads, max_len, d_head)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.pos = 0

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        T = k.shape[2]
        if self.pos + T > self.k.shape[2]:
            raise ValueError(f"KV cache holds {self.k.shape[2]} positions; {self.pos + T} needed")
        self.k[:, :, self.pos:self.pos + T] = k
        self.v[:, :, self.pos:self.pos + T] = v
        self.pos += T
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]


class Attention(nn.Module):
    """Multi-head / grouped-query attention through scaled_dot_product_attention."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        d, kvd = spec.d_model, spec.kv_dim
        self.n_heads, self.n_kv_heads, self.d_head = spec.n_heads, spec.n_kv_heads, spec.d_head
        self.causal = spec.causal
        self.n_rot = 0
        if spec.position == "rotary":
            self.n_rot = int(round(spec.rotary_pct * spec.d_head)) // 2 * 2
        self.qkv = nn.Linear(d, d + 2 * kvd, bias=spec.attn_biases)
        self.proj = nn.Linear(d, d, bias=spec.attn_biases)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        B, T, C = x.shape
        h, hk, hd = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split((h * hd, hk * hd, hk * hd), dim=-1)
        q = q.view(B, T, h, hd).transpose(1, 2)  # (B, h, T, hd)
        k = k.view(B, T, hk, hd).transpose(1, 2)  # (B, hk, T, hd)
        v = v.view(B, T, hk, hd).transpose(1, 2)  # (B, hk, T, hd)
        start = cache.pos if cache is not None else 0
        if self.n_rot:
            positions = torch.arange(start, start + T, device=x.device)
            cos, sin = rotary_cos_sin(self.n_rot, positions, q.dtype)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, hk, start + T, hd)
        mask, is_causal = None, self.causal
        if self.causal and start > 0:
            is_causal = False
            if T > 1:  # new queries see the whole cache and the causal part of themselves
                S = start + T
                mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=start)
        kwargs = {"enable_gqa": True} if hk != h else {}
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, **kwargs)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    """GELU (tanh form, as GPT-2 and BERT) or SwiGLU (Shazeer 2020, arXiv:2002.05202) with the gate
    and up projections fused into one matmul."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.swiglu = spec.activation == "swiglu"
        f = spec.d_ff
        self.fc = nn.Linear(spec.d_model, 2 * f if self.swiglu else f, bias=spec.biases)
        self.proj = nn.Linear(f, spec.d_model, bias=spec.biases)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self.fc(x)
        if self.swiglu:
            gate, up = u.chunk(2, dim=-1)
            return self.proj(F.silu(gate) * up)
        return self.proj(F.gelu(u, approximate="tanh"))


class Block(nn.Module):
    """One transformer layer: pre-LN (GPT, Llama), post-LN (BERT), parallel residual (GPT-J: one
    norm; NeoX: two)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.post_ln = spec.family == "bert"
        self.parallel = spec.parallel_residual
        self.ln_1 = make_norm(spec)
        self.attn = Attention(spec)
        self.ln_2 = None if spec.family == "gptj" else make_norm(spec)
        self.mlp = MLP(spec)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        if self.parallel:
            h = self.ln_1(x)
            return x + self.attn(h, cache) + self.mlp(h if self.ln_2 is None else self.ln_2(x))
        if self.post_ln:
            x = self.ln_1(x + self.attn(x, cache))
            return self.ln_2(x + self.mlp(x))
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class Embedding(nn.Module):
    """Token (+ learned position) (+ token-type) embeddings (+ a norm, BERT)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.wte = nn.Embedding(spec.vocab_size, spec.d_model)
        self.wpe = nn.Embedding(spec.max_seq_len, spec.d_model) if spec.position == "learned" else None
        self.wtt = nn.Embedding(spec.n_token_types, spec.d_model) if spec.n_token_types else None
        self.ln = make_norm(spec) if spec.embedding_norm else None

    def forward(self, idx, token_type_ids=None, start: int = 0):
        x = self.wte(idx)  # (B, T, C)
        if self.wpe is not None:
            T = idx.shape[1]
            if start + T > self.wpe.num_embeddings:
                raise ValueError(f"sequence of {start + T} tokens exceeds max_seq_len {self.wpe.num_embeddings}")
            x = x + self.wpe(torch.arange(start, start + T, device=idx.device))
        if self.wtt is not None:
            tt = token_type_ids if token_type_ids is not None else torch.zeros_like(idx)
            x = x + self.wtt(tt)
        return self.ln(x) if self.ln is not None else x


class Head(nn.Module):
    """Final norm + LM head (lm), BERT MLM head (mlm) or pooler + classifier (cls), or nothing."""

    def __init__(self, spec: ModelSpec, wte: nn.Embedding):
        super().__init__()
        d, V = spec.d_model, spec.vocab_size
        self.kind = spec.head
        self.ln_f = make_norm(spec) if spec.final_norm else None
        if spec.head == "lm":
            self.lm_head = nn.Linear(d, V, bias=spec.lm_head_bias)
            if spec.tied_embeddings:
                self.lm_head.weight = wte.weight  # one Parameter, shared
        elif spec.head == "mlm":
            self.dense = nn.Linear(d, d)
            self.ln = make_norm(spec)
            self.decoder = nn.Linear(d, V)
            if spec.tied_embeddings:
                self.decoder.weight = wte.weight
        elif spec.head == "cls":
            self.pooler = nn.Linear(d, d)
            self.classifier = nn.Linear(d, spec.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.ln_f is not None:
            x = self.ln_f(x)
        if self.kind == "lm":
            return self.lm_head(x)  # (B, T, V)
        if self.kind == "mlm":
            return self.decoder(self.ln(F.gelu(self.dense(x), approximate="tanh")))  # (B, T, V)
        if self.kind == "cls":
            pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, C): the first ([CLS]) token
            return self.classifier(pooled)  # (B, n_classes)
        return x


# ---------------------------------------------------------------- the model

class Transformer(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.embedding = Embedding(spec)
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.n_layers))
        self.head_module = Head(spec, self.embedding.wte)

    def embed(self, idx: torch.Tensor, token_type_ids: torch.Tensor | None = None, start: int = 0):
        return self.embedding(idx, token_type_ids, start)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.head_module(x)

    def forward(self, idx, targets=None, token_type_ids=None, caches=None, start: int = 0):
        x = self.embed(idx, token_type_ids, start)
        for i, block in enumerate(self.blocks):
            x = block(x) if caches is None else block(x, caches[i])
        logits = self.head(x)
        if targets is None:
            return logits
        return logits, self.loss(logits, targets)

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cross-entropy; LM/MLM targets (B, T) with -100 ignored, classifier targets (B,)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                               ignore_index=-100)

    def new_caches(self, batch: int, max_len: int, *, device=None, dtype=None) -> list[KVCache]:
        p = next(self.parameters())
        s = self.spec
        return [KVCache(batch, max_len, s.n_kv_heads, s.d_head, device=device or p.device,
                        dtype=dtype or p.dtype) for _ in range(s.n_layers)]

    def to_empty(self, *, device, recurse: bool = True) -> "Transformer":
        """Materialise a meta model (uninitialised memory; call init_weights next). Re-ties the
        embedding and LM head, which Module.to_empty would leave as two tensors."""
        super().to_empty(device=device, recurse=recurse)
        self.tie_weights()
        return self

    def tie_weights(self) -> None:
        if not self.spec.tied_embeddings:
            return
        if self.spec.head == "lm":
            self.head_module.lm_head.weight = self.embedding.wte.weight
        elif self.spec.head == "mlm":
            self.head_module.decoder.weight = self.embedding.wte.weight

    @torch.no_grad()
    def init_weights(self) -> None:
        """GPT-2 initialisation: N(0, 0.02) for matmuls and embeddings, output projections scaled
        by 1/sqrt(2 L) (Radford et al. 2019 Sec. 2.3), zero biases, unit norms."""
        init_module_weights(self, self.spec)


def init_module_weights(module: nn.Module, spec: ModelSpec) -> None:
    """Initialise every parameter of `module` (a Transformer, a Block or any part) in place."""
    scaled = INIT_STD / math.sqrt(2 * spec.n_layers)
    with torch.no_grad():
        for name, m in module.named_modules():
            if isinstance(m, nn.Linear):
                std = scaled if name.endswith("proj") else INIT_STD
                nn.init.normal_(m.weight, 0.0, std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, INIT_STD)
            elif isinstance(m, (nn.LayerNorm, RMSNorm)):
                nn.init.ones_(m.weight)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)


def _build(factory, spec: ModelSpec, device, dtype, meta: bool):
    target = torch.device("meta") if meta else (torch.device(device) if device is not None else None)
    with torch.device(target) if target is not None else contextlib.nullcontext():
        module = factory()
    if not meta:
        init_module_weights(module, spec)
    return module.to(dtype=dtype)


def build_model(spec: ModelSpec, *, device=None, dtype: torch.dtype = torch.float32,
                meta: bool = False) -> Transformer:
    """The whole model. meta=True: no memory is allocated; materialise with
    `model.to_empty(device=...)` then `model.init_weights()` (tied weights stay tied)."""
    return _build(lambda: Transformer(spec), spec, device, dtype, meta)


def build_block(spec: ModelSpec, *, device=None, dtype: torch.dtype = torch.float32,
                meta: bool = False) -> Block:
    """One transformer layer, initialised (or on meta), for the block micro-benchmark."""
    return _build(lambda: Block(spec), spec, device, dtype, meta)


def count_params(module: nn.Module) -> int:
    """Parameters, each shared Parameter once."""
    return sum(p.numel() for p in module.parameters())

