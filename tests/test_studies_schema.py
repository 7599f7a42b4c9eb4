"""The study spec schema: every rule of llmbench.studies.schema (through spec.load_spec) has a test,
and each error is one BadInput line naming the file (and the key)."""
import os
import textwrap
import time

import pytest

from llmbench.errors import BadInput
from llmbench.studies.schema import MAX_GRID_POINTS, MAX_SPEC_BYTES
from llmbench.studies.spec import get_study, load_spec

GOOD = textwrap.dedent("""\
    name: t
    title: a test study
    suite: train
    source: {paper: arXiv:0, where: Fig. 1}
    base: {model: gpt2-small, batch: 4, seq_len: 64}
    grid: {grad_accum: [1, 2]}
    published: [emani-gas-a100]
    quick: {shrink: nothing, base: {steps: 2}}
""")


def _write(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


def _bad(path, match):
    with pytest.raises(BadInput, match=match) as e:
        load_spec(path).points()
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg, msg
    return msg


def _bad_text(tmp_path, text, match):
    return _bad(_write(tmp_path, text), match)


def test_good_spec_loads(tmp_path):
    spec = load_spec(_write(tmp_path, GOOD))
    assert len(spec.points()) == 2 and spec.points(quick=True)[0].run.steps == 2
    # anchors and aliases are fine in moderation
    text = GOOD.replace("base: {model", "base: &b {model") + "description: x\n"
    text = text.replace("quick: {shrink: nothing, base: {steps: 2}}", "quick: {shrink: n, base: *b}")
    assert load_spec(_write(tmp_path, text)).points(quick=True)[0].workload.batch == 4


# ---------------------------------------------------------------- the file

def test_too_large_is_refused_before_reading(tmp_path):
    path = _write(tmp_path, GOOD + "#" * MAX_SPEC_BYTES + "\n")
    assert "at most" in _bad(path, "bytes")


def test_directory_missing_special_and_non_utf8(tmp_path):
    (tmp_path / "d.yaml").mkdir()
    _bad(tmp_path / "d.yaml", "is a directory")
    _bad(tmp_path / "none.yaml", "no such study spec")
    os.symlink("/dev/zero", tmp_path / "z.yaml")  # would read forever
    _bad(tmp_path / "z.yaml", "not a regular file")
    _bad(_write(tmp_path, GOOD.encode() + b"description: caf\xe9\n"), "not UTF-8")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable(tmp_path):
    path = _write(tmp_path, GOOD)
    path.chmod(0)
    _bad(path, "cannot read")


def test_get_study_paths_and_names(tmp_path):
    with pytest.raises(BadInput, match="no such study spec"):
        get_study(str(tmp_path / "missing.yaml"))
    with pytest.raises(BadInput, match="did you mean gas"):
        get_study("gsa")
    assert get_study(str(_write(tmp_path, GOOD))).name == "t"


# ---------------------------------------------------------------- hostile YAML

def test_alias_bomb_is_refused_fast(tmp_path):
    lines = ["a0: [x, x, x, x, x, x, x, x, x, x]"]
    lines[0] = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"
    for i in range(1, 10):  # 10^10 strings once expanded
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    t0 = time.monotonic()
    _bad_text(tmp_path, "\n".join(lines) + "\n", "expands to over")
    assert time.monotonic() - t0 < 5


def test_recursive_alias_and_deep_nesting(tmp_path):
    _bad_text(tmp_path, GOOD + "description: &r [*r]\n", "recursive")
    # flow nesting is refused from the text (PyYAML's scanner is quadratic in it: a 1 MB "[[[..."
    # would take hours); block nesting ends in a RecursionError, turned into one line
    t0 = time.monotonic()
    _bad_text(tmp_path, "a: " + "[" * 400_000 + "]" * 400_000 + "\n", "nested over 50 deep")
    assert time.monotonic() - t0 < 5
    _bad_text(tmp_path, "".join(" " * i + "k:\n" for i in range(1200)), "nested too deeply")


def test_duplicate_key(tmp_path):
    _bad_text(tmp_path, GOOD + "title: again\n", "duplicate key 'title'")


def test_invalid_yaml_names_the_line(tmp_path):
    _bad_text(tmp_path, GOOD + "grid: [unclosed\n", "line .* is not valid YAML")


def test_python_tags_are_not_constructed(tmp_path):
    _bad_text(tmp_path, GOOD + "description: !!python/object/apply:os.system [echo hi]\n",
              "not valid YAML")


# ---------------------------------------------------------------- keys and types

def test_not_a_mapping(tmp_path):
    _bad_text(tmp_path, "- a\n- b\n", "is a YAML mapping, got a list")
    _bad_text(tmp_path, "", "is a YAML mapping, got nothing")


@pytest.mark.parametrize("drop, match", [
    ("title: a test study\n", "title is required"),
    ("suite: train\n", "suite is required"),
    ("source: {paper: arXiv:0, where: Fig. 1}\n", "source is required"),
])
def test_required_keys(tmp_path, drop, match):
    _bad_text(tmp_path, GOOD.replace(drop, ""), match)


def test_required_nested_keys(tmp_path):
    _bad_text(tmp_path, GOOD.replace("paper: arXiv:0, ", ""), "source.paper is required")
    _bad_text(tmp_path, GOOD.replace("shrink: nothing, ", ""), "quick.shrink is required")


@pytest.mark.parametrize("old, new, match", [
    ("title: a test study", "title: 42", "title must be text"),
    ("title: a test study", "title: [a, b]", "title must be text"),
    ("base: {model: gpt2-small, batch: 4, seq_len: 64}", "base: [model, batch]", "base must be a mapping"),
    ("grid: {grad_accum: [1, 2]}", "grid: big", "grid must be a mapping or a list"),
    ("grid: {grad_accum: [1, 2]}", "grid: [{grad_accum: 1}, 7]", r"grid\[1\] must be a mapping"),
    ("published: [emani-gas-a100]", "published: {a: 1}", "published must be a list"),
    ("published: [emani-gas-a100]", "published: [3]", "row ids"),
    ("source: {paper: arXiv:0, where: Fig. 1}", "source: arXiv:0", "source must be a mapping"),
    ("quick: {shrink: nothing, base: {steps: 2}}", "quick: yes", "quick must be a mapping"),
    ("title: a test study", "title: \"two\\nlines\"", "one non-empty line"),
])
def test_types(tmp_path, old, new, match):
    assert old in GOOD
    _bad_text(tmp_path, GOOD.replace(old, new), match)


@pytest.mark.parametrize("old, new, match", [
    ("title:", "titel:", "unknown key titel .did you mean title"),
    ("paper:", "papr:", "unknown key source.papr .did you mean paper"),
    ("shrink: nothing,", "shrink: nothing, grdi: {},", "unknown key quick.grdi .did you mean grid"),
    ("batch: 4", "bach: 4", "unknown key base.bach .did you mean batch"),
    ("seq_len: 64", "seq: 64", "unknown key base.seq .did you mean seq_len"),
    ("grad_accum:", "grad_acum:", "unknown key grid.grad_acum .did you mean grad_accum"),
    ("suite: train", "suite: trian", "suite must be one of .* .did you mean train"),
    ("emani-gas-a100", "emani-gas-a10", "not in llmbench/reference/published.csv .did you mean emani-gas-a100"),
    ("batch: 4", "batch: 4, resize: {n_layer: 2}", "not 'n_layer' .did you mean n_layers"),
])
def test_unknown_names_get_the_closest_valid_one(tmp_path, old, new, match):
    _bad_text(tmp_path, GOOD.replace(old, new, 1), match)


def test_runner_keys_lists_in_base_and_empty_axes(tmp_path):
    _bad_text(tmp_path, GOOD.replace("batch: 4", "batch: 4, hardware: h100"), "set by the runner")
    _bad_text(tmp_path, GOOD.replace("batch: 4", "batch: 4, device: cpu"), "set by the runner")
    _bad_text(tmp_path, GOOD.replace("batch: 4", "batch: [1, 2]"), "lists .axes. belong in grid")
    _bad_text(tmp_path, GOOD.replace("[1, 2]", "[]"), "empty list")


# ---------------------------------------------------------------- impossible numbers

@pytest.mark.parametrize("key, value, match", [
    ("batch", "0", "positive integer"), ("batch", "-3", "positive integer"),
    ("batch", "1.5", "positive integer"), ("batch", "true", "positive integer"),
    ("seq_len", "0", "positive integer"), ("repeats", "0", "positive integer"),
    ("steps", "-1", "positive integer"), ("devices", "0", "positive integer"),
    ("grad_accum", ".nan", "positive integer"), ("gen_len", "-1", "integer >= 0"),
    ("micro_batch", "0", "positive integer"), ("zero", "4", r"integer in \[0, 3\]"),
    ("sparsity", "1.0", r"number in \[0, 0.999\]"), ("sparsity", ".nan", r"number in \[0, 0.999\]"),
    ("lr", ".inf", "number >= 0"), ("lr", "-.inf", "number >= 0"),
    ("precision", "fp64", "one of fp32, tf32"), ("recompute", "some", "one of none, selective, full"),
    ("data", "web", "one of synthetic"), ("head", "lm2", "one of lm, mlm"),
    ("model", '""', "non-empty text"), ("compile", "1", "true or false"),
])
def test_impossible_values_name_the_key(tmp_path, key, value, match):
    """The rules are the dataclasses' field metadata (llmbench.point.opt): one per option."""
    base = {"model": "gpt2-small", "batch": "4", "seq_len": "64", key: value}
    text = GOOD.replace("{model: gpt2-small, batch: 4, seq_len: 64}",
                        "{" + ", ".join(f"{k}: {v}" for k, v in base.items()) + "}")
    msg = _bad_text(tmp_path, text, match)
    assert f"base.{key}" in msg
    # the same rule holds for every value of a grid axis and in quick:
    _bad_text(tmp_path, GOOD.replace("grid: {grad_accum: [1, 2]}", f"grid: {{{key}: [1, {value}]}}"),
              f"grid.{key}")
    _bad_text(tmp_path, GOOD.replace("base: {steps: 2}", f"base: {{{key}: {value}}}"),
              f"quick.base.{key}")


# ---------------------------------------------------------------- size

def test_grid_size_is_counted_before_expanding(tmp_path):
    axes = ", ".join(f"{k}: [1, 2, 3, 4]" for k in ("batch", "seq_len", "steps", "grad_accum", "devices",
                                                      "warmup_steps", "seed"))
    t0 = time.monotonic()  # 4^7 = 16384 points, refused without making one
    msg = _bad_text(tmp_path, GOOD.replace("grid: {grad_accum: [1, 2]}", f"grid: {{{axes}}}"),
                    "at most")
    assert f"{4 ** 7:,} points" in msg and 4 ** 7 > MAX_GRID_POINTS and time.monotonic() - t0 < 5
    axis = "[" + ", ".join(str(i) for i in range(1, 101)) + "]"
    square = f"{{batch: {axis}, seq_len: {axis}}}"  # 10,000 points: the limit itself is fine ...
    assert len(load_spec(_write(tmp_path, GOOD.replace("grid: {grad_accum: [1, 2]}",
                                                       f"grid: [{square}]"))).grid) == 1
    _bad_text(tmp_path, GOOD.replace("grid: {grad_accum: [1, 2]}", f"grid: [{square}, {{seq_len: 8}}]"),
              "10,001 points")  # ... and a list of mappings adds up
    _bad_text(tmp_path, GOOD.replace("base: {steps: 2}", f"base: {{steps: 2}}, grid: {{{axes}}}"),
              "quick.grid has")


# ---------------------------------------------------------------- predict: section

PREDICT = GOOD + textwrap.dedent("""\
    predict:
      hardware: [a100-80gb, cs2]
      base: {model: gpt2-xl, seq_len: 1024}
      grid:
        - {batch: [8, 16]}
        - {hardware: h100-sxm, batch: 64, devices: 8}
        - {model: gpt3-20b, dataset: pile, batch: 256, seq_len: 2048}
""")


def test_predict_section(tmp_path):
    pts = load_spec(_write(tmp_path, PREDICT)).predict_points()
    assert [(p.workload.batch, p.hardware, p.dataset) for p in pts] == [
        (8, ("a100-80gb", "cs2"), None), (16, ("a100-80gb", "cs2"), None), (64, ("h100-sxm",), None),
        (256, ("a100-80gb", "cs2"), "pile")]
    assert pts[2].workload.devices == 8 and pts[0].workload.hardware is None
    # without a predict: section, the study's full-size points (hardware left to the caller)
    plain = load_spec(_write(tmp_path, GOOD, "g.yaml")).predict_points()
    assert [(p.workload.grad_accum, p.hardware) for p in plain] == [(1, ()), (2, ())]


@pytest.mark.parametrize("old, new, match", [
    ("hardware: [a100-80gb, cs2]", "hardware: [a100-80gb, cs2x]", r"predict.hardware: 'cs2x' is not in the hardware catalog .did you mean cs2"),
    ("hardware: [a100-80gb, cs2]", "hardware: []", "predict.hardware is empty"),
    ("hardware: [a100-80gb, cs2]", "hardware: cs2", "predict.hardware must be a list"),
    ("hardware: h100-sxm,", "hardware: h100-sx,", r"predict.grid\[1\].hardware: 'h100-sx' is not in"),
    ("dataset: pile", "datset: pile", r"unknown key predict.grid\[2\].datset .did you mean dataset"),
    ("base: {model: gpt2-xl", "base: {model: gpt2-xl, steps: 3, tp: 0", r"predict.base.tp must be a positive integer"),
    ("base: {model: gpt2-xl", "base: {hardware: cs2, model: gpt2-xl", "predict.base.hardware is set by the runner"),
    ("  hardware: [a100-80gb, cs2]\n", "", "predict.hardware is required"),
])
def test_bad_predict_section(tmp_path, old, new, match):
    assert old in PREDICT
    _bad_text(tmp_path, PREDICT.replace(old, new, 1), match)
