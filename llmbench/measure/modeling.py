"""Torch transformer modules built from a ModelSpec: GPT-2/3, Llama, GPT-J, NeoX, BERT, and the
modern variants (Qwen, Mistral, Gemma, Phi-3, Falcon: wide heads, q/k norms, post-norms, sliding
windows, soft-capping), mixture-of-experts layers (measure/moe.py) and DeepSeek's latent attention
(measure/mla.py; no KV cache for it).

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

from llmbench.measure.layers import (  # noqa: F401  (the model's pieces, named here too)
    MLP, KVCache, RMSNorm, apply_rotary, attention_mask, make_norm, rotary_cos_sin,
)
from llmbench.measure.mla import MLAttention
from llmbench.measure.moe import GroupedExperts, MoE
from llmbench.models.counting import representative_layer
from llmbench.models.spec import ModelSpec

INIT_STD = 0.02  # GPT-2 / BERT initializer_range


# ---------------------------------------------------------------- pieces

class Attention(nn.Module):
    """Multi-head / grouped-query attention through scaled_dot_product_attention; with a sliding
    window through a mask, with logit soft-capping (Gemma 2) through explicit matmuls."""

    def __init__(self, spec: ModelSpec, window: int = 0):
        super().__init__()
        d, kvd, qd = spec.d_model, spec.kv_dim, spec.q_dim
        self.n_heads, self.n_kv_heads, self.d_head = spec.n_heads, spec.n_kv_heads, spec.d_head
        self.causal, self.window, self.softcap = spec.causal, window, spec.attn_logit_softcap
        self.n_rot = 0
        if spec.position == "rotary":
            self.n_rot = int(round(spec.rotary_pct * spec.d_head)) // 2 * 2
        self.qkv = nn.Linear(d, qd + 2 * kvd, bias=spec.attn_biases)
        self.q_norm = make_norm(spec, spec.d_head) if spec.qk_norm else None
        self.k_norm = make_norm(spec, spec.d_head) if spec.qk_norm else None
        self.proj = nn.Linear(qd, d, bias=spec.attn_out_bias)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        B, T, C = x.shape
        h, hk, hd = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split((h * hd, hk * hd, hk * hd), dim=-1)
        q = q.view(B, T, h, hd).transpose(1, 2)  # (B, h, T, hd)
        k = k.view(B, T, hk, hd).transpose(1, 2)  # (B, hk, T, hd)
        v = v.view(B, T, hk, hd).transpose(1, 2)  # (B, hk, T, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if getattr(cache, "ragged", False):  # a serving step (measure/serve.py): per-token positions,
            return self.proj(cache.attend(q, k, v, self))  # paged KV, sequences of different lengths
        start = cache.pos if cache is not None else 0
        if self.n_rot:
            positions = torch.arange(start, start + T, device=x.device)
            cos, sin = rotary_cos_sin(self.n_rot, positions, q.dtype)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, hk, start + T, hd)
        mask, is_causal = None, self.causal
        if self.causal and (start > 0 or self.window or self.softcap):
            is_causal = False
            if T > 1 or self.window:  # new queries see the cache (within the window) and themselves
                mask = attention_mask(T, start, self.window, x.device)
        if self.softcap:
            y = softcapped_attention(q, k, v, mask, self.softcap)
        else:
            kwargs = {"enable_gqa": True} if hk != h else {}
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, **kwargs)
        y = y.transpose(1, 2).reshape(B, T, h * hd)  # (B, T, h hd)
        return self.proj(y)


def softcapped_attention(q, k, v, mask, cap: float) -> torch.Tensor:
    """Attention with cap * tanh(scores / cap) before the softmax (Gemma 2; SDPA has no soft-cap):
    two matmuls over the full square, as counting counts them."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, h, S, hd)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, T, S)
    scores = cap * torch.tanh(scores / cap)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v  # (B, h, T, hd)


