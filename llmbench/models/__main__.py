"""The MoE tables of docs/models.md: total and active parameters, training FLOPs per token against
the closed form, and expert weights read against batch, for every MoE preset (no torch).

    python -m llmbench.models
"""
from __future__ import annotations

from .counting import (
    active_param_count, closed_form_flops_per_token, flops_per_token, kv_cache_bytes_per_token,
    param_count,
)
from .moe import expected_experts_hit, expert_weight_bytes_read
from .presets import presets


def main() -> None:
    """Print, for the MoE presets, total and active parameters, training FLOPs per token against
    the closed form 6 N_active + attention, and the expert weights read against batch."""
    moes = [s for s in presets().values() if s.is_moe]
    print(f"{'model':15s} {'total':>9s} {'active':>9s} {'train/token':>12s} {'6N_act+attn':>12s} "
          f"{'ratio':>6s} {'KV/token bf16':>13s}  (T = min(4096, max_seq_len))")
    for s in moes:
        T = min(4096, s.max_seq_len)
        f, c = flops_per_token(s, T), closed_form_flops_per_token(s, T)
        print(f"{s.name:15s} {param_count(s) / 1e9:8.3f}B {active_param_count(s) / 1e9:8.3f}B {f:12.4e} "
              f"{c:12.4e} {f / c:6.4f} {kv_cache_bytes_per_token(s) / 1024:9.1f} KiB")
    print("\nexperts hit per MoE layer / routed + shared expert weights read per forward (bf16), by tokens")
    for s in moes:
        cells = [f"{t}: {expected_experts_hit(s, t):5.1f} / {expert_weight_bytes_read(s, t) / 1e9:7.2f} GB"
                 for t in (1, 4, 16, 64, 256)]
        print(f"{s.name:15s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
