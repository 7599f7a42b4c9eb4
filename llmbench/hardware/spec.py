"""HardwareSpec: an accelerator as data, loaded from one TOML file per device under catalog/.

    from llmbench.hardware import get_hardware
    hw = get_hardware("a100-80gb")
    hw.peak("bf16")            # dense FLOP/s
    hw.tier("hbm").bandwidth_bytes_per_s

Every number in a catalog file carries a source (the `sources` table, keyed by field path).
Measured or calibrated values live outside the package, in $LLMBENCH_HOME/hardware/<name>.json
(default ~/.llmbench), and are laid over the shipped file by catalog() / get_hardware():

    from llmbench.hardware import save_profile
    save_profile("cpu", {"peak_flops": {"fp32": 1.1e11}})   # what `llmbench measure ceilings` does

A user's own accelerator is a TOML file of the same schema (llmbench/hardware/userfile.py):
get_hardware("./mine.toml") loads one, $LLMBENCH_HARDWARE_PATH adds folders of them to catalog(),
and init_toml("h100-sxm") returns an entry's TOML as a starting point. The lookups by name,
the profiles' save/delete and init_toml live in lookup.py, on top of this module and userfile.py.

See docs/hardware.md; `llmbench hardware list` prints the table.
"""
from __future__ import annotations

import copy
import math
import os
from llmbench._toml import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from llmbench.errors import BadInput

CATALOG_DIR = Path(__file__).parent / "catalog"
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
TIER_ROLES = ("sram", "hbm", "dram", "external")
MODES = ("resident", "weight_streaming", "sram_pipeline")
KINDS = ("gpu", "tpu", "wafer", "rdu", "ipu", "hpu", "cpu")
TOPOLOGIES = ("switch", "ring", "torus", "tree", "mesh")
HARDWARE_PATH_VAR = "LLMBENCH_HARDWARE_PATH"


class UnknownHardware(BadInput):
    """An unknown hardware name (bad user input: one line, exit 2 from the CLI)."""


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

    def __post_init__(self) -> None:
        if self.bandwidth_bytes_per_s <= 0 or self.latency_s < 0 or self.inter_node_bandwidth_bytes_per_s < 0:
            raise ValueError(f"interconnect {self.name!r}: bandwidths must be positive, latency not negative")
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"interconnect {self.name!r}: topology must be one of {TOPOLOGIES}, got {self.topology!r}")
        if int(self.devices_per_node) != self.devices_per_node or self.devices_per_node < 1:
            raise ValueError(f"interconnect {self.name!r}: devices_per_node must be a whole number >= 1")


@dataclass(frozen=True, kw_only=True)
class HardwareSpec:
    name: str
    display_name: str
    vendor: str
    kind: str
    """gpu | tpu | wafer | rdu | ipu | hpu | cpu"""
    peak_flops: dict[str, float]
    """dense FLOP/s per dtype (fp32, tf32, fp16, bf16, fp8); missing = unsupported"""
    peak_flops_sparse: dict[str, float] = field(default_factory=dict)
    """structured-sparse (e.g. NVIDIA 2:4) or vendor 'sparse' peaks, kept apart from dense"""
    memory_tiers: tuple[MemoryTier, ...]
    """fastest first"""
    interconnect: Interconnect | None = None
    power_w: float | None = None
    """device TDP / board power in W (Cerebras: the whole CS system); None where none is published"""
    price_per_device_hour_usd: float | None = None
    """a public cloud on-demand list price per device-hour in USD, or a purchase price amortised over
    a stated life (the source says which, and when); None where none is public"""
    skips_zero_weights: bool = False
    """unstructured weight sparsity saves compute (dataflow cores skip zeros: Cerebras WSE)"""
    structured_sparsity: str = ""
    """e.g. '2:4' where the datasheet's sparse peak needs that pattern"""
    default_mode_train: str = "resident"
    default_mode_infer: str = "resident"
    logical_gpus: int = 1
    """GPUs the software enumerates per device: an MI250 package is two GCDs, each its own GPU to
    ROCm with half the peaks, memory and bandwidth; a single-process run uses one (one_logical_gpu)"""
    efficiency: dict[str, float] = field(default_factory=dict)
    """fitted efficiency parameters (perfmodel owns their meaning; calibration overwrites them)"""
    sources: dict[str, str] = field(default_factory=dict)
    """field path -> where the number comes from"""
    notes: str = ""
    overlay: str = ""
    """path of the measured/calibrated profile applied on top of the shipped file ('' if none)"""
    origin_file: str = field(default="", compare=False)
    """path of the user hardware file this entry was read from ('' for shipped entries)"""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"hardware {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        for key in ("power_w", "price_per_device_hour_usd"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise ValueError(f"hardware {self.name!r}: {key} must be positive, got {value!r}")
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
        if int(self.logical_gpus) != self.logical_gpus or self.logical_gpus < 1:
            raise ValueError(f"hardware {self.name!r}: logical_gpus must be a whole number >= 1")

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

    def one_logical_gpu(self) -> "HardwareSpec":
        """What one process sees of a device the software splits into logical_gpus GPUs: the
        peaks and the on-package memory tiers (capacity, bandwidth) divided among them; host and
        external tiers and the interconnect unchanged. The device itself when it is one GPU."""
        n = self.logical_gpus
        if n == 1:
            return self
        tiers = tuple(replace(t, capacity_bytes=t.capacity_bytes / n, bandwidth_bytes_per_s=t.bandwidth_bytes_per_s / n)
                      if t.role in ("hbm", "sram") else t for t in self.memory_tiers)
        return replace(self, peak_flops={k: v / n for k, v in self.peak_flops.items()},
                       peak_flops_sparse={k: v / n for k, v in self.peak_flops_sparse.items()},
                       memory_tiers=tiers)

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
            "power_w": self.power_w, "price_per_device_hour_usd": self.price_per_device_hour_usd,
            "skips_zero_weights": self.skips_zero_weights,
            "structured_sparsity": self.structured_sparsity,
            "default_mode_train": self.default_mode_train,
            "default_mode_infer": self.default_mode_infer,
            **({"logical_gpus": self.logical_gpus} if self.logical_gpus > 1 else {}),
            "efficiency": dict(self.efficiency), "sources": dict(self.sources), "notes": self.notes,
            "overlay": self.overlay, "origin_file": self.origin_file,
        }