class Block(nn.Module):
    """Transformer layer `layer` (default: counting's representative layer): pre-LN (GPT, Llama),
    post-LN (BERT), parallel residual (GPT-J, Falcon-7B: one norm; NeoX: two), Gemma's extra norms
    after attention and MLP; an MoE MLP where spec.is_moe_layer(layer), MLA when spec.is_mla."""

    def __init__(self, spec: ModelSpec, layer: int | None = None):
        super().__init__()
        i = representative_layer(spec) if layer is None else layer
        self.post_ln = spec.family == "bert"
        self.parallel = spec.parallel_residual
        self.ln_1 = make_norm(spec)
        if spec.is_mla:
            self.attn = MLAttention(spec, window=spec.window(i))
        else:
            self.attn = Attention(spec, window=spec.window(i))
        self.ln_2 = None if spec.single_norm else make_norm(spec)
        self.mlp = MoE(spec) if spec.is_moe_layer(i) else MLP(spec)
        self.ln_post_attn = make_norm(spec) if spec.post_norms else None
        self.ln_post_mlp = make_norm(spec) if spec.post_norms else None

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        if self.parallel:
            h = self.ln_1(x)
            return x + self.attn(h, cache) + self.mlp(h if self.ln_2 is None else self.ln_2(x))
        if self.post_ln:
            x = self.ln_1(x + self.attn(x, cache))
            return self.ln_2(x + self.mlp(x))
        a = self.attn(self.ln_1(x), cache)
        x = x + (a if self.ln_post_attn is None else self.ln_post_attn(a))
        m = self.mlp(self.ln_2(x))
        return x + (m if self.ln_post_mlp is None else self.ln_post_mlp(m))


class Embedding(nn.Module):
    """Token (+ learned position) (+ token-type) embeddings (+ a norm, BERT)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.wte = nn.Embedding(spec.vocab_size, spec.d_model)
        self.wpe = nn.Embedding(spec.max_seq_len, spec.d_model) if spec.position == "learned" else None
        self.wtt = nn.Embedding(spec.n_token_types, spec.d_model) if spec.n_token_types else None
        self.ln = make_norm(spec) if spec.embedding_norm else None

    def forward(self, idx, token_type_ids=None, start: int | torch.Tensor = 0):
        """start: the first token's position, or a (T,) tensor of each token's position (a serving
        step's sequences flattened into one row, measure/serve.py; it checks the lengths)."""
        x = self.wte(idx)  # (B, T, C)
        if self.wpe is not None:
            T = idx.shape[1]
            if isinstance(start, torch.Tensor):
                positions = start
            elif start + T > self.wpe.num_embeddings:
                raise ValueError(f"sequence of {start + T} tokens exceeds max_seq_len {self.wpe.num_embeddings}")
            else:
                positions = torch.arange(start, start + T, device=idx.device)
            x = x + self.wpe(positions)
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
        self.softcap = spec.final_logit_softcap
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
            logits = self.lm_head(x)  # (B, T, V)
            return self.softcap * torch.tanh(logits / self.softcap) if self.softcap else logits
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
        self.blocks = nn.ModuleList(Block(spec, i) for i in range(spec.n_layers))
        self.head_module = Head(spec, self.embedding.wte)

    def embed(self, idx: torch.Tensor, token_type_ids: torch.Tensor | None = None,
              start: int | torch.Tensor = 0):
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
        if s.is_mla:
            raise ValueError(f"model {s.name!r}: generation with a KV cache is not built for latent "
                             "attention (MLA); models/ counts its cache and decode")
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
            elif isinstance(m, GroupedExperts):
                m.reset_expert_weights(INIT_STD, scaled)
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
    """One transformer layer (an MoE one for an MoE model), initialised (or on meta), for the
    block micro-benchmark."""
    return _build(lambda: Block(spec), spec, device, dtype, meta)


def count_params(module: nn.Module) -> int:
    """Parameters, each shared Parameter once."""
    return sum(p.numel() for p in module.parameters())

