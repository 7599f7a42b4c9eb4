"""`llmbench report --db mine.db` on a database of one's own work (no built-in study in it): only
what the database holds — each workload's measured, predicted and streamed rows side by side, one
figure panel per metric that has values, and the published rows of the same model and hardware —
no seed-reproduction pages (those are `llmbench reproduce`'s). Nothing empty is drawn: a metric no
row has gets no panel, and a database with no value gets no figure (one line says so).

    llmbench predict train --model gpt2-xl --hardware a100-40gb --batch 64 --seq 1024 --db mine.db
    llmbench report --db mine.db          # -> out/report.html with those rows
"""
from __future__ import annotations

import time
from pathlib import Path

from . import style
from .html import CSS, _e, _table_html, save_figure
from .plotkit import model_label, pyplot
from .rows import Data, command_of, field, metric
from .tables import Table, fmt

#: the figure each row is drawn by: the first metric it has
HEADLINE = (("tokens_per_s", "tokens/s"), ("samples_per_s", "samples/s"), ("latency_s_p50", "latency p50 (s)"),
            ("fwd_bwd_tflops", "TFLOP/s fwd+bwd"), ("achieved_tflops", "TFLOP/s"), ("step_time_s", "step time (s)"))
KINDS = ("measured", "streamed", "predicted", "published")
COLOURS = {"measured": style.SOURCE_STYLE["measured"][0], "streamed": "#7b3294",
           "predicted": style.SOURCE_STYLE["predicted"][0], "published": style.SOURCE_STYLE["published"][0]}


def is_user_db(data: Data) -> bool:
    """A database of one's own runs: no row belongs to a built-in study (reproduce fills those)."""
    return not any(r.get("study") for r in data.all) and any(r.get("source") in ("measured", "predicted")
                                                             for r in data.all)


def kind(row: dict) -> str:
    """measured, streamed (a weight-streaming run: llmbench stream), predicted or published."""
    if row.get("source") == "measured" and (row.get("suite") == "stream" or "streamed_tokens_per_s" in
                                              (row.get("metrics") or {})):
        return "streamed"
    return row.get("source") or "measured"


def headline(row: dict) -> tuple[str, str, float] | None:
    for name, label in HEADLINE:
        v = metric(row, name)
        if v is not None:
            return name, label, v
    return None


def workload_text(row: dict) -> str:
    parts = [model_label(row), f"{row.get('suite') or ''}".strip()]
    b, s = field(row, "batch"), field(row, "seq_len")
    if b:
        parts.append(f"batch {b}" + (f" x {s}" if s else ""))
    return " · ".join(p for p in parts if p)


def own_rows(data: Data) -> list[dict]:
    """The database's rows, each workload's together, measured / streamed / predicted in that order."""
    rows = [r for r in data.all if r.get("source") in ("measured", "predicted") and r.get("status") in ("ok", "oom")]
    return sorted(rows, key=lambda r: (workload_text(r), style.hw_label(r.get("hardware")), KINDS.index(kind(r))))


def published_for(rows: list[dict]) -> list[dict]:
    """published_v2.csv rows of a model and hardware the user's rows have (the relevant ones)."""
    from llmbench.published import PUBLISHED_V2_CSV, published_rows

    want = {(field(r, "model"), r.get("hardware")) for r in rows}
    return [p for p in published_rows(PUBLISHED_V2_CSV) if (p.get("model"), p.get("system")) in want]


def rows_table(rows: list[dict]) -> Table:
    t = Table("mine", "Your rows, per workload: measured, streamed and predicted side by side",
              ["workload", "hardware", "devices", "source", "metric", "value", "fits", "command"],
              kinds=["", "", "", "", "", "", "", ""])
    for r in rows:
        h = headline(r)
        fits = (r.get("metrics") or {}).get("fits")
        t.rows.append([workload_text(r), style.hw_label(r.get("hardware")), fmt(field(r, "devices") or 1), kind(r),
                       h[1] if h else "-", fmt(h[2]) if h else "-", "no" if fits is False else "yes",
                       command_of(r) or "-"])
    t.sources = ["each row's command is the one that recorded it (its environment in the database)"]
    return t