def from_dict(data: dict) -> HardwareSpec:
    data = dict(data)
    data["memory_tiers"] = tuple(MemoryTier(**t) for t in data.get("memory_tiers", ()))
    if data.get("interconnect"):
        data["interconnect"] = Interconnect(**data["interconnect"])
    return HardwareSpec(**data)


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{Path(path).name}: {e}") from None


def _build(data: dict, origin: str) -> HardwareSpec:
    try:
        return from_dict(data)
    except TypeError as e:
        raise ValueError(f"{origin}: {e}") from None


def load_file(path: Path) -> HardwareSpec:
    return _build(_read_toml(path), Path(path).name)


# ---------------------------------------------------------------- measured / calibrated overlay
#
# $LLMBENCH_HOME/hardware/<name>.json (default ~/.llmbench) holds fields that replace the shipped
# catalog values: measured ceilings (`llmbench measure ceilings` -> save_profile("cpu", ...)),
# calibrated efficiency factors, corrected peaks.  Merge rules (see docs/hardware.md):
#   - tables (peak_flops, peak_flops_sparse, efficiency, sources, interconnect): key by key;
#   - memory_tiers: by tier name (fields of a known tier are replaced, a new tier is appended);
#   - anything else: replaced.
# A number set by a profile without its own `sources` entry is sourced to the profile file.

_TABLES = ("peak_flops", "peak_flops_sparse", "efficiency", "sources", "interconnect")
_FIELDS = {f.name for f in fields(HardwareSpec)}


def llmbench_home() -> Path:
    """$LLMBENCH_HOME, default ~/.llmbench (measured profiles live under hardware/)."""
    return Path(os.environ.get("LLMBENCH_HOME") or Path.home() / ".llmbench").expanduser()


def profile_path(name: str) -> Path:
    """$LLMBENCH_HOME/hardware/<name>.json; a name that is not a name ('../evil') is a BadInput."""
    from llmbench.errors import check_name

    return llmbench_home() / "hardware" / f"{check_name(name, 'hardware name')}.json"


def numeric_paths(data: dict, prefix: str = "") -> list[str]:
    """Source keys of every number in a spec dict: 'peak_flops.bf16', 'memory_tiers.hbm.capacity_bytes'."""
    out = []
    for key, value in data.items():
        if not prefix and key == "sources":
            continue
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            out.append(path)
        elif isinstance(value, dict):
            out += numeric_paths(value, path)
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, dict):
                    rest = {k: v for k, v in item.items() if k not in ("name", "role")}
                    out += numeric_paths(rest, f"{path}.{item.get('name', '?')}")
    return out


