"""TOML reading on Python 3.10 too: the standard library's tomllib (3.11+), else tomli (the same
parser, a dependency only on 3.10 — Ubuntu 22.04 and many GPU images still ship 3.10)."""
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # noqa: F401

__all__ = ["tomllib"]