def published_table(pubs: list[dict]) -> Table | None:
    if not pubs:
        return None
    t = Table("published", "Published rows of the same model and hardware (llmbench/reference/published_v2.csv)",
              ["id", "model", "system", "metric", "value", "source"], kinds=["", "", "", "", "published", ""])
    for p in pubs:
        t.rows.append([p.get("id"), p.get("model"), p.get("system"), p.get("metric"), p.get("value"), p.get("source")])
    return t


def draw_rows(rows: list[dict]):
    """One horizontal bar per row with a value, one panel per metric; None when no row has one."""
    by_metric: dict[str, list] = {}
    for r in rows:
        h = headline(r)
        if h and h[2] > 0:
            by_metric.setdefault(h[1], []).append((f"{workload_text(r)} · {style.hw_label(r.get('hardware'))}",
                                                   kind(r), h[2]))
    if not by_metric:
        return None
    plt = pyplot()
    n = max(len(v) for v in by_metric.values())
    fig, axes = plt.subplots(len(by_metric), 1, figsize=(9.5, 1.2 + 0.45 * n * len(by_metric)), squeeze=False)
    for ax, (label, bars) in zip(axes[:, 0], by_metric.items()):
        ys = range(len(bars))
        ax.barh(list(ys), [v for _, _, v in bars], color=[COLOURS[k] for _, k, _ in bars], height=0.6)
        ax.set_yticks(list(ys), [f"{w} · {k}" for w, k, _ in bars], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        vals = [v for _, _, v in bars]
        ax.set_xlim(min(vals) / 3, max(vals) * 6)  # room for the value printed after each bar
        ax.set_xlabel(label)
        for y, (_, _, v) in zip(ys, bars):
            ax.annotate(fmt(v), (v, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7.5)
    fig.tight_layout()
    return fig


def build_user_report(data: Data, out_dir: str | Path, *, meta: dict | None = None, log=print) -> dict:
    """report.html of a user's own database: the figure (when any row has a value) and the tables."""
    out, meta, t0 = Path(out_dir), meta or {}, time.perf_counter()
    rows = own_rows(data)
    fig = draw_rows(rows)
    files = save_figure(fig, out / "img", "mine") if fig is not None else None
    tables = [t for t in (rows_table(rows), published_table(published_for(rows))) if t is not None]
    figure = (f'<figure><img src="img/{files["png"].name}" alt="your rows"><figcaption><b>Your rows.</b> '
              "One bar per row of the database, per metric; colour: measured (green), streamed (purple), "
              f'predicted (blue). <a href="img/{files["svg"].name}">SVG</a></figcaption></figure>') if files else \
        '<p class="note">No row of this database has a throughput, latency or TFLOP/s value to draw.</p>'
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>llmbench report: your runs</title>'
            f"<style>{CSS}</style></head><body><header><h1>llmbench: your runs</h1>"
            f"<p>Built from <code>{_e(meta.get('db', 'the results database'))}</code> · {len(rows)} rows. The seed "
            "reproduction pages are <code>llmbench reproduce</code>'s.</p></header><main>"
            f'<section id="f-mine"><h2>Your rows</h2>{figure}</section>'
            + "".join(_table_html(t) for t in tables) + "</main></body></html>\n")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    log(f"wrote {path} (your runs: {len(rows)} rows, {1 if files else 0} figure, {len(tables)} tables) "
        f"in {time.perf_counter() - t0:.1f} s")
    counts = {s: sum(1 for r in rows if r.get("source") == s) for s in ("measured", "predicted", "published")}
    return {"report": str(path), "rows": counts, "images": ["mine.png"] if files else []}
