"""Hardware: HardwareSpec loaded from one data file per accelerator under catalog/, or from a user's
own TOML file of the same schema (userfile.py). No torch."""
from .spec import (
    HardwareSpec, Interconnect, MemoryTier, UnknownHardware, catalog, clear_cache, delete_profile,
    get_hardware, llmbench_home, load_file, profile_path, save_profile,
)
from .userfile import UserFileCheck, check_user_file, init_toml, load_user_file

__all__ = ["HardwareSpec", "Interconnect", "MemoryTier", "UnknownHardware", "UserFileCheck", "catalog",
           "check_user_file", "clear_cache", "delete_profile", "get_hardware", "init_toml", "llmbench_home",
           "load_file", "load_user_file", "profile_path", "save_profile"]
