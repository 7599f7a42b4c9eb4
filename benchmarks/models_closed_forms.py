"""Training FLOPs per token from llmbench's per-op counting against the closed forms of PaLM
(arXiv:2204.02311 App. B: 6N + 12 L d T) and Megatron (arXiv:2104.04473 Eq. 3, full recompute).

    .venv/bin/python benchmarks/models_closed_forms.py
"""
from llmbench.models import get_model
from llmbench.models.counting import closed_form_flops_per_token, flops_per_token, training_flops

print(f"{'model':16} {'ours/token':>14} {'6N+12LdT':>14} {'ratio':>7}")
for name in ["gpt2-small", "gpt2-xl", "gpt3-6.7b", "gpt3-175b", "llama-2-7b", "megatron-1008b"]:
    spec = get_model(name)
    T = spec.max_seq_len
    ours, closed = flops_per_token(spec, T), closed_form_flops_per_token(spec, T)
    print(f"{name:16} {ours:14.4e} {closed:14.4e} {ours / closed:7.4f}")
print()
print(f"{'model':16} {'ours (full recompute)':>22} {'Megatron Eq.3':>14} {'ratio':>7}")
for name in ["megatron-1.7b", "megatron-39.1b", "megatron-1008b"]:
    spec = get_model(name)
    B, s, l, h, V = 512, spec.max_seq_len, spec.n_layers, spec.d_model, spec.vocab_size
    eq3 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    ours = training_flops(spec, B, s, "full")["hardware"]
    print(f"{name:16} {ours:22.4e} {eq3:14.4e} {ours / eq3:7.4f}")
