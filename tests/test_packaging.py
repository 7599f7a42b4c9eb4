"""A plain `pip install .` (or the wheel) carries every data file the package reads."""
import fnmatch
from pathlib import Path

from llmbench._toml import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_data_file_is_package_data():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = conf["tool"]["setuptools"]["package-data"]["*"]
    missing = [str(p.relative_to(ROOT)) for p in (ROOT / "llmbench").rglob("*")
               if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
               and not any(fnmatch.fnmatch(p.name, g) for g in globs)]
    assert not missing, f"not shipped in a wheel: {missing}"


def test_extras_bring_what_measure_needs():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = conf["project"]["optional-dependencies"]
    assert any(d.startswith("tokenizers") for d in extras["torch"])
    assert any(d.startswith("matplotlib") for d in extras["report"])
    core = " ".join(conf["project"]["dependencies"])
    assert "torch" not in core and "typer" not in core and "tomli" in core
