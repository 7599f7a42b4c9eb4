"""One visual vocabulary for every plot and table: measured, predicted and published told apart by
colour, marker and label at once (the legend key at the top of the HTML report uses the same)."""
from __future__ import annotations

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
HW_LABELS = {
    "a100-40gb": "A100 40GB", "a100-80gb": "A100 80GB", "h100-sxm": "H100 SXM", "h200-sxm": "H200 SXM",
    "mi250": "MI250", "gaudi2": "Gaudi2", "sn30": "SN30", "bow-ipu": "Bow IPU", "cs2": "CS-2",
    "cs3": "CS-3", "cpu": "this CPU",
}


def hw_colour(name: str) -> str:
    return HW_COLOURS.get(name, "#444444")


def hw_label(name: str) -> str:
    return HW_LABELS.get(name, name)


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
