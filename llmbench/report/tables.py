"""The report's tables as plain data (`Table`), printed with rich in the terminal and as HTML in the
report. Every table names its sources: the reference of each published value, the command of each
measured or predicted one.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field

from . import style
from .rows import Data, command_of, field, metric, reference_of

NA = "not available"
TERMINAL_SKIP = ("assumption",)
MEASURED_STUDIES = ("ceilings", "transformer-block", "gpt2-seq-length", "gas", "sparsity", "dp-scaling",
                    "bert-train-batch", "bert-infer-batch", "genslm", "streaming")


@dataclass
class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[list] = dc_field(default_factory=list)
    sources: list[str] = dc_field(default_factory=list)
    """citations and commands behind the numbers"""
    kinds: list[str] = dc_field(default_factory=list)
    """per column: measured | predicted | published | '' (colours the header and cells)"""
    note: str = ""

    def __post_init__(self):
        if not self.kinds:
            self.kinds = [""] * len(self.columns)


def fmt(v, digits: int = 3) -> str:
    if v is None:
        return NA
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return str(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e5 or a < 1e-3:
        return f"{v:.{digits - 1}e}"
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def pct(v) -> str:
    return NA if v is None else f"{v * 100:+.1f}%"


def measured_summary(data: Data) -> Table:
    t = Table("measured", "Measured on this machine", ["study", "points ok", "other", "headline", "command"],
              kinds=["", "measured", "", "measured", ""])
    for s in MEASURED_STUDIES:
        rows = data.get(s, "measured", status=None)
        okr = [r for r in rows if r.get("status", "ok") == "ok"]
        other = {}
        for r in rows:
            if r.get("status", "ok") != "ok":
                other[r["status"]] = other.get(r["status"], 0) + 1
        # the command a user reruns (a shared point's own argv names whichever study ran it first)
        cmd = next((command_of(r) for r in rows if command_of(r)), None) if s == "streaming" else None
        cmd = cmd or {"ceilings": "llmbench measure ceilings --json",
                      "streaming": "llmbench stream compare --json"}.get(s, f"llmbench study run {s} --quick")
        t.rows.append([s, str(len(okr)) if rows else "not measured",
                       ", ".join(f"{n} {k}" for k, n in other.items()) or "-", _headline(s, okr), cmd])
    t.sources = ["this machine; environment (torch, CPU, threads, git commit, date) in each DB row"]
    return t


def _headline(study: str, rows: list[dict]) -> str:
    if not rows:
        return "-"
    if study == "ceilings":
        from .reproduce import flat_ceilings

        m = {**(rows[-1].get("metrics") or {}), **flat_ceilings(rows[-1].get("metrics") or {})}
        parts = [f"GEMM {k[5:-12]} {v / 1e12:.3g} TFLOP/s" for k, v in m.items()
                 if k.startswith("gemm_") and k.endswith("_flops_per_s")]
        if m.get("copy_bandwidth_bytes_per_s"):
            parts.append(f"copy {m['copy_bandwidth_bytes_per_s'] / 1e9:.3g} GB/s")
        return ", ".join(parts) or "-"
    if study == "streaming":
        m = rows[-1].get("metrics") or {}
        return (f"resident {fmt(m.get('resident_tokens_per_s'))}, "
                f"streamed {fmt(m.get('streamed_tokens_per_s'))} tokens/s (ratio {fmt(m.get('ratio'))})")
    for name, unit, scale in (("fwd_bwd_tflops", "TFLOP/s", 1), ("scaling_efficiency", "efficiency", 1),
                              ("latency_s_p50", "ms p50", 1e3), ("tokens_per_s", "tokens/s", 1),
                              ("samples_per_s", "samples/s", 1), ("achieved_tflops", "TFLOP/s", 1)):
        vals = [metric(r, name) for r in rows if metric(r, name) is not None]
        if vals:
            lo, hi = min(vals) * scale, max(vals) * scale
            return f"{fmt(lo)}–{fmt(hi)} {unit}" if lo != hi else f"{fmt(lo)} {unit}"
    return "-"


def validation_table(data: Data) -> Table:
    t = Table("validation", "Predicted against published (every numeric row of published.csv)",
              ["id", "system", "model", "metric", "published", "predicted", "error", "assumption", "source"],
              kinds=["", "", "", "", "published", "predicted", "", "", ""])
    rows = data.get("validation", "predicted", status=None)
    for r in rows:
        m = r.get("metrics") or {}
        t.rows.append([field(r, "published_id") or "-", r.get("hardware") or "-", r.get("model") or "-",
                       m.get("metric", "-"), m.get("published_text") or fmt(metric(r, "published")),
                       fmt(metric(r, "predicted")) if r.get("status", "ok") == "ok"
                       else (r.get("error") or NA)[:60],
                       pct(metric(r, "rel_error")), m.get("assumption") or "-",
                       m.get("reference") or reference_of(r) or "published.csv"])
    errs = [abs(metric(r, "rel_error")) for r in rows if metric(r, "rel_error") is not None]
    if errs:
        errs.sort()
        t.note = (f"{len(errs)} rows compared: median |error| {errs[len(errs) // 2] * 100:.1f}%, "
                  f"max {errs[-1] * 100:.1f}%, within 25%: {sum(e <= 0.25 for e in errs)}/{len(errs)}.")
    t.sources = ["published: llmbench/reference/published.csv (source column per row)",
                 "predicted: llmbench validate --json"]
    return t


def trends_table(data: Data) -> Table:
    t = Table("trends", "Published trends checked against the predictions",
              ["id", "claim", "predicted", "detail", "source"], kinds=["", "published", "predicted", "", ""])
    for r in data.get("validation-trends", "predicted"):
        m = r.get("metrics") or {}
        t.rows.append([field(r, "published_id"), m.get("claim", "-"), "pass" if m.get("passed") else "FAIL",
                       m.get("detail", "-"), m.get("reference") or "published.csv"])
    t.sources = ["published: llmbench/reference/published.csv (trend rows)",
                 "predicted: llmbench validate --json"]
    return t


def scaling_table(data: Data) -> Table:
    t = Table("scaling", "GPT-2 XL data-parallel scaling efficiency at the published device counts",
              ["system", "devices", "published", "predicted", "source"],
              kinds=["", "", "published", "predicted", ""])
    pred = data.get("gpt2xl-scaling", "predicted")
    for r in data.published():
        eff = metric(r, "scaling_efficiency")
        if eff is None:
            continue
        hw, n = r.get("hardware"), field(r, "devices")
        mine = {field(p, "devices"): metric(p, "tokens_per_s") for p in pred if p.get("hardware") == hw}
        pe = mine[n] / (n * mine[1]) if mine.get(1) and mine.get(n) else None
        t.rows.append([style.hw_label(hw), str(n), fmt(eff), fmt(pe), reference_of(r) or "published.csv"])
    t.note = ("Predicted at 16 sequences per device (weak scaling); the validation table predicts each "
              "row with the paper's own set-up (e.g. A100: micro-batch 1, GAS 4, ZeRO-1).")
    t.sources = ["predicted: llmbench predict train --model gpt2-xl --batch 16N --seq 1024 --devices N",
                 "measured here: llmbench study run dp-scaling --quick"]
    return t


def time_to_train_table(data: Data) -> Table:
    t = Table("time_to_train", "Time to train one epoch (one device)",
              ["hardware", "Pile · GPT-3 20B (h)", "SST-2 · BERT-large (s)", "published (CS-2)", "source"],
              kinds=["", "predicted", "predicted", "published", ""])
    rows = data.get("time-to-train", "predicted")
    pubs = {m: r for r in data.published(hardware="cs2") for m in (r.get("metrics") or {})
            if m in ("epoch_time_h", "epoch_time_s")}
    for hw in sorted({r.get("hardware") for r in rows}, key=lambda h: style.hw_label(h)):
        def val(ds, div):
            r = next((r for r in rows if r.get("hardware") == hw and field(r, "dataset") == ds), None)
            v = metric(r, "epoch_time_s", "time_s") if r else None
            fits = (r.get("metrics") or {}).get("fits", True) if r else True
            return fmt(v / div if v else None) + ("" if fits is not False else " (does not fit)")
        pub = ""
        if hw == "cs2" and pubs:
            pub = "; ".join(f"{fmt(metric(r, m))} {'h' if m.endswith('_h') else 's'} ({r.get('model')})"
                            for m, r in pubs.items())
        t.rows.append([style.hw_label(hw), val("pile", 3600.0), val("sst2", 1.0), pub or "-",
                       "arXiv:2409.00287" if pub else "llmbench project"])
    t.note = "(does not fit): the point needs more memory than one device has; the time assumes it did."
    t.sources = ["predicted: llmbench project --model gpt3-20b --dataset pile --batch 256 --seq 2048; "
                 "llmbench project --model bert-large --dataset sst2 --batch 8192 --seq 128",
                 "published: arXiv:2409.00287 (CS-2 projections)"]
    return t


def genslm_table(data: Data) -> Table:
    t = Table("genslm", "GenSLM 13B comparisons (arXiv:2310.04607 Table IV)",
              ["comparison", "published", "predicted", "how predicted", "source"],
              kinds=["", "published", "predicted", "", ""])
    pred = data.predicted("genslm", model="genslm-13b")

    def tps(hw, n):
        r = next((r for r in pred if r.get("hardware") == hw and field(r, "devices") == n), None)
        return metric(r, "tokens_per_s") if r else None

    a8, s8, c1 = tps("a100-40gb", 8), tps("sn30", 8), tps("cs2", 1)
    for r in data.published():
        m = r.get("metrics") or {}
        if "per_device_speedup" in m:
            t.rows.append(["SN30 vs A100, per device (8 each)", fmt(metric(r, "per_device_speedup")),
                           fmt(s8 / a8 if s8 and a8 else None), "tokens/s of 8 SN30 / of 8 A100",
                           reference_of(r)])
        elif "speedup" in m and "genslm" in (r.get("model") or ""):
            t.rows.append(["one CS-2 vs 8× A100", fmt(metric(r, "speedup")),
                           fmt(c1 / a8 if c1 and a8 else None), "tokens/s of 1 CS-2 / of 8 A100",
                           reference_of(r)])
    t.sources = ["predicted: llmbench predict train --model genslm-13b --batch 32 --seq 1024 --devices 1|8"]
    return t


def sparsity_table(data: Data) -> Table:
    from .plotkit import speedups

    t = Table("sparsity", "Speed-up of 90% weight sparsity on CS-2", ["model", "published", "predicted CS-2",
              "predicted A100 80GB", "source"], kinds=["", "published", "predicted", "predicted", ""])
    sp = speedups(data.predicted("sparsity"), 0.9)
    for r in data.published():
        v = (r.get("metrics") or {}).get("s0.9_over_dense")
        if v is not None:
            m = r.get("model")
            t.rows.append([m, fmt(v), fmt(sp.get(("cs2", m))), fmt(sp.get(("a100-80gb", m))),
                           reference_of(r)])
    t.sources = ["predicted: llmbench predict train --model M --hardware H --batch 112 --sparsity 0|0.9 "
                 "(batch 112 as llmbench validate assumes)"]
    return t


def inference_table(data: Data) -> Table:
    t = Table("llm_inference", "LLM inference at batch 1 (prompt 2048, 256 new tokens)",
              ["model", "hardware", "devices", "tokens/s per user", "TTFT (s)", "bound", "published",
               "source"], kinds=["", "", "predicted", "predicted", "predicted", "", "published", ""])
    pubs = {(r.get("model"), r.get("hardware")): r for r in data.published()
            if set(r.get("metrics") or {}) & {"decode_tokens_per_s_per_seq", "devices_needed"}}
    for r in data.get("llm-inference", "predicted"):
        p = pubs.get((r.get("model"), r.get("hardware")))
        pub = "; ".join(f"{k} {fmt(v)}" for k, v in (p.get("metrics") or {}).items()) if p else "-"
        t.rows.append([r.get("model"), style.hw_label(r.get("hardware")), fmt(metric(r, "devices")),
                       fmt(metric(r, "decode_tokens_per_s_per_seq")), fmt(metric(r, "time_to_first_token_s")),
                       str((r.get("metrics") or {}).get("bound", "-")), pub,
                       reference_of(p) if p else "llmbench predict infer (command in the figure caption)"])
    t.sources = ["published: Cerebras blog 2024-08-27; The Register, Hot Chips 2024"]
    return t


TABLES = ("measured_summary", "validation_table", "trends_table", "scaling_table", "sparsity_table",
          "genslm_table", "time_to_train_table", "inference_table")


def all_tables(data: Data) -> list[Table]:
    """Every table; one that fails is shown as not available instead of losing the report."""
    out = []
    for name in TABLES:
        try:
            out.append(globals()[name](data))
        except Exception as e:  # noqa: BLE001
            out.append(Table(name, name.replace("_", " "), ["status"],
                             note=f"not available ({type(e).__name__}: {e})"[:200]))
    return out


def print_tables(tables: list[Table], console=None) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable

    if console is None:
        console = Console()
        console = console if console.is_terminal else Console(width=140)  # pipes, logs, docs
    colour = {"measured": "green", "predicted": "blue", "published": "red"}
    for tb in tables:
        rt = RichTable(title=tb.title, title_justify="left", caption=" · ".join(tb.sources)[:300] or None,
                       caption_justify="left")
        keep = [i for i, c in enumerate(tb.columns) if c not in TERMINAL_SKIP]  # long prose: HTML only
        for i in keep:
            col, kind = tb.columns[i], tb.kinds[i]
            rt.add_column(col, style=colour.get(kind), overflow="fold",
                          max_width=40 if col in ("source", "command", "detail") else None,
                          no_wrap=col == "id")
        for row in tb.rows:
            rt.add_row(*[str(row[i]) for i in keep])
        if not tb.rows:
            rt.add_row(*(["not available"] + [""] * (len(keep) - 1)))
        console.print(rt)
        if tb.note:
            console.print(tb.note)
