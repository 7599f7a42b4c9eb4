"""Hardware: HardwareSpec loaded from one data file per accelerator under catalog/. No torch."""
from .spec import (
    HardwareSpec, Interconnect, MemoryTier, UnknownHardware, catalog, get_hardware, load_file,
)

__all__ = ["HardwareSpec", "Interconnect", "MemoryTier", "UnknownHardware", "catalog",
           "get_hardware", "load_file"]
