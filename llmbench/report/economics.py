"""Energy and cost of the predictions: energy per token (the catalog's `power_w` x devices x time)
and cost per million tokens (`price_per_device_hour_usd` x devices over tokens/s), each with the
catalog's cited source; seed 001's price/performance and seed 004's speed against wafers and cost.

    llmbench report --db D --price cs3=60 --price a100-40gb=1.5   # override a price per device-hour

Prices are list prices or amortised purchases (the catalog says which); a hardware without a
price shows "no price", never a guess.
"""
from __future__ import annotations

from . import style
from .plotkit import empty, figure_legend, label_axes, pyplot, unfit
from .rows import Data, devices_of, field, metric
from .tables import Table, fmt

#: (study, how to pick its rows, what the row is) of the workloads the economics table shows
VIEWS = (("dp-scaling", {"devices": 1}, "GPT-2 XL training, 16 seq x 1024, 1 device"),
         ("llm-inference", {}, "decode at batch 1 (prompt 2048, 256 new)"),
         ("time-to-train", {}, "one epoch (time-to-train)"))


def hw_economics(name: str, prices: dict | None = None) -> tuple[float | None, str, float | None, str]:
    """(power W, its source, price USD per device-hour, its source) from the catalog; `prices`
    overrides a price (the source then says so)."""
    from llmbench.hardware import catalog

    hw = catalog().get(name)
    if hw is None:
        return None, "not in the catalog", None, "not in the catalog"
    src = hw.sources or {}
    price, psrc = hw.price_per_device_hour_usd, src.get("price_per_device_hour_usd", "")
    if prices and name in prices:
        price, psrc = prices[name], "--price override"
    return hw.power_w, src.get("power_w", ""), price, psrc or ("no price in the catalog" if price is None else "")


def economics(row: dict, prices: dict | None = None) -> dict:
    """Energy per token (J), cost per million tokens (USD) and tokens/s of one predicted row."""
    tps = metric(row, "tokens_per_s")
    n = devices_of(row)
    power, psrc, price, prsrc = hw_economics(row.get("hardware"), prices)
    return {"tokens_per_s": tps, "devices": n, "power_w": power, "power_source": psrc,
            "price": price, "price_source": prsrc,
            "j_per_token": power * n / tps if power and tps else None,
            "usd_per_mtoken": price * n / 3600.0 / tps * 1e6 if price and tps else None,
            "usd_per_epoch": price * n * epoch / 3600.0 if price and (epoch := metric(row, "epoch_time_s")) else None}


def economics_table(data: Data, prices: dict | None = None) -> Table:
    t = Table("economics", "Energy and cost per token (predicted)",
              ["workload", "model", "hardware", "devices", "tokens/s", "energy (J/token)",
               "USD per M tokens", "USD per epoch", "power (W)", "USD per device-hour"],
              kinds=["", "", "", "predicted", "predicted", "predicted", "predicted", "predicted", "", ""])
    sources = {}
    for study, want, what in VIEWS:
        for r in data.predicted(study, **want):
            e = economics(r, prices)
            hw = r.get("hardware")
            no = "no price" if not e["price"] else "-"
            name = style.hw_label(hw) + (" (does not fit: predicted oom)" if unfit(r) else "")
            t.rows.append([what, r.get("model"), name, fmt(e["devices"]), fmt(e["tokens_per_s"]),
                           fmt(e["j_per_token"]), fmt(e["usd_per_mtoken"]) if e["usd_per_mtoken"] else no,
                           fmt(e["usd_per_epoch"]) if e["usd_per_epoch"] else no,
                           fmt(e["power_w"]), fmt(e["price"]) if e["price"] else "no price"])
            sources[hw] = f"{style.hw_label(hw)}: power: {e['power_source']}; price: {e['price_source']}"
    t.sources = sorted(sources.values())
    t.note = ("energy = power_w x devices / tokens/s (board or system power at full load: an upper bound); "
              "cost = price per device-hour x devices / 3600 / tokens/s. Seed 001's argument: a CS-2 at "
              "$2-3M against a $200k DGX A100 (8 GPUs) must do the work of 80-120 A100s, at ~20 kW against "
              "6.5 kW for a DGX; compare the GPT-2 XL rows.")
    return t


def draw_economics(data: Data, prices: dict | None = None):
    """Seed 004: tokens/s per user, and cost per M tokens, against the devices (wafers) that hold
    each Llama model; seed 001: GPT-2 XL training cost per M tokens against tokens/s. No text is
    written on the points: the legend and the table carry the names."""
    plt = pyplot()
    prices = prices if prices is not None else getattr(data, "prices", None)
    fig, axes = plt.subplots(1, 3, figsize=(15, 6.2))
    rows = [r for r in data.predicted("llm-inference") if metric(r, "decode_tokens_per_s_per_seq")]
    markers = {m: mk for m, mk in zip(sorted({r.get("model") for r in rows}), "o^sDv")}
    for r in rows:
        e = economics(r, prices)
        hw, kw = r.get("hardware"), dict(marker=markers[r.get("model")], linestyle="none", markersize=7)
        label = f"predicted · {r.get('model')} on {style.hw_label(hw)}"
        axes[0].plot([e["devices"]], [metric(r, "decode_tokens_per_s_per_seq")], color=style.hw_colour(hw),
                     label=label, **kw)
        if e["usd_per_mtoken"]:
            axes[1].plot([e["devices"]], [e["usd_per_mtoken"]], color=style.hw_colour(hw), **kw)
    if rows:
        label_axes(axes[0], x="devices (wafers for CS-2/CS-3)", y="decode tokens/s per user (batch 1)",
                   xlog=2, ylog=True, title="seed 004: speed against wafers")
        label_axes(axes[1], x="devices (wafers for CS-2/CS-3)", y="USD per million generated tokens",
                   xlog=2, ylog=True, title="seed 004: cost against wafers (no price: not drawn)")
    else:
        empty(axes[0])
        empty(axes[1])
    _training_cost(axes[2], data, prices)
    return figure_legend(fig, axes, ncol=4)


def _training_cost(ax, data: Data, prices: dict | None) -> None:
    pts = []
    for r in data.predicted("dp-scaling", devices=1):
        e = economics(r, prices)
        if e["usd_per_mtoken"] and e["tokens_per_s"]:
            pts.append((e["tokens_per_s"], e["usd_per_mtoken"], r.get("hardware"), field(r, "devices")))
    for tps, usd, hw, _ in pts:
        ax.plot([tps], [usd], marker="s", color=style.hw_colour(hw), linestyle="none", markersize=7,
                label=f"predicted · {style.hw_label(hw)}")
    if not pts:
        return empty(ax, "no priced prediction")
    label_axes(ax, x="GPT-2 XL training tokens/s, one device", y="USD per million tokens", ylog=True,
               title="seed 001: price / performance (GPT-2 XL training)")
