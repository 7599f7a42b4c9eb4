"""HardwareSpec: an accelerator as data, loaded from one TOML file per device under catalog/.

    from llmbench.hardware import get_hardware
    hw = get_hardware("a100-80gb")
    hw.peak("bf16")            # dense FLOP/s
    hw.tier("hbm").bandwidth_bytes_per_s

Every number in a catalog file carries a source (the `sources` table, keyed by field path).
"""
from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CATALOG_DIR = Path(__file__).parent / "catalog"
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
TIER_ROLES = ("sram", "hbm", "dram", "external")
MODES = ("resident", "weight_streaming", "sram_pipeline")


class UnknownHardware(ValueError):
    pass


@dataclass(frozen=True, kw_only=True)
class MemoryTier:
    name: str
    """e.g. sram, hbm, host_dram, memoryx"""
    role: str
    """sram | hbm | dram | external"""
    capacity_bytes: float
    bandwidth_bytes_per_s: float
    """bandwidth between this tier and the compute (for external tiers: the link to the device)"""

    def __post_init__(self) -> None:
        if self.role not in TIER_ROLES:
            raise ValueError(f"memory tier {self.name!r}: role must be one of {TIER_ROLES}, got {self.role!r}")
        if self.capacity_bytes <= 0 or self.bandwidth_bytes_per_s <= 0:
            raise ValueError(f"memory tier {self.name!r}: capacity and bandwidth must be positive")


@dataclass(frozen=True, kw_only=True)
class Interconnect:
    name: str
    """e.g. NVLink3, RoCE 24x100GbE, SwarmX"""
    bandwidth_bytes_per_s: float
    """per device, one direction, within the scale-up domain"""
    latency_s: float
    topology: str
    """switch | ring | torus | tree | mesh"""
    devices_per_node: int = 1
    """devices that share the fast domain (e.g. 8 GPUs on NVLink)"""
    inter_node_bandwidth_bytes_per_s: float = 0.0
    """per device, one direction, between nodes (0: same as bandwidth_bytes_per_s)"""


@dataclass(frozen=True, kw_only=True)
class HardwareSpec:
    name: str
    display_name: str
    vendor: str
    kind: str
    """gpu | wafer | rdu | ipu | hpu | cpu"""
    peak_flops: dict[str, float]
    """dense FLOP/s per dtype (fp32, tf32, fp16, bf16, fp8); missing = unsupported"""
    peak_flops_sparse: dict[str, float] = field(default_factory=dict)
    """structured-sparse (e.g. NVIDIA 2:4) or vendor 'sparse' peaks, kept apart from dense"""
    memory_tiers: tuple[MemoryTier, ...]
    """fastest first"""
    interconnect: Interconnect | None = None
    power_w: float | None = None
    skips_zero_weights: bool = False
    """unstructured weight sparsity saves compute (dataflow cores skip zeros: Cerebras WSE)"""
    structured_sparsity: str = ""
    """e.g. '2:4' where the datasheet's sparse peak needs that pattern"""
    default_mode_train: str = "resident"
    default_mode_infer: str = "resident"
    efficiency: dict[str, float] = field(default_factory=dict)
    """fitted efficiency parameters (perfmodel owns their meaning; calibration overwrites them)"""
    sources: dict[str, str] = field(default_factory=dict)
    """field path -> where the number comes from"""
    notes: str = ""

    def __post_init__(self) -> None:
        for dt, v in {**self.peak_flops, **self.peak_flops_sparse}.items():
            if dt not in DTYPES:
                raise ValueError(f"hardware {self.name!r}: unknown dtype {dt!r} in peak_flops")
            if v <= 0:
                raise ValueError(f"hardware {self.name!r}: peak_flops[{dt}] must be positive")
        for mode in (self.default_mode_train, self.default_mode_infer):
            if mode not in MODES:
                raise ValueError(f"hardware {self.name!r}: mode must be one of {MODES}, got {mode!r}")
        if not self.memory_tiers:
            raise ValueError(f"hardware {self.name!r}: needs at least one memory tier")

    def peak(self, dtype: str) -> float | None:
        """Dense peak FLOP/s for a dtype; cbf16 (Cerebras) counts as bf16; None if unsupported."""
        return self.peak_flops.get("bf16" if dtype == "cbf16" else dtype)

    def tier(self, name_or_role: str) -> MemoryTier | None:
        for t in self.memory_tiers:
            if t.name == name_or_role:
                return t
        for t in self.memory_tiers:
            if t.role == name_or_role:
                return t
        return None

    @property
    def device_memory(self) -> MemoryTier:
        """Where weights live in resident mode: the HBM tier, else the fastest tier."""
        return self.tier("hbm") or self.memory_tiers[0]

    def to_dict(self) -> dict:
        return {
            "name": self.name, "display_name": self.display_name, "vendor": self.vendor,
            "kind": self.kind, "peak_flops": dict(self.peak_flops),
            "peak_flops_sparse": dict(self.peak_flops_sparse),
            "memory_tiers": [t.__dict__.copy() for t in self.memory_tiers],
            "interconnect": self.interconnect.__dict__.copy() if self.interconnect else None,
            "power_w": self.power_w, "skips_zero_weights": self.skips_zero_weights,
            "structured_sparsity": self.structured_sparsity,
            "default_mode_train": self.default_mode_train,
            "default_mode_infer": self.default_mode_infer,
            "efficiency": dict(self.efficiency), "sources": dict(self.sources), "notes": self.notes,
        }


def from_dict(data: dict) -> HardwareSpec:
    data = dict(data)
    data["memory_tiers"] = tuple(MemoryTier(**t) for t in data.get("memory_tiers", ()))
    if data.get("interconnect"):
        data["interconnect"] = Interconnect(**data["interconnect"])
    return HardwareSpec(**data)


def load_file(path: Path) -> HardwareSpec:
    try:
        return from_dict(tomllib.loads(Path(path).read_text()))
    except (TypeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{Path(path).name}: {e}") from None


@lru_cache(maxsize=1)
def catalog() -> dict[str, HardwareSpec]:
    out = {}
    for path in sorted(CATALOG_DIR.glob("*.toml")):
        hw = load_file(path)
        out[hw.name] = hw
    return out


def get_hardware(name: str) -> HardwareSpec:
    table = catalog()
    key = name.strip().lower()
    if key in table:
        return table[key]
    hits = [n for n in table if key in n]
    if len(hits) == 1:
        return table[hits[0]]
    near = hits or difflib.get_close_matches(key, list(table), n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(near)}?" if near else "; see 'llmbench hardware list'"
    raise UnknownHardware(f"unknown hardware {name!r}{hint}")