def merge_overrides(base: dict, overrides: dict, origin: str = "profile") -> dict:
    """The spec dict `base` with `overrides` laid on top (rules above); `base` is not changed."""
    unknown = sorted(set(overrides) - _FIELDS)
    if unknown:
        raise BadInput(f"{origin}: unknown hardware field(s) {', '.join(unknown)}")
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if key == "memory_tiers":
            out[key] = _merge_tiers(out.get(key, []), value, origin)
        elif key in _TABLES and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = copy.deepcopy(value)
    sources = out.setdefault("sources", {})
    given = overrides.get("sources", {})
    for path in numeric_paths(overrides):
        if path not in given:
            sources[path] = f"measured/calibrated profile {origin}"
    return out


def _merge_tiers(base: list, new: list, origin: str) -> list:
    if not isinstance(new, list) or not all(isinstance(t, dict) and "name" in t for t in new):
        raise ValueError(f"{origin}: memory_tiers must be a list of tables with a 'name'")
    tiers = [dict(t) for t in base]
    by_name = {t["name"]: t for t in tiers}
    for t in new:
        if t["name"] in by_name:
            by_name[t["name"]].update(t)
        else:
            tiers.append(dict(t))
            by_name[t["name"]] = tiers[-1]
    return tiers


def _read_profile(path: Path) -> dict:
    from llmbench._files import read_small_json

    data = read_small_json(path, "hardware profile")
    if not isinstance(data, dict):
        raise BadInput(f"hardware profile {path}: expected a JSON object of fields")
    _check_numbers(data, f"hardware profile {path}")
    return data


#: numbers that are rates or sizes of a device: zero or less is no device
_POSITIVE = ("peak_flops", "capacity_bytes", "bandwidth_bytes_per_s")


def _check_numbers(data, origin: str, where: str = "") -> None:
    """Every number of an overlay finite and >= 0, peaks, capacities and bandwidths > 0 (a
    measured overlay of NaN or -1 TFLOP/s gave MFU -6e14)."""
    items = data.items() if isinstance(data, dict) else enumerate(data if isinstance(data, list) else [])
    for k, v in items:
        key = f"{where}.{k}" if where else str(k)
        if isinstance(v, (dict, list)):
            _check_numbers(v, origin, key)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            positive = any(p in key for p in _POSITIVE)
            if not math.isfinite(v) or v < 0 or (positive and v == 0):
                raise BadInput(f"{origin}: {key} must be a finite {'positive' if positive else 'non-negative'} "
                               f"number, got {v!r}")


def _apply(name: str, base: dict | None, profile: dict, origin: str) -> dict:
    """`profile` over the shipped dict `base`; a device that is only measured (base None, e.g.
    'nvidia-h200' from `llmbench measure ceilings`) gets display_name, vendor and kind defaults."""
    data = merge_overrides(base or {"name": name}, profile, origin)
    if base is None:
        data.setdefault("display_name", f"{name} (measured)")
        data.setdefault("vendor", "local")
        roles = {t.get("role") for t in data.get("memory_tiers", [])}
        data.setdefault("kind", "gpu" if "hbm" in roles else "cpu")
    return data


def _with_profile(name: str, base: dict | None) -> HardwareSpec | None:
    """The shipped spec dict `base` (None: not in the catalog) with its profile applied, if any."""
    path = profile_path(name)
    if not path.is_file():
        return _build(base, f"{name}.toml") if base is not None else None
    data = _apply(name, base, _read_profile(path), str(path))
    data["overlay"] = str(path)
    return _build(data, str(path))


# torch device name (lower case) fragment -> catalog entry; first match wins (H200 before H100,
# GB200 before B200, H100 PCIe before H100)
DEVICE_NAME_FRAGMENTS = (("h200", "h200-sxm"), ("h100 pcie", "h100-pcie"), ("h100", "h100-sxm"),
                         ("gb200", "gb200-nvl72"), ("b200", "b200"), ("l40s", "l40s"),
                         ("a100-sxm4-80gb", "a100-80gb"), ("a100 80gb", "a100-80gb"),
                         ("a100-pcie-80gb", "a100-80gb"), ("a100", "a100-40gb"),
                         ("mi325x", "mi325x"), ("mi300x", "mi300x"), ("mi250", "mi250"),
                         ("gaudi3", "gaudi3"), ("hl-325", "gaudi3"), ("gaudi2", "gaudi2"), ("hl-225", "gaudi2"))


def catalog_name_for_device(device_name: str) -> str | None:
    """The catalog entry for a device as torch names it ('NVIDIA H200' -> 'h200-sxm'), or the
    name of a measured profile ('nvidia-h200'); None when no datasheet entry matches."""
    name = device_name.lower()
    if (CATALOG_DIR / f"{name}.toml").exists():
        return name
    for fragment, entry in DEVICE_NAME_FRAGMENTS:
        if fragment in name:
            return entry
    return None

