"""Hardware: HardwareSpec loaded from one data file per accelerator under catalog/, or from a user's
own TOML file of the same schema (userfile.py). No torch.

Names load lazily (PEP 562): `llmbench.hardware.cli`, imported at CLI start-up, pulls in no TOML
parser; `get_hardware` of a catalog name reads that one file.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    **dict.fromkeys(("HardwareSpec", "Interconnect", "MemoryTier", "UnknownHardware", "llmbench_home",
                     "load_file", "profile_path"), "spec"),
    **dict.fromkeys(("catalog", "clear_cache", "delete_profile", "get_hardware", "init_toml", "save_profile"),
                    "lookup"),
    **dict.fromkeys(("UserFileCheck", "check_user_file", "load_user_file"), "userfile"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
