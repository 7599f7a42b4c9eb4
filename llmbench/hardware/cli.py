"""`llmbench hardware list|show`: peaks, memory tiers, interconnect, and the source of every number.

    llmbench hardware list
    llmbench hardware show cs2 --json
    llmbench hardware init --like h100-sxm --name my-gpu > my-gpu.toml
    llmbench hardware check my-gpu.toml
    llmbench predict train --hardware ./my-gpu.toml ...      # or a folder in $LLMBENCH_HARDWARE_PATH
"""
from __future__ import annotations

from llmbench._cliutil import add_json, emit_json, pairs, table
from llmbench.units import fmt_bytes, fmt_flops, fmt_rate_bytes, fmt_time


def register(cli) -> None:
    g = cli.group("hardware", "Hardware catalog: peaks, memory tiers, interconnect, sources.")
    add_json(g.command("list", hardware_list))
    p = g.command("show", hardware_show)
    p.add_argument("name", help="catalog name (e.g. a100-80gb) or a user hardware .toml file")
    add_json(p)
    p = g.command("init", hardware_init)
    p.add_argument("--like", required=True, help="catalog entry to start from, e.g. h100-sxm")
    p.add_argument("--name", help="the new entry's name (needed before the file goes into "
                                  "a $LLMBENCH_HARDWARE_PATH folder)")
    p = g.command("check", hardware_check)
    p.add_argument("file", help="a user hardware .toml file")
    add_json(p)


def hardware_init(a) -> None:
    """Print a catalog entry as TOML, the start of a file for your own accelerator."""
    from llmbench.hardware.lookup import init_toml

    print(init_toml(a.like, a.name), end="")


def hardware_check(a) -> None:
    """Validate a user hardware file; list the numbers that carry no source."""
    from llmbench.hardware.userfile import check_user_file

    res = check_user_file(a.file)
    if a.json:
        return emit_json({"name": res.spec.name, "file": a.file, "warnings": list(res.warnings)})
    print(f"{a.file}: {res.spec.name} ({res.spec.display_name}) is valid")
    for w in res.warnings:
        print(f"warning: {w}")


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
    if hw.price_per_device_hour_usd:
        rows.append(("price", f"${hw.price_per_device_hour_usd:,.2f} per device-hour"))
    if hw.origin_file:
        rows.append(("file", hw.origin_file))
    if hw.logical_gpus > 1:
        rows.append(("logical GPUs", f"{hw.logical_gpus} (the software shows each as a GPU; a one-process run, "
                                     "--suite block, uses one)"))
    rows += [("skips zero weights", hw.skips_zero_weights),
             ("default modes", f"train {hw.default_mode_train}, infer {hw.default_mode_infer}")]
    if getattr(hw, "overlay", None):
        rows.append(("measured/calibrated profile", hw.overlay))
    rows += [(f"source: {k}", v) for k, v in hw.sources.items()]
    if hw.notes:
        rows.append(("notes", " ".join(hw.notes.split())))
    pairs(rows)
