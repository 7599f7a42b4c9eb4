"""`llmbench hardware list|show`: peaks, memory tiers, interconnect, and the source of every number.

    llmbench hardware list
    llmbench hardware show cs2 --json
"""
from __future__ import annotations

from llmbench._cliutil import add_json, emit_json, pairs, table
from llmbench.units import fmt_bytes, fmt_flops, fmt_rate_bytes, fmt_time


def register(cli) -> None:
    g = cli.group("hardware", "Hardware catalog: peaks, memory tiers, interconnect, sources.")
    add_json(g.command("list", hardware_list))
    p = g.command("show", hardware_show)
    p.add_argument("name", help="catalog name, e.g. a100-80gb")
    add_json(p)


def hardware_list(a) -> None:
    """List the hardware catalog (dense peaks, device memory)."""
    from llmbench.hardware import catalog

    rows = []
    for hw in catalog().values():
        mem = hw.device_memory
        info = hw.to_dict()
        rows.append({"name": hw.name, "display_name": hw.display_name, "kind": hw.kind,
                     "peak_flops": info["peak_flops"], "memory_tiers": info["memory_tiers"],
                     "sources": info["sources"],
                     "peak_bf16_flops": hw.peak("bf16"), "peak_fp32_flops": hw.peak("fp32"),
                     "memory_name": mem.name, "memory_bytes": mem.capacity_bytes,
                     "memory_bandwidth_bytes_per_s": mem.bandwidth_bytes_per_s})
    if a.json:
        return emit_json(rows)
    table("llmbench hardware (dense peaks)",
          ("name", "device", "kind", "bf16", "fp32", "memory", "capacity", "bandwidth"),
          [(r["name"], r["display_name"], r["kind"], fmt_flops(r["peak_bf16_flops"]),
            fmt_flops(r["peak_fp32_flops"]), r["memory_name"], fmt_bytes(r["memory_bytes"]),
            fmt_rate_bytes(r["memory_bandwidth_bytes_per_s"])) for r in rows],
          right=("bf16", "fp32", "capacity", "bandwidth"))


def hardware_show(a) -> None:
    """Peaks, memory tiers, interconnect and the source of every number."""
    from llmbench.hardware import get_hardware

    hw = get_hardware(a.name)
    if a.json:
        return emit_json(hw.to_dict())
    rows = [("name", f"{hw.display_name} ({hw.name})")]
    rows += [(f"peak {dt} (dense)", fmt_flops(v)) for dt, v in hw.peak_flops.items()]
    rows += [(f"peak {dt} (sparse)", fmt_flops(v)) for dt, v in hw.peak_flops_sparse.items()]
    rows += [(f"memory {t.name} ({t.role})", f"{fmt_bytes(t.capacity_bytes)} at {fmt_rate_bytes(t.bandwidth_bytes_per_s)}")
             for t in hw.memory_tiers]
    if hw.interconnect:
        ic = hw.interconnect
        rows.append(("interconnect", f"{ic.name}: {fmt_rate_bytes(ic.bandwidth_bytes_per_s)} per device, "
                                     f"{fmt_time(ic.latency_s)}, {ic.topology}"))
    if hw.power_w:
        rows.append(("power", f"{hw.power_w:,.0f} W"))
    rows += [("skips zero weights", hw.skips_zero_weights),
             ("default modes", f"train {hw.default_mode_train}, infer {hw.default_mode_infer}")]
    if getattr(hw, "overlay", None):
        rows.append(("measured/calibrated profile", hw.overlay))
    rows += [(f"source: {k}", v) for k, v in hw.sources.items()]
    if hw.notes:
        rows.append(("notes", " ".join(hw.notes.split())))
    pairs(rows)
