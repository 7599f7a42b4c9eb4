"""The static HTML report: one page, readable offline (images are relative files next to it, CSS
inline, no script, no network), built from whatever the database holds; `report(db, out_dir)`
also prints the tables in the terminal.

    llmbench report --db llmbench-results.db --out out/    # -> out/report.html, out/img/*.png|svg
"""
from __future__ import annotations

import html
import time
from datetime import datetime, timezone
from pathlib import Path

from .economics import economics_table
from .runs import runs_table
from .fidelity import fidelity_table
from .figures import FIGURES, FigureSpec
from .serving import serving_plan_table
from .rows import Data, UnknownMetric, command_of
from .tables import MEASURE_CMD, Table, all_tables, print_tables

MARK = {"measured": "●", "predicted": "■", "published": "★"}

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1d2b3a;color:#fff;padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px} header p{margin:2px 0;color:#c9d3dd;font-size:13px}
main{max-width:1180px;margin:0 auto;padding:8px 32px 40px}
nav{font-size:13px;margin:12px 0} nav a{margin-right:12px;color:#2b5fad;text-decoration:none}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:14px 18px;margin:16px 0}
h2{font-size:17px;margin:4px 0 10px}
figure{margin:0} figure img{max-width:100%;height:auto;display:block;margin:auto}
figcaption{font-size:13px;color:#444;margin-top:8px;line-height:1.45}
code{background:#f1f3f5;padding:1px 4px;border-radius:3px;font-size:12px}
table{border-collapse:collapse;font-size:12.5px;width:100%;margin:6px 0}
th,td{border-bottom:1px solid #e6e6e6;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f5f6f8}
.k-measured{color:#1a9641}.k-predicted{color:#2b5fad}.k-published{color:#d7301f}
th.k-measured{border-bottom:3px solid #1a9641}th.k-predicted{border-bottom:3px solid #2b5fad}
th.k-published{border-bottom:3px solid #d7301f}
.key span{display:inline-block;margin-right:18px;font-weight:600}
.na{color:#999;font-style:italic}
.src{font-size:12px;color:#555}
.note{font-size:12.5px;color:#333}
.v-reproduced{background:#e3f4e1}.v-partial{background:#fff4d6}.v-missing{background:#eeeeee}
.v-contradicted{background:#fbe0dc}
#t-fidelity td{font-size:11.5px}
"""


def _e(x) -> str:
    return html.escape(str(x))


def _varying(rows: list[dict]) -> str:
    """'hardware: a100-80gb, cs2; batch: 8-64' for the point fields that vary across rows."""
    vals: dict[str, set] = {"hardware": set()}  # first, then the point's fields by name
    for r in rows:
        point = r.get("point") or {}
        for k, v in {"hardware": r.get("hardware"), **point, **(point.get("layout") or {})}.items():
            if isinstance(v, (str, int, float)) and k not in ("suite", "published_id"):
                vals.setdefault(k, set()).add(v)
    parts = []
    for k, vs in vals.items():
        if len(vs) > 1:
            if all(isinstance(v, (int, float)) for v in vs):
                parts.append(f"{k} {min(vs):g}…{max(vs):g} ({len(vs)} values)")
            else:
                names = sorted(map(str, vs))
                more = f" … ({len(names)} values)" if len(names) > 6 else ""
                parts.append(f"{k} " + ", ".join(names[:6]) + more)
    return "; ".join(parts)


def _study_commands(data: Data, spec: FigureSpec) -> list[tuple[str, str]]:
    """(source, command) pairs that produced the figure's data: one example and what varies."""
    out = []
    for s in spec.studies:
        for source in ("measured", "predicted"):
            rows = data.get(s, source) if source == "measured" else \
                data.predicted(s) + data.predicted(s, mirrors=True)
            if rows:
                cmd = next((command_of(r) for r in rows if command_of(r)), None)
                if source == "measured":  # the command a user reruns, not a worker's argv
                    cmd = cmd if s == "streaming" and cmd else \
                        MEASURE_CMD.get(s, f"llmbench study run {s} --quick")
                if cmd:
                    vary = _varying(rows) if source == "predicted" else ""
                    out.append((source, cmd + (f"  [{len(rows)} points; varying {vary}]" if vary else "")))
    return out


def save_figure(fig, img_dir: Path, name: str) -> dict:
    import matplotlib.pyplot as plt

    img_dir.mkdir(parents=True, exist_ok=True)
    png, svg = img_dir / f"{name}.png", img_dir / f"{name}.svg"
    fig.savefig(png, dpi=110)
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
    return {"png": png, "svg": svg}


def _figure_html(spec: FigureSpec, files: dict | None, cmds, error: str | None) -> str:
    if files:
        body = (f'<figure><img src="img/{files["png"].name}" alt="{_e(spec.title)}" '
                f'loading="eager"><figcaption><b>{_e(spec.title)}.</b> {_e(spec.how_to_read)}')
    else:
        body = f'<figure><p class="na">{_e(spec.title)}: not measured / not available' + \
            (f" ({_e(error)})" if error else "") + "</p><figcaption>"
    if cmds:
        body += "<br>Data: " + "; ".join(f'<span class="k-{s}">{MARK[s]} {s}</span> <code>{_e(c)}</code>'
                                         for s, c in cmds)
    else:
        body += '<br><span class="na">No data in the database for this figure.</span>'
    if files:
        body += f' · <a href="img/{files["svg"].name}">SVG</a>'
    return body + "</figcaption></figure>"


def _table_html(t: Table) -> str:
    head = "".join(f'<th class="k-{k}">{MARK[k] + " " if k else ""}{_e(c)}</th>' if k else f"<th>{_e(c)}</th>"
                   for c, k in zip(t.columns, t.kinds))
    body = []
    for row in t.rows:
        cells = []
        for v, k in zip(row, t.kinds):
            cls = "na" if str(v).startswith("not ") else (f"k-{k}" if k else "")
            if t.id == "fidelity" and v in ("reproduced", "partial", "missing", "contradicted"):
                cls = f"v-{v}"
            cells.append(f'<td class="{cls}">{_e(v)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    if not body:
        body = [f'<tr><td class="na" colspan="{len(t.columns)}">not measured / not available</td></tr>']
    src = "".join(f"<li>{_e(s)}</li>" for s in t.sources)
    note = f'<p class="note">{_e(t.note)}</p>' if t.note else ""
    return (f'<section id="t-{t.id}"><h2>{_e(t.title)}</h2><table><thead><tr>{head}</tr></thead><tbody>'
            + "".join(body)
            + f'</tbody></table>{note}<div class="src">Sources:<ul>{src}</ul></div></section>')


def build_report(data: Data, out_dir: str | Path, *, meta: dict | None = None, log=print) -> Path:
    """Draw every figure, write out_dir/report.html; a figure that fails is shown as not available."""
    out = Path(out_dir)
    img = out / "img"
    meta = meta or {}
    sections, t0 = [], time.perf_counter()
    data.prices = meta.get("prices")  # --price overrides, read by the economics figure and table
    for spec in FIGURES:
        files, error = None, None
        try:
            fig = spec.draw(data)
            if fig is not None:
                files = save_figure(fig, img, spec.id)
        except UnknownMetric:  # a renamed metric is a bug: fail loudly (tests), never "not available"
            raise
        except Exception as e:  # noqa: BLE001 - one broken figure must not lose the report
            error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
            log(f"figure {spec.id}: {error}")
        sections.append(f'<section id="f-{spec.id}"><h2>{_e(spec.title)}</h2>'
                        f"{_figure_html(spec, files, _study_commands(data, spec), error)}</section>")
    tables = all_tables(data) + [economics_table(data, meta.get("prices")), runs_table(data),
                                 serving_plan_table(data)]
    fid = fidelity_table(data)
    page = _page(sections, [_table_html(t) for t in tables], meta, data, _table_html(fid))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    log(f"wrote {path} ({len(FIGURES)} figures, {len(tables)} tables) in {time.perf_counter() - t0:.1f} s")
    return path


def _page(fig_sections: list[str], table_sections: list[str], meta: dict, data: Data,
          fidelity_html: str = "") -> str:
    counts = {s: sum(1 for r in data.all if r.get("source") == s) for s in MARK}
    when = meta.get("date") or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = "".join(f'<a href="#f-{f.id}">{_e(f.title)}</a>' for f in FIGURES)
    timings = meta.get("timings") or []
    timing_html = ""
    if timings:
        rows = "".join(f"<tr><td>{_e(t['step'])}</td><td>{t['seconds']:.1f}</td><td>{_e(t.get('status', ''))}"
                       f"</td></tr>" for t in timings)
        cmd = _e(meta.get("command", ""))
        timing_html = (f'<section id="run"><h2>This run</h2><p class="note"><code>{cmd}</code></p>'
                       "<table><thead><tr><th>step</th><th>seconds</th><th>status</th></tr></thead>"
                       f"<tbody>{rows}</tbody></table></section>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>llmbench report</title><style>{CSS}</style></head>
<body><header><h1>llmbench: LLM training and inference on accelerators, reproduced</h1>
<p>Measured on this machine, predicted for every catalog accelerator, compared with published results.</p>
<p>Built {_e(when)} from <code>{_e(meta.get("db", "the results database"))}</code> ·
{counts["measured"]} measured, {counts["predicted"]} predicted, {counts["published"]} published rows</p>
</header><main>
<section class="key"><span class="k-measured">● measured here (green circles)</span>
<span class="k-predicted">■ predicted by llmbench (lines, squares)</span>
<span class="k-published">★ published (red stars)</span></section>
{_headline_html(meta)}
<nav><a href="#t-fidelity">Seed fidelity</a>{nav}</nav>
{fidelity_html}
{"".join(fig_sections)}
{"".join(table_sections)}
{timing_html}
</main></body></html>
"""


def _headline_html(meta: dict) -> str:
    """validate's median error (leave-one-source-out where validate reports it) for the header."""
    h = meta.get("headline") or {}
    if h.get("median_abs_error") is None:
        return ""
    return (f'<p class="note">Predicted against published (<code>llmbench validate</code>): median '
            f'absolute error {h["median_abs_error"]:.1%} ({_e(h.get("kind", ""))}).</p>')


def report(db, out_dir: str | Path, *, meta: dict | None = None, log=print, console=None,
           extra_rows: list[dict] | None = None) -> dict:
    """Tables in the terminal and DIR/report.html from whatever `db` holds (plus `extra_rows`:
    predictions made for this report and not stored)."""
    data = Data.from_db(db)
    for r in extra_rows or []:
        data.add(r)
    print_tables(all_tables(data), console)
    path = build_report(data, out_dir, meta=meta, log=log)
    counts = {s: sum(1 for r in data.all if r.get("source") == s)
              for s in ("measured", "predicted", "published")}
    return {"report": str(path), "rows": counts,
            "images": sorted(p.name for p in (Path(out_dir) / "img").glob("*.png"))}
