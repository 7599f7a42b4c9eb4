"""Mixture of experts in the step model: the MLP part of every layer (router, shared experts,
routed experts at top-k, dense layers), expert parallelism's all-to-alls, and the share of the
model state expert parallelism splits. Equations on numpy arrays or Python floats (xp).

    llmbench plan --model mixtral-8x7b --hardware h100-sxm --devices 64 --batch 512 --seq 4096

Expert parallelism (ep) as DeepSpeed-MoE (arXiv:2201.05596 Sec. 4) and Megatron-core lay it out:
the ep devices of an expert-parallel group sit inside the data-parallel group and each holds
E / ep of every MoE layer's routed experts (each expert split by tp as the dense layers are); the
attention and the shared experts stay replicated over data parallelism. Routing is taken as
balanced (every expert gets tokens x k / E rows) and uniform (a decode step of b tokens touches
E (1 - (1 - k / E)^b) experts of a layer). docs/predict.md "Mixture of experts" gives each term.
"""
from __future__ import annotations

from llmbench.grid import FULL
from .memory import hierarchy
from .params import gemm_efficiency


def _roof(flops, nbytes, peak, eff, bw, xp):
    tc = flops / (peak * eff)
    tm = nbytes / bw
    return xp.where(tc >= tm, tc, 0.0), xp.where(tc < tm, tm, 0.0)


def _token_gemms(gemms, n, tp, s, p, peak, bw, xp):
    """(compute s, memory s) of GEMMs with M = n tokens, weights read once."""
    comp = mem = 0.0
    for N, K, col in gemms:
        Nn, Kk = (N / tp, K) if col else (N, K / tp)
        c, m = _roof(2.0 * n * Nn * Kk, (n * Kk + Kk * Nn + n * Nn) * s, peak,
                     gemm_efficiency(n, Nn, Kk, p, xp), bw, xp)
        comp, mem = comp + c, mem + m
    return comp, mem


def experts_hit(mo, tokens, xp):
    """Distinct routed experts of one MoE layer that `tokens` tokens touch, uniform top-k routing:
    E (1 - (1 - k/E)^tokens) (models/moe.expected_experts_hit); all E with padded capacity."""
    if mo.padded:
        return xp.zeros_like(tokens) + float(mo.E)
    return mo.E * (1.0 - (1.0 - mo.k / mo.E) ** xp.maximum(tokens, 0.0))


def expert_weight_bytes(mo, tokens, tp, ep, s, xp):
    """Routed-expert weight bytes one device reads in one MoE layer when its ep-group runs `tokens`
    tokens per device: the experts touched (experts_hit of tokens x ep), ep-th of them its own,
    each split by tp. Decode at batch b (tp = ep = 1): E (1 - (1 - k/E)^b) experts' weights."""
    nk = sum(N * K for N, K, _ in mo.expert_gemms)
    return experts_hit(mo, tokens * ep, xp) / ep * nk / tp * s


def expert_forward(mo, n, tp, ep, s, p, peak, bw, xp):
    """(compute s, memory s) of one MoE layer's routed experts on one device, forward, n tokens per
    device: the device runs E / ep experts over the n x rows_per_token rows routed to them from its
    ep-group (balanced: as many rows as its own tokens send out), reads the weights of those of its
    experts the group's n x ep tokens touch, and each expert's GEMM has M = its share of the rows."""
    rows = n * mo.rows_per_token
    hit_group = xp.maximum(experts_hit(mo, n * ep, xp), 1e-9)
    m_expert = rows * ep / hit_group
    share = expert_weight_bytes(mo, n, tp, ep, s, xp) / sum(N * K for N, K, _ in mo.expert_gemms)
    comp = mem = 0.0
    for N, K, col in mo.expert_gemms:
        Nn, Kk = (N / tp, K) if col else (N, K / tp)
        c, m = _roof(2.0 * rows * Nn * Kk, (rows * Kk + rows * Nn) * s + share * N * K, peak,
                     gemm_efficiency(m_expert, Nn, Kk, p, xp), bw, xp)
        comp, mem = comp + c, mem + m
    return comp, mem


def mlp_forward(sh, n, tp, ep, p, peak, bw, xp):
    """(compute s, memory s) of the MLP part of a MoE model, forward, per layer on average (the
    caller multiplies by the layers): MoE layers (router, shared experts, routed experts at top-k)
    and dense layers (their MLP), n tokens per device."""
    mo = sh.moe
    tc, tm = _token_gemms(mo.token_gemms, n, tp, sh.s, p, peak, bw, xp)
    ec, em = expert_forward(mo, n, tp, ep, sh.s, p, peak, bw, xp)
    dc, dm = _token_gemms(mo.dense_gemms, n, tp, sh.s, p, peak, bw, xp)
    comp = (mo.moe_layers * (tc + ec) + mo.dense_layers * dc) / sh.L
    mem = (mo.moe_layers * (tm + em) + mo.dense_layers * dm) / sh.L
    return comp, mem


def all_to_all_s(sh, hw, tokens, tp, ep, p, xp):
    """One all-to-all of the routed rows of `tokens` tokens per tensor-parallel group over an
    ep-group: each device sends tokens / tp x k x d x bytes (sequence-parallel share), (ep - 1) / ep
    of it to the other members. The group spans ep x tp consecutive ranks (tp innermost): within a
    node it runs on the scale-up link; across nodes the part bound for other nodes leaves through
    the device's NIC (inter_node_bandwidth) while the rest stays on the scale-up link. Pairwise
    exchanges run concurrently: one link latency."""
    ic = hw.interconnect
    vol = tokens / tp * sh.moe.k * sh.d * sh.s
    if ic is None:  # no fabric: through the store's link, as the other collectives (step.links)
        return xp.where(ep > 1, vol * (ep - 1) / ep / hierarchy(hw).link_bytes_per_s, 0.0)
    net = p["network"]
    per_node = max(ic.devices_per_node, 1) / tp  # ep-group members in one node
    local = xp.minimum(ep, xp.maximum(per_node, 1.0))
    nic = ic.inter_node_bandwidth_bytes_per_s or ic.bandwidth_bytes_per_s
    t_local = vol * (local - 1.0) / ep / (ic.bandwidth_bytes_per_s * net)
    t_remote = vol * (ep - local) / ep / (nic * net)
    return xp.where(ep > 1, xp.maximum(t_local, t_remote) + ic.latency_s, 0.0)


def ep_time_s(sh, g, hw, p, xp):
    """All-to-alls of one micro-batch on one pipeline stage: dispatch and combine per MoE layer in
    the forward and in the backward (4), two more with full recompute (the forward rerun)."""
    if sh.moe is None:
        return 0.0
    per = all_to_all_s(sh, hw, g.micro_batch * g.seq, g.tp, g.ep, p, xp)
    return sh.moe.moe_layers / g.pp * (4.0 + 2.0 * (g.recompute == FULL)) * per
