"""The one CLI front end: light start-up, defaults from the dataclasses, one-line errors."""
import json
import subprocess
import sys
from dataclasses import MISSING
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _py(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_prediction_imports_no_heavy_package():
    r = _py("import sys; from llmbench.cli import main; "
            "main(['predict', 'train', '--model', 'gpt2-small', '--hardware', 'a100-80gb', "
            "'--batch', '8', '--seq', '1024', '--json']); "
            "print(sorted(m for m in ('typer', 'torch', 'numpy', 'rich', 'matplotlib', 'yaml') if m in sys.modules), file=sys.stderr)")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "[]"
    assert json.loads(r.stdout)["tokens_per_s"] > 0


def test_every_command_answers_help():
    from llmbench.cli import build

    parser = build()
    todo = [((), parser)]
    seen = 0
    while todo:
        path, p = todo.pop()
        seen += 1
        for action in p._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                todo += [((*path, name), sub) for name, sub in action.choices.items()]
        assert p.format_help()
    assert seen > 20


def test_cli_defaults_are_the_dataclass_defaults():
    """Each option built from a dataclass field has that field's default, unless the command
    declares its own (measure's per-suite model and sizes)."""
    from llmbench._cliutil import field_options
    from llmbench.cli import build
    from llmbench.measure.options import RunOptions
    from llmbench.point import Workload

    opts = {**field_options(Workload), **field_options(RunOptions)}
    parser = build()
    sub = {a.dest: a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"}
    train = sub[next(iter(sub))].choices["predict"]._actions
    p = [a for a in train if a.__class__.__name__ == "_SubParsersAction"][0].choices["train"]
    checked = 0
    for action in p._actions:
        f = opts.get(action.dest)
        if f is None or action.dest in ("model", "hardware", "batch", "seq_len"):
            continue
        default = f.default if f.default is not MISSING else None
        assert action.default == default, action.dest
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("argv, says", [
    (["predict", "train", "--model", "nope", "--hardware", "a100-80gb", "--batch", "8", "--seq", "128"], "unknown model"),
    (["project", "--model", "gpt2-xl"], "required"),
    (["predict", "train", "--model", "gpt2-xl", "--hardware", "a100-80gb", "--batch", "0", "--seq", "128"], "batch"),
    (["predict", "train", "--model", "gpt2-xl", "--hardware", "a100-80gb", "--batch", "8", "--seq", "128",
      "--sparsity", "nan"], "finite"),
    (["predict", "infer", "--model", "gpt2-xl", "--hardware", "a100-80gb", "--precision", "fp64"], "precision"),
    (["predict", "infer", "--model", "gpt2-xl", "--hardware", "a100-80gb", "--engine", ""], "unknown engine ''"),
    (["nope"], "invalid choice"),
])
def test_bad_input_is_one_line(cli, argv, says):
    code, out, err = cli(*argv)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_markup_in_user_text_is_printed_as_is(cli, tmp_path):
    from llmbench.results.store import ResultsDB

    db = tmp_path / "r.db"
    with ResultsDB(db) as store:
        store.record({"suite": "train", "model": "[/bold]x"}, status="error", error="bad [/red] thing")
    code, out, err = cli("results", "list", "--db", str(db))
    assert code == 0, err
    assert "[/red]" in out and "[/bold]x" in out


def test_json_is_strict(cli, tmp_path):
    from llmbench.results.store import ResultsDB

    db = tmp_path / "r.db"
    with ResultsDB(db) as store:
        store.record({"suite": "train", "model": "m"}, metrics={"x": float("nan"), "y": float("inf")})
    code, out, err = cli("results", "list", "--db", str(db), "--json")
    assert code == 0 and "NaN" not in out and "Infinity" not in out
    assert json.loads(out)[0]["metrics"] == {"x": None, "y": None}


def _commands(parser) -> dict:
    """top-level command -> its parser's help text (every subcommand's help, recursively)."""
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")

    def text(p):
        subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"]
        return p.format_help() + "".join(text(c) for s in subs for c in s.choices.values())
    return {name: text(p) for name, p in sub.choices.items()}


def test_one_command_builds_only_its_areas_and_the_same_parser():
    """COMMAND_AREAS names every top-level command with the areas that register it: the parser a
    command builds alone equals its part of the full build (help text, subcommands, options)."""
    from llmbench.cli import COMMAND_AREAS, build

    full = _commands(build())
    assert set(full) == set(COMMAND_AREAS)
    for name in COMMAND_AREAS:
        alone = _commands(build([name]))
        assert alone[name] == full[name], name
        assert len(alone) < len(full) or name == "report"


def test_predict_builds_no_other_area():
    # nor reads engines.toml: `--engine` is checked where serving uses it (perfmodel.serving)
    r = _py("import sys, io, contextlib; from llmbench.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main('predict train --model gpt2-xl --hardware h100-sxm --batch 64 --seq 1024'.split())\n"
            "print(sorted(m for m in ('llmbench.measure.cli', 'llmbench.streaming.cli', 'llmbench.studies.cli', "
            "'llmbench.serve.cli', 'llmbench.results.cli', 'llmbench.perfmodel.serving') if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_engine_help_names_every_engine():
    """`--engine` takes any name (serving.engine checks it where it is used, so parsing reads no
    engines.toml); its help in predict infer, serve and plan serve names every engine there is."""
    from llmbench.cli import build
    from llmbench.perfmodel.serving import engine_names

    parser = build()
    helps = []
    for argv in (["predict", "infer"], ["serve"], ["plan", "serve"]):
        p = parser
        for word in argv:
            p = next(a for a in p._actions if a.dest == "_cmd" or getattr(a, "choices", None)
                     and word in (a.choices or {})).choices[word]
        helps.append(next(a.help for a in p._actions if "--engine" in a.option_strings))
    for h in helps:
        assert [n for n in engine_names() if n not in h] == [], h
