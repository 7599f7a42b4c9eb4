"""The seed-fidelity table as Markdown: `llmbench reproduce` writes it to DIR/fidelity.md and, with
--docs in a source checkout, to docs/results/fidelity.md — the file README.md and docs/reproduce.md quote their
counts from (tests/test_fidelity_table.py fails when a quoted count differs from a fresh run).

    from llmbench.studies.fidelity_md import fidelity_markdown, write_fidelity_md
    write_fidelity_md(fid, out_dir, docs=True)     # -> the paths written
"""
from __future__ import annotations

from pathlib import Path

from llmbench.studies.fidelity import VERDICTS, counts_line

#: docs/results/ of a source checkout (absent from an installed package: nothing is written there)
DOCS_RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
SEEDS = {"000": "Zhang et al. (CS-2 BERT/GPT-3)", "001": "CS-2 / MemoryX / SwarmX review",
         "002": "Emani et al. (six accelerators)", "004": "Cerebras inference"}


def _cell(v) -> str:
    return str("" if v is None else v).replace("|", "\\|").replace("\n", " ")


def fidelity_markdown(fid: dict, command: str = "llmbench reproduce --quick --no-measure") -> str:
    c = fid["counts"]
    head = fid.get("headline") or {}
    lines = ["# Seed fidelity (generated: do not edit)", "",
             f"Written by `{command}` (studies/fidelity_md.py); the classes are defined in "
             "studies/fidelity.py and on the report page.", "",
             f"**{counts_line(c)}**", ""]
    if head.get("median_abs_error") is not None:
        lines += [f"validate, {head['kind']}: median |error| {head['median_abs_error']:.1%}", ""]
    lines += ["| seed | claims | " + " | ".join(VERDICTS) + " |", "|---|---:|" + "---:|" * len(VERDICTS)]
    for seed, sc in sorted(c["by_seed"].items()):
        lines.append(f"| {seed} {SEEDS.get(seed, '')} | {sum(sc.values())} | " + " | ".join(str(sc[v]) for v in VERDICTS) + " |")
    lines.append(f"| **total** | **{c['total']}** | " + " | ".join(f"**{c[v]}**" for v in VERDICTS) + " |")
    cols = ("id", "where", "claim", "published", "llmbench", "source", "verdict", "tolerance", "mechanism")
    lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(k)) for k in cols) + " |" for r in fid["rows"]]
    return "\n".join(lines) + "\n"


def write_fidelity_md(fid: dict, out_dir: str | Path, command: str = "llmbench reproduce --quick --no-measure",
                      *, docs: bool = False) -> list[Path]:
    """DIR/fidelity.md, and (docs=True: `reproduce --docs`) docs/results/fidelity.md of a source checkout."""
    text = fidelity_markdown(fid, command)
    paths = [Path(out_dir) / "fidelity.md"]
    if docs and DOCS_RESULTS.is_dir():
        paths.append(DOCS_RESULTS / "fidelity.md")
    for p in paths:
        p.write_text(text)
    return paths
