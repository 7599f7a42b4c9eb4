"""Hardware: HardwareSpec loaded from one data file per accelerator under catalog/. No torch."""
from .spec import (
    HardwareSpec, Interconnect, MemoryTier, UnknownHardware, catalog, clear_cache, delete_profile,
    get_hardware, llmbench_home, load_file, profile_path, save_profile,
)

__all__ = ["HardwareSpec", "Interconnect", "MemoryTier", "UnknownHardware", "catalog",
           "clear_cache", "delete_profile", "get_hardware", "llmbench_home", "load_file",
           "profile_path", "save_profile"]
