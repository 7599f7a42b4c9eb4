"""One visual vocabulary for every plot and table: measured, predicted and published told apart by
colour, marker and label at once (the legend key at the top of the HTML report uses the same).
Hardware labels come from the catalog's display names (llmbench/hardware/catalog/*.toml); this
file keeps only what the catalog lacks: colours, and the label of this machine."""
from __future__ import annotations

import functools
import re

SOURCE_STYLE = {
    # source: (colour, marker, label, linestyle); predicted lines take the hardware's colour
    "measured": ("#1a9641", "o", "measured here", "none"),
    "predicted": ("#2b5fad", "s", "predicted", "-"),
    "published": ("#d7301f", "*", "published", "none"),
}
# hardware colours avoid the green of `measured` and the red of `published`
HW_COLOURS = {
    "a100-40gb": "#1f77b4", "a100-80gb": "#6baed6", "h100-sxm": "#3f007d", "h200-sxm": "#9467bd",
    "mi250": "#8c564b", "gaudi2": "#e377c2", "sn30": "#7f7f7f", "bow-ipu": "#17becf",
    "cs2": "#111111", "cs3": "#5a5a9e", "cpu": "#999999",
}
#: for hardware without a colour above: a fixed palette, picked by the name (stable across runs)
PALETTE = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
           "#756bb1", "#636363")
#: labels the catalog's display names do not give
LABELS = {"cpu": "this CPU"}


def hw_colour(name: str) -> str:
    if name in HW_COLOURS:
        return HW_COLOURS[name]
    return PALETTE[sum(map(ord, name or "")) % len(PALETTE)]


@functools.lru_cache(maxsize=None)
def hw_label(name: str) -> str:
    """A short label from the catalog's display name: the vendor and the parenthesised note
    dropped ('NVIDIA A100 SXM4 40GB (Polaris)' -> 'A100 SXM4 40GB', 'Cerebras CS-2 (WSE-2)' ->
    'CS-2'); the name itself when the catalog does not know it."""
    if name in LABELS or not name:
        return LABELS.get(name, str(name))
    from llmbench.hardware import catalog

    hw = catalog().get(name)
    if hw is None:
        return name
    text = re.sub(r"\s*\(.*?\)", "", hw.display_name).strip()
    if hw.vendor and text.lower().startswith(hw.vendor.lower() + " "):
        text = text[len(hw.vendor) + 1:]
    return text or name


def measured_kw(**extra) -> dict:
    c, m, _, _ = SOURCE_STYLE["measured"]
    return {**dict(color=c, marker=m, markersize=8, markeredgecolor="white", linestyle="none", zorder=5),
            **extra}


def published_kw(**extra) -> dict:
    c, m, _, _ = SOURCE_STYLE["published"]
    return {**dict(color=c, marker=m, markersize=15, markeredgecolor="black", markeredgewidth=0.6,
                   linestyle="none", zorder=6), **extra}


def predicted_kw(hw: str, **extra) -> dict:
    return {**dict(color=hw_colour(hw), marker="s", markersize=4, linestyle="-", linewidth=1.6), **extra}


def unfit_kw(colour: str) -> dict:
    """A prediction that does not fit device memory: a hollow square over the line's point."""
    return dict(color=colour, marker="s", markersize=8, markerfacecolor="white", markeredgecolor=colour,
                markeredgewidth=1.4, linestyle="none", zorder=4)
