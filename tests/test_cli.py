"""The console script: one prediction goes through the typer-free fast path; everything else
through the typer app; bad input is one line and exit 2 on both paths."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _py(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_prediction_fast_path_imports_neither_typer_nor_torch():
    r = _py("import sys; from llmbench.entry import main; "
            "main(['predict', 'train', '--model', 'gpt2-small', '--hardware', 'a100-80gb', "
            "'--batch', '8', '--seq', '1024', '--json']); "
            "print('typer' in sys.modules, 'torch' in sys.modules, file=sys.stderr)")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "False False"
    assert json.loads(r.stdout)["tokens_per_s"] > 0


def test_fast_path_and_typer_path_agree():
    args = ["predict", "infer", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "4",
            "--prompt-len", "256", "--gen-len", "64", "--json"]
    fast = subprocess.run([sys.executable, "-m", "llmbench", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    slow = _py(f"from llmbench.cli import main; main({args!r})")
    assert fast.returncode == slow.returncode == 0, fast.stderr + slow.stderr
    assert json.loads(fast.stdout) == json.loads(slow.stdout)


def test_fast_path_bad_input_is_one_line():
    r = subprocess.run([sys.executable, "-m", "llmbench", "predict", "train", "--model", "nope",
                        "--hardware", "a100-80gb", "--batch", "8", "--seq", "128"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2
    assert r.stderr.startswith("error: unknown model") and len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([sys.executable, "-m", "llmbench", "project", "--model", "gpt2-xl"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and "required" in r.stderr and len(r.stderr.strip().splitlines()) == 1
