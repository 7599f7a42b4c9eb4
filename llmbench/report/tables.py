"""The report's tables as plain data (`Table`), printed with rich in the terminal and as HTML in the
report. Every table names its sources: the reference of each published value, the command of each
measured or predicted one.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field

from . import style
from .rows import (Data, UnknownMetric, ceilings_of, command_of, devices_of, field, metric, ref_id,
                   reference_of, value)

NA = "not available"
TERMINAL_SKIP = ("assumption",)
#: studies whose measured rows the summary table lists: the ceilings, the measured studies of
#: studies/specs (those present in the database), and the weight-streaming run
MEASURE_CMD = {"ceilings": "llmbench measure ceilings --json",
               "streaming": "llmbench stream compare --json",
               "sparse-loss": "python -m llmbench.studies.sparse_loss --quick"}


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
    for s in measured_studies(data):
        rows = data.get(s, "measured", status=None)
        okr = [r for r in rows if r.get("status", "ok") == "ok"]
        other = {}
        for r in rows:
            if r.get("status", "ok") != "ok":
                other[r["status"]] = other.get(r["status"], 0) + 1
        # the command a user reruns (a shared point's own argv names whichever study ran it first)
        cmd = next((command_of(r) for r in rows if command_of(r)), None) if s == "streaming" else None
        cmd = cmd or MEASURE_CMD.get(s, f"llmbench study run {s} --quick")
        t.rows.append([s, str(len(okr)) if rows else "not measured",
                       ", ".join(f"{n} {k}" for k, n in other.items()) or "-", _headline(s, okr), cmd])
    t.sources = ["this machine; environment (torch, CPU, threads, git commit, date) in each DB row"]
    return t


def _headline(study: str, rows: list[dict]) -> str:
    if not rows:
        return "-"
    if study == "ceilings":
        peaks, bw = ceilings_of(rows[-1])
        parts = [f"GEMM {dt} {v / 1e12:.3g} TFLOP/s" for dt, v in peaks.items()]
        if bw:
            parts.append(f"copy {bw / 1e9:.3g} GB/s")
        return ", ".join(parts) or "-"
    if study == "streaming":
        r = rows[-1]
        return (f"resident {fmt(metric(r, 'resident_tokens_per_s'))}, "
                f"streamed {fmt(metric(r, 'streamed_tokens_per_s'))} tokens/s (ratio {fmt(metric(r, 'ratio'))})")
    if study == "sparse-loss":
        ends = {(r.get("point") or {}).get("phase", "") + f" s={(r.get('point') or {}).get('sparsity', 0):g}":
                (value(r, "loss_curve") or [None])[-1] for r in rows}
        return "final loss " + ", ".join(f"{k} {fmt(v)}" for k, v in sorted(ends.items()))
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
        t.rows.append([ref_id(r) or "-", r.get("hardware") or "-", r.get("model") or "-",
                       value(r, "metric") or "-", value(r, "published_text") or fmt(metric(r, "published")),
                       fmt(metric(r, "predicted")) if r.get("status", "ok") == "ok"
                       else (r.get("error") or NA)[:60],
                       pct(metric(r, "rel_error")), value(r, "assumption") or "-",
                       value(r, "reference") or reference_of(r) or "published.csv"])
    errs = [abs(metric(r, "rel_error")) for r in rows if metric(r, "rel_error") is not None]
    if errs:
        errs.sort()
        t.note = (f"{len(errs)} rows compared: median |error| {errs[len(errs) // 2] * 100:.1f}%, "
                  f"max {errs[-1] * 100:.1f}%, within 25%: {sum(e <= 0.25 for e in errs)}/{len(errs)}.")
    t.sources = ["published: llmbench/reference/published.csv (source column per row)",
                 "predicted: llmbench validate --json (llmbench.perfmodel.validate.run)"]
    return t


def trends_table(data: Data) -> Table:
    t = Table("trends", "Published trends checked against the predictions",
              ["id", "claim", "predicted", "detail", "source"], kinds=["", "published", "predicted", "", ""])
    for r in data.get("validation-trends", "predicted"):
        t.rows.append([ref_id(r), value(r, "claim") or "-", "pass" if value(r, "passed") else "FAIL",
                       value(r, "detail") or "-", value(r, "reference") or "published.csv"])
    t.sources = ["published: llmbench/reference/published.csv (trend rows)",
                 "predicted: llmbench validate --json"]
    return t


def scaling_table(data: Data) -> Table:
    t = Table("scaling", "GPT-2 XL data-parallel scaling efficiency at the published device counts",
              ["system", "devices", "published", "predicted", "source"],
              kinds=["", "", "published", "predicted", ""])
    pred = data.predicted("dp-scaling")
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
    rows = data.predicted("time-to-train")
    pubs = {m: r for r in data.published(hardware="cs2") for m in ("epoch_time_h", "epoch_time_s")
            if metric(r, m) is not None}
    for hw in sorted({r.get("hardware") for r in rows}, key=lambda h: style.hw_label(h)):
        def val(ds, div):
            r = next((r for r in rows if r.get("hardware") == hw
                      and (r.get("environment") or {}).get("dataset") == ds), None)
            v = metric(r, "epoch_time_s") if r else None
            fits = value(r, "fits") if r else True
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
    """Table IV's ratios, predicted as llmbench validate predicts them (one source: the validation
    rows, with their assumptions), and whether the sweep says those configurations fit."""
    t = Table("genslm", "GenSLM 13B comparisons (arXiv:2310.04607 Table IV)",
              ["comparison", "published", "predicted", "how predicted (llmbench validate)", "source"],
              kinds=["", "published", "predicted", "", ""])
    val = {ref_id(r): r for r in data.get("validation", "predicted")}
    names = {"per_device_speedup": "SN30 vs A100, per device", "speedup": "one CS-2 vs 8× A100"}
    for r in data.published():
        for name, label in names.items():
            if metric(r, name) is not None and "genslm" in (r.get("model") or ""):
                v = val.get(ref_id(r))
                t.rows.append([label, fmt(metric(r, name)), fmt(metric(v, "predicted")) if v else NA,
                               (value(v, "assumption") or "-") if v else NA, reference_of(r)])
    t.sources = ["predicted: llmbench validate --json (rows emani-genslm-sn30, emani-genslm-cs2)"]
    t.note = ("The seed's 5.7x and 19x are far above what the model gives for the same systems; the "
              "seed-fidelity table carries the verdicts (rows 002-36, 002-37).")
    return t


def sparsity_table(data: Data) -> Table:
    from .plotkit import speedups

    t = Table("sparsity", "Speed-up of 90% weight sparsity on CS-2", ["model", "published", "predicted CS-2",
              "predicted A100 80GB", "source"], kinds=["", "published", "predicted", "predicted", ""])
    sp = speedups(data.predicted("sparsity"), 0.9)
    for r in data.published():
        v = value(r, "s0.9_over_dense")
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
    pubs = {}
    for r in data.published():
        for name in ("decode_tokens_per_s_per_seq", "devices_needed"):
            if metric(r, name) is not None:
                pubs.setdefault((r.get("model"), r.get("hardware")), []).append(f"{name} {fmt(metric(r, name))}")
    for r in data.predicted("llm-inference"):
        p = pubs.get((r.get("model"), r.get("hardware")))
        pub = "; ".join(p) if p else "-"
        t.rows.append([r.get("model"), style.hw_label(r.get("hardware")), fmt(devices_of(r)),
                       fmt(metric(r, "decode_tokens_per_s_per_seq")), fmt(metric(r, "time_to_first_token_s")),
                       str(value(r, "bound") or "-"), pub,
                       _inference_source(data, r) if p else "llmbench predict infer (command in the figure caption)"])
    t.sources = ["published: Cerebras blog 2024-08-27; The Register, Hot Chips 2024"]
    return t


def _inference_source(data: Data, r: dict) -> str:
    refs = [reference_of(p) for p in data.published(model=r.get("model"), hardware=r.get("hardware"))
            if metric(p, "decode_tokens_per_s_per_seq") is not None or metric(p, "devices_needed") is not None]
    return "; ".join(dict.fromkeys(x for x in refs if x)) or "published.csv"


def measured_studies(data: Data) -> list[str]:
    """Studies with measured rows in `data` (the ceilings first, the streaming run last), or the
    list a full reproduce measures when nothing is measured yet."""
    have = [s for s, rows in data.by_study.items() if any(r.get("source") == "measured" for r in rows)]
    middle = sorted(s for s in have if s not in MEASURE_CMD)
    return ["ceilings"] + middle + ["streaming"]


TABLES = ("measured_summary", "validation_table", "trends_table", "scaling_table", "sparsity_table",
          "genslm_table", "time_to_train_table", "inference_table")


def all_tables(data: Data) -> list[Table]:
    """Every table; one that fails is shown as not available instead of losing the report."""
    out = []
    for name in TABLES:
        try:
            out.append(globals()[name](data))
        except UnknownMetric:  # a renamed metric is a bug: fail loudly (tests), never "not available"
            raise
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
