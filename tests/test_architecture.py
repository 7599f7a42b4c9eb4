"""The floors of llmbench and who imports whom (docs/architecture.md), checked on the source: every
import statement, at module level or inside a function, read with `ast` (nothing is imported).

    .venv/bin/python -m pytest -q tests/test_architecture.py
    .venv/bin/python tests/test_architecture.py      # prints the table docs/architecture.md holds

Rules: no module imports a floor above its own; report/ imports no engine, no studies/ and no
subprocess; an area's cli.py imports llmbench/_cliutil.py, never llmbench/cli.py; no import circle,
between areas or between modules (a deferred import inside a function counts).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "llmbench"
DOC = ROOT / "docs" / "architecture.md"

#: area -> floor; a module may import its own floor and the floors below it
FLOORS = {
    "llmbench": 0, "errors": 0, "units": 0, "_toml": 0, "_json": 0, "_files": 0,    # the ground: helpers, no llmbench import
    "published": 0,                                        # ... and the one reader of the published tables
    "models": 1, "hardware": 1, "data": 1,                 # what runs and where: pure data, counting
    "_xp": 0,                                              # the array backend (Scalar / numpy)
    "point": 2, "layouts": 2,                              # the vocabulary: Workload, METRICS, layouts
    "grid": 2, "footprint": 2,                             # a Workload as arrays; what a device holds
    "results": 3,                                          # the store of every result
    "queueing": 3,                                         # requests over engine steps: traces, simulator, metrics
    "perfmodel": 4, "measure": 4, "streaming": 4,          # the three engines
    "serve": 4,                                            # serving: deployments, the planner (queueing's simulator on perfmodel's step)
    "report": 5,                                           # draws what results/ holds
    "studies": 6,                                          # every plan: specs, predict, reproduce
    "cli": 7, "_cliutil": 7, "__main__": 7,                # the roof: one CLI front end
    "api": 7,                                              # ... and its Python twin (docs/api.md)
}
ROOF = 7
ENGINES = ("perfmodel", "measure", "streaming", "serve")


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted(PKG.rglob("*.py"))}


def imports(path: Path, mods, text: str | None = None) -> set[str]:
    """Every module (llmbench's or not) an import statement of `path` (or of `text`) names."""
    name = _name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text() if text is None else text, str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            out.add(target)
            out |= {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods}
    return out


def report_violations(sources: dict[Path, str | None]) -> list[str]:
    """What report/ modules import that they must not: an engine, studies/, subprocess."""
    mods = modules()
    bad = []
    for path, text in sources.items():
        for d in imports(path, mods, text):
            top = d.split(".")
            if d == "subprocess" or (top[0] == "llmbench" and len(top) > 1 and top[1] in ENGINES + ("studies",)):
                bad.append(f"{_name(path)} imports {d}")
    return bad


def graph() -> dict[str, set[str]]:
    """llmbench module -> the llmbench modules it imports."""
    mods = modules()
    return {m: {d for d in imports(p, mods) if d in mods and d != m} for m, p in mods.items()}


def area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "llmbench"


def is_area_cli(module: str) -> bool:
    return module.endswith(".cli") and module.count(".") == 2


def floor(module: str) -> int:
    return ROOF if is_area_cli(module) else FLOORS[area(module)]


def area_graph() -> dict[str, set[str]]:
    """area -> areas its modules import (the area CLIs counted as the roof's, apart)."""
    out: dict[str, set[str]] = {}
    for m, deps in graph().items():
        src = f"{area(m)}/cli.py" if is_area_cli(m) else area(m)
        out.setdefault(src, set()).update(area(d) for d in deps if area(d) != area(m))
    return out


def table() -> str:
    """The who-imports-whom table of docs/architecture.md (floors from the top); an area's cli.py
    (the roof's part of the area) in its own column."""
    g = area_graph()
    rows = ["| floor | area | its modules import | its cli.py imports |", "| ---: | --- | --- | --- |"]
    for a in sorted((a for a in g if "/" not in a), key=lambda a: (-FLOORS[a], a)):
        cli = g.get(f"{a}/cli.py")
        rows.append(f"| {FLOORS[a]} | {a} | {', '.join(sorted(g[a])) or '-'} | "
                    f"{', '.join(sorted(cli)) if cli is not None else ''} |")
    return "\n".join(rows)


def circles(g: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in list(g):
        if v not in index:
            visit(v)
    return out


# ---------------------------------------------------------------- the tests

def test_every_area_has_a_floor():
    assert {area(m) for m in modules()} <= set(FLOORS)


def test_no_upward_import():
    up = [f"{m} ({floor(m)}) imports {d} ({floor(d)})" for m, deps in graph().items() for d in deps
          if floor(d) > floor(m) and not (is_area_cli(m) and d == "llmbench._cliutil")]
    assert not up, "\n".join(up)


def test_report_only_draws():
    sources = {p: None for m, p in modules().items() if area(m) == "report"}
    assert len(sources) >= 9 and report_violations(sources) == []


def test_area_clis_use_cliutil_never_the_front_end():
    g = graph()
    clis = [m for m in g if is_area_cli(m)]
    assert len(clis) >= 8
    assert not [m for m in g if "llmbench.cli" in g[m] and m not in ("llmbench.__main__",)]
    assert all("llmbench._cliutil" in g[m] for m in clis), [m for m in clis if "llmbench._cliutil" not in g[m]]


def test_no_circle_between_areas():
    g = {a: {d for d in deps if "/" not in d} for a, deps in area_graph().items() if "/" not in a}
    assert circles(g) == []


def test_no_module_circle():
    """None at all: `from . import x` in a package module counts as importing the package, and an
    import inside a function counts like one at the top."""
    assert circles(graph()) == []


def test_the_table_in_docs_is_the_code():
    text = DOC.read_text()
    block = re.search(r"<!-- imports:begin -->\n(.*?)\n<!-- imports:end -->", text, re.S)
    assert block, "docs/architecture.md lost its generated imports table"
    assert block.group(1).strip() == table(), "regenerate: python tests/test_architecture.py"


def test_the_checker_sees_a_violation():
    """The rules can fail: a report module importing perfmodel (in a function) or subprocess, an
    upward import, a circle."""
    probe = PKG / "report" / "probe.py"
    src = "import subprocess\ndef f():\n    from llmbench.perfmodel.predict import predict\n"
    bad = report_violations({probe: src})
    assert sorted(bad) == ["llmbench.report.probe imports llmbench.perfmodel.predict",
                           "llmbench.report.probe imports subprocess"]
    assert floor("llmbench.results.store") < floor("llmbench.studies.runner")  # results -> studies is up
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]



#: the one module that opens llmbench/reference/published*.csv (issue 19: one reader, one parser)
PUBLISHED_READER = "llmbench.published"
#: calls that open or read a file, or make the path one does
OPENERS = ("open", "Path", "read_small_text", "read_text", "read_bytes", "DictReader", "reader", "loadtxt",
           "read_csv", "genfromtxt")


def _names_published_table(node) -> bool:
    """A literal 'published*.csv' or a name spelt like the reader's PUBLISHED_* paths."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.search(r"published\w*\.csv$", n.value):
            return True
        if (isinstance(n, ast.Name) and "PUBLISHED" in n.id) or (isinstance(n, ast.Attribute) and "PUBLISHED" in n.attr):
            return True
    return False


def published_table_opens(sources: dict[Path, str | None]) -> list[str]:
    """Modules but the reader that build a path to a published table (`x / "published.csv"`) or
    pass one to a call that opens or reads a file."""
    bad = []
    for path, text in sources.items():
        name = _name(path)
        for node in ast.walk(ast.parse(path.read_text() if text is None else text, str(path))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and \
                    any(isinstance(x, ast.Constant) and _names_published_table(x) for x in (node.left, node.right)):
                bad.append(f"{name} line {node.lineno}: a path to a published table")
            elif isinstance(node, ast.Call) and _call_name(node.func) in OPENERS and \
                    any(_names_published_table(a) for a in [*node.args, *(k.value for k in node.keywords)]):
                bad.append(f"{name} line {node.lineno}: {_call_name(node.func)}() of a published table")
    return bad


def _call_name(func) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def test_one_module_opens_the_published_tables():
    mods = modules()
    assert published_table_opens({p: None for m, p in mods.items() if m != PUBLISHED_READER}) == []
    assert published_table_opens({mods[PUBLISHED_READER]: None})  # the checker sees the real reader
    probe = PKG / "perfmodel" / "probe.py"  # perfmodel/validate.py's own reader before issue 19
    src = ('import csv\nfrom pathlib import Path\n'
           'PUBLISHED = Path(__file__).resolve().parents[1] / "reference" / "published_v2.csv"\n'
           'def rows():\n    with open(PUBLISHED, newline="") as f:\n        return list(csv.DictReader(f))\n'
           'def more(root):\n    return (root / "published.csv").read_text()\n')
    assert published_table_opens({probe: src}) == [
        "llmbench.perfmodel.probe line 3: a path to a published table",
        "llmbench.perfmodel.probe line 5: open() of a published table",
        "llmbench.perfmodel.probe line 8: a path to a published table"]


#: the per-model memory formulas of models/counting: only footprint.py turns them into bytes per
#: device (docs/architecture.md "Memory"); an engine asks footprint
MEMORY_FORMULAS = ("activation_bytes_per_layer", "training_memory_bytes", "kv_cache_bytes",
                   "kv_cache_bytes_per_token")


def _is_counting(node) -> bool:
    """`counting` or `<...>.counting` (a module attribute, not a metric field of that name)."""
    return (isinstance(node, ast.Name) and node.id == "counting") or \
        (isinstance(node, ast.Attribute) and node.attr == "counting")


def memory_formula_uses(sources: dict[Path, str | None]) -> list[str]:
    """Modules outside models/ and footprint.py that import or call a memory formula."""
    bad = []
    for path, text in sources.items():
        name = _name(path)
        if name == "llmbench.footprint" or area(name) == "models":
            continue
        for node in ast.walk(ast.parse(path.read_text() if text is None else text, str(path))):
            used = ([a.name for a in node.names] if isinstance(node, ast.ImportFrom)
                    else [node.attr] if isinstance(node, ast.Attribute) and _is_counting(node.value) else [])
            bad += [f"{name} uses {u}" for u in used if u in MEMORY_FORMULAS]
    return bad


def test_only_footprint_turns_counts_into_memory():
    assert memory_formula_uses({p: None for p in modules().values()}) == []
    probe = PKG / "streaming" / "probe.py"
    src = ("from llmbench.models.counting import kv_cache_bytes_per_token\n"
           "def f(spec):\n    from llmbench.models import counting\n"
           "    return counting.activation_bytes_per_layer(spec, 1, 1)\n")
    assert memory_formula_uses({probe: src}) == ["llmbench.streaming.probe uses kv_cache_bytes_per_token",
                                                 "llmbench.streaming.probe uses activation_bytes_per_layer"]


if __name__ == "__main__":
    print(table())
