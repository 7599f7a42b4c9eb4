"""Model presets: data files under presets/ (one TOML per family, Megatron Table 1 as CSV).

    llmbench models list
"""
from __future__ import annotations

import csv
import difflib
from llmbench._toml import tomllib
from functools import lru_cache
from pathlib import Path

from llmbench.errors import BadInput

from .spec import INIT_FIELDS, ModelSpec

PRESET_DIR = Path(__file__).parent / "presets"


class UnknownModel(BadInput):
    pass


def _from_toml(path: Path) -> dict[str, ModelSpec]:
    data = tomllib.loads(path.read_text())
    defaults = data.get("defaults", {})
    out = {}
    for name, entry in data["models"].items():
        kwargs = {**defaults, **entry, "name": name}
        unknown = set(kwargs) - set(INIT_FIELDS)
        if unknown:
            raise ValueError(f"{path.name}: {name}: unknown field(s) {sorted(unknown)}")
        out[name] = ModelSpec(**kwargs)
    return out


def _from_megatron_csv(path: Path) -> dict[str, ModelSpec]:
    # arXiv:2104.04473 Table 1: GPT with d_ff = 4h, learned positions, tied embeddings.
    out = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            out[row["name"]] = ModelSpec(
                name=row["name"], family="gpt", n_layers=int(row["n_layers"]),
                d_model=int(row["d_model"]), n_heads=int(row["n_heads"]),
                vocab_size=int(row["vocab"]), max_seq_len=int(row["seq_len"]),
                source=row["source"],
            )
    return out


@lru_cache(maxsize=1)
def presets() -> dict[str, ModelSpec]:
    """All presets by name, in file order."""
    out: dict[str, ModelSpec] = {}
    for path in sorted(PRESET_DIR.glob("*.toml")):
        out.update(_from_toml(path))
    out.update(_from_megatron_csv(PRESET_DIR / "megatron.csv"))
    return out


@lru_cache(maxsize=64)
def _alone(key: str) -> ModelSpec | None:
    """A preset by exact name parsed from the one TOML file whose `[models."<key>"]` table defines it,
    the other files read as text only (start-up time of `llmbench predict`, issue 9); None when
    that is not unique (then presets() decides, as it always would)."""
    header = f'[models."{key}"]'
    hits = [p for p in sorted(PRESET_DIR.glob("*.toml")) if header in p.read_text()]
    csv_names = {line.split(",", 1)[0] for line in (PRESET_DIR / "megatron.csv").read_text().splitlines()}
    return _from_toml(hits[0]).get(key) if len(hits) == 1 and key not in csv_names else None


def closest(name: str, choices: list[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, choices, n=n, cutoff=0.4)


def get_model(name_or_path: str) -> ModelSpec:
    """A preset by exact name, then by unique prefix/substring; or a Hugging Face config.json path."""
    if name_or_path.endswith(".json") or Path(name_or_path).is_dir():
        from .hf import from_hf_config

        return from_hf_config(name_or_path)
    key = name_or_path.strip().lower()
    spec = None if presets.cache_info().currsize else _alone(key)
    if spec is not None:
        return spec
    table = presets()
    if key in table:
        return table[key]
    hits = [n for n in table if key in n]
    if len(hits) == 1:
        return table[hits[0]]
    near = hits if hits else closest(key, list(table))
    hint = f"; did you mean {', '.join(near)}?" if near else "; see 'llmbench models list'"
    raise UnknownModel(f"unknown model {name_or_path!r}{hint}")
