"""The pasted outputs of the analytical commands in docs/*.md are what the current code prints
(scripts/docs_outputs.py reruns each one; `--write` pastes fresh ones after a change)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("docs_outputs", ROOT / "scripts" / "docs_outputs.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["docs_outputs"] = mod  # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def test_every_pasted_prediction_in_the_docs_is_what_the_code_prints_now(capsys):
    tool = _tool()
    assert tool.main([]) == 0, capsys.readouterr().out


def test_a_stale_paste_is_found(tmp_path, monkeypatch):
    """The check can fail: a paste with one number changed is reported, and --write mends it."""
    tool = _tool()
    doc = tmp_path / "docs" / "x.md"
    doc.parent.mkdir()
    cmd = "llmbench predict infer --model llama-3.1-8b --hardware a100-80gb --batch 1"
    fresh = tool.run(cmd, exit_line=False)
    wrong = [line.replace("decode tokens/s per seq  ", "decode tokens/s per seq  1") for line in fresh]
    assert wrong != fresh
    doc.write_text("```\n$ " + cmd + "\n" + "\n".join(wrong) + "\n```\n")
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.main(["--only", "docs/x.md"]) == 1
    assert tool.main(["--only", "docs/x.md", "--write"]) == 0
    assert tool.main(["--only", "docs/x.md"]) == 0
    assert doc.read_text() == "```\n$ " + cmd + "\n" + "\n".join(fresh) + "\n```\n"
