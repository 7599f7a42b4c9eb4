"""ParameterStore: the MemoryX role. fp32 master weights and Adam moments per layer, off the device.

    store = ParameterStore.create("disk:/tmp/st", groups, adam=AdamConfig(lr=1e-3))
    w = store.weights("block.3")          # flat fp32 CPU tensor, the committed step's weights
    store.update("block.3", grad_flat)    # AdamW into the other slot (store side, any thread)
    store.commit(loss)                    # every group updated -> flip the manifest, atomically

Layout. A *group* is what streams as one unit: `ends` (embeddings + final norm + LM head: tied to
the embeddings) or one transformer block. Each group is one flat fp32 vector (its parameters
concatenated in `named_parameters` order) so a layer streams as one contiguous copy.

Two slots per group, A and B (double buffering). The committed step's state lives in slot
`step % 2`; the optimizer of step t+1 reads slot `t % 2` and writes slot `(t+1) % 2`, never the
slot the manifest names, so the committed state is never touched while a step runs. `commit`
flushes the new slot and only then replaces the manifest (write tmp, fsync, `os.replace`,
fsync the directory): a crash (kill -9) at any moment leaves either the old step or the new one.
The store is the checkpoint: `ParameterStore.open(tier)` resumes from the manifest.

Disk format (`disk:PATH`): per group and slot one raw little-endian fp32 file
`<group>.<slot>.f32` holding [weights | exp_avg | exp_avg_sq] (3 x numel floats), memory-mapped
with `numpy.memmap` and viewed zero-copy as torch tensors; an optional sparsity mask is one
`<group>.mask.u8` file (one byte per weight). Why raw flat files and not .pt/.safetensors:
a layer is then one sequential read the OS pages in on demand (nothing is loaded at open), a
write is an in-place store into the page cache with an explicit `flush` (msync) before the
manifest flips, nothing is pickled, and `np.fromfile` reads it anywhere. `manifest.json` holds
the layout, the committed step and slot, the AdamW settings and the loss of every committed step.
"""
from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

FORMAT = "llmbench-stream-store/1"
SLOTS = 2


@dataclass(frozen=True, kw_only=True)
class AdamConfig:
    """AdamW with torch.optim.AdamW's defaults (decoupled weight decay, Loshchilov & Hutter 2019)."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.eps <= 0 or self.weight_decay < 0:
            raise ValueError("eps must be positive and weight_decay non-negative")


@dataclass(frozen=True)
class ParamSlice:
    name: str
    shape: tuple[int, ...]
    offset: int
    """first element in the group's flat vector"""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def parse_tier(tier: str) -> tuple[str, Path | None]:
    """'ram' -> ('ram', None); 'disk:PATH' -> ('disk', PATH)."""
    if tier == "ram":
        return "ram", None
    if tier.startswith("disk:") and len(tier) > 5:
        return "disk", Path(tier[5:])
    raise ValueError(f"--store must be 'ram' or 'disk:PATH', got {tier!r}")


class ParameterStore:
    """Master weights + AdamW state per group, in host RAM or memory-mapped disk files."""

    def __init__(self, tier: str, layout: dict[str, list[ParamSlice]], *, adam: AdamConfig,
                 step: int = 0, losses: list[float] | None = None, meta: dict | None = None,
                 has_mask: dict[str, bool] | None = None, pin_memory: bool = False):
        self.tier = tier
        self.kind, self.path = parse_tier(tier)
        self.layout = layout
        self.adam = adam
        self.step = step
        self.losses = list(losses or [])
        self.meta = dict(meta or {})
        self.pin_memory = pin_memory and self.kind == "ram"
        self._has_mask = has_mask or {g: False for g in layout}
        self._slots: dict[tuple[str, int], torch.Tensor] = {}  # (group, slot) -> (3, numel)
        self._maps: dict[tuple[str, int], np.memmap] = {}
        self._masks: dict[str, torch.Tensor | None] = {}
        self._updated: set[str] = set()
        self._lock = threading.Lock()

    # ------------------------------------------------------------ create / open

    @classmethod
    def create(cls, tier: str, groups: dict[str, dict[str, torch.Tensor]], *, adam: AdamConfig,
               masks: dict[str, torch.Tensor] | None = None, meta: dict | None = None,
               capacity_bytes: int | None = None, pin_memory: bool = False) -> "ParameterStore":
        """A fresh store at step 0 from initial weights {group: {param name: tensor}}."""
        layout = {}
        for g, params in groups.items():
            off, slices = 0, []
            for name, t in params.items():
                slices.append(ParamSlice(name, tuple(t.shape), off))
                off += t.numel()
            layout[g] = slices
        masks = masks or {}
        store = cls(tier, layout, adam=adam, meta=meta, pin_memory=pin_memory,
                    has_mask={g: g in masks for g in layout})
        store.check_capacity(capacity_bytes)
        if store.kind == "disk":
            store.path.mkdir(parents=True, exist_ok=True)
            (store.path / "manifest.json").unlink(missing_ok=True)
        for g, params in groups.items():
            flat = torch.cat([t.detach().reshape(-1).float().cpu() for t in params.values()])
            mask = masks.get(g)
            if mask is not None:
                mask = mask.reshape(-1).to(torch.bool).cpu()
                flat = flat * mask
            for slot in range(SLOTS):
                buf = store._alloc(g, slot, create=True)
                buf.zero_()
                if slot == 0:
                    buf[0].copy_(flat)
            store._masks[g] = store._alloc_mask(g, mask)
        store._flush_all()
        store._write_manifest()
        return store

    @classmethod
    def open(cls, tier: str, *, pin_memory: bool = False) -> "ParameterStore":
        """Resume a disk store from its manifest (the committed step)."""
        kind, path = parse_tier(tier)
        if kind != "disk":
            raise ValueError("--resume needs a disk store (--store disk:PATH)")
        mf = path / "manifest.json"
        if not mf.exists():
            raise ValueError(f"no store to resume at {path} (no manifest.json)")
        m = json.loads(mf.read_text())
        if m.get("format") != FORMAT:
            raise ValueError(f"{mf}: not a {FORMAT} manifest")
        layout = {g: [ParamSlice(n, tuple(s), o) for n, s, o in info["params"]]
                  for g, info in m["groups"].items()}
        store = cls(tier, layout, adam=AdamConfig(**m["adam"]), step=m["step"], losses=m["losses"],
                    meta=m.get("meta"), has_mask={g: info["mask"] for g, info in m["groups"].items()})
        for g in layout:
            for slot in range(SLOTS):
                store._alloc(g, slot, create=False)
            store._masks[g] = store._alloc_mask(g, None) if store._has_mask[g] else None
        return store

    def _file(self, group: str, slot: int | str, ext: str = "f32") -> Path:
        return self.path / f"{group}.{slot}.{ext}"

    def _alloc(self, group: str, slot: int, *, create: bool) -> torch.Tensor:
        n = self.numel(group)
        if self.kind == "ram":
            buf = torch.empty(3, n, dtype=torch.float32, pin_memory=self.pin_memory)
        else:
            f = self._file(group, slot)
            if not create and (not f.exists() or f.stat().st_size != 3 * n * 4):
                raise ValueError(f"store file {f} is missing or has the wrong size")
            mm = np.memmap(f, dtype="<f4", mode="w+" if create else "r+", shape=(3, n))
            self._maps[(group, slot)] = mm
            buf = torch.from_numpy(mm)
        self._slots[(group, slot)] = buf
        return buf

    def _alloc_mask(self, group: str, mask: torch.Tensor | None) -> torch.Tensor | None:
        if not self._has_mask.get(group):
            return None
        n = self.numel(group)
        if self.kind == "ram":
            return mask.clone()
        f = self.path / f"{group}.mask.u8"
        if mask is not None:
            mask.numpy().astype(np.uint8).tofile(f)
        return torch.from_numpy(np.fromfile(f, dtype=np.uint8, count=n).astype(bool))

    # ------------------------------------------------------------ reads

    @property
    def groups(self) -> list[str]:
        return list(self.layout)

    def numel(self, group: str) -> int:
        last = self.layout[group][-1]
        return last.offset + last.numel

    @property
    def slot(self) -> int:
        """the slot holding the committed step's state"""
        return self.step % SLOTS

    def weights(self, group: str) -> torch.Tensor:
        """The committed fp32 weights of a group, flat (a view into the store: do not write)."""
        return self._slots[(group, self.slot)][0]

    def moments(self, group: str) -> tuple[torch.Tensor, torch.Tensor]:
        buf = self._slots[(group, self.slot)]
        return buf[1], buf[2]

    def mask(self, group: str) -> torch.Tensor | None:
        return self._masks.get(group)

    def param_views(self, group: str) -> dict[str, torch.Tensor]:
        w = self.weights(group)
        return {p.name: w[p.offset:p.offset + p.numel].view(p.shape) for p in self.layout[group]}

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Committed weights by parameter name (clones)."""
        return {n: t.clone() for g in self.layout for n, t in self.param_views(g).items()}

    @property
    def weight_bytes(self) -> int:
        return sum(self.numel(g) for g in self.layout) * 4

    @property
    def nbytes(self) -> int:
        """Everything the store holds: 2 slots x (weights, exp_avg, exp_avg_sq) fp32, plus masks."""
        masks = sum(self.numel(g) for g in self.layout if self._has_mask.get(g))
        return SLOTS * 3 * self.weight_bytes + masks

    def check_capacity(self, capacity_bytes: int | None) -> None:
        if capacity_bytes is not None and self.nbytes > capacity_bytes:
            raise ValueError(f"the store needs {self.nbytes:,} bytes, over its capacity of "
                             f"{capacity_bytes:,} bytes")

    # ------------------------------------------------------------ the optimizer, store side

    def update(self, group: str, grad: torch.Tensor) -> None:
        """AdamW step t+1 of one group: read the committed slot, write the other one.

        The math is torch.optim.AdamW's single-tensor path, op for op, so a streamed run matches a
        resident one (tests/test_stream.py checks 20 steps at 1e-5 relative)."""
        a, t = self.adam, self.step + 1
        old, new = self._slots[(group, self.slot)], self._slots[(group, (self.step + 1) % SLOTS)]
        g = grad.reshape(-1).to(torch.float32)
        torch.mul(old[0], 1 - a.lr * a.weight_decay, out=new[0])
        torch.lerp(old[1], g, 1 - a.beta1, out=new[1])
        torch.mul(old[2], a.beta2, out=new[2]).addcmul_(g, g, value=1 - a.beta2)
        step_size = a.lr / (1 - a.beta1 ** t)
        denom = (new[2].sqrt() / math.sqrt(1 - a.beta2 ** t)).add_(a.eps)
        new[0].addcdiv_(new[1], denom, value=-step_size)
        mask = self._masks.get(group)
        if mask is not None:
            new[0].mul_(mask)
        with self._lock:
            self._updated.add(group)
        _crash_point("update")

    def commit(self, loss: float) -> None:
        """Every group updated: make step t+1 the committed one (flush, then flip the manifest)."""
        missing = set(self.layout) - self._updated
        if missing:
            raise RuntimeError(f"commit before every group was updated: {sorted(missing)}")
        new_slot = (self.step + 1) % SLOTS
        for g in self.layout:
            mm = self._maps.get((g, new_slot))
            if mm is not None:
                mm.flush()
        _crash_point("before_manifest")
        self.step += 1
        self.losses.append(float(loss))
        self._updated.clear()
        self._write_manifest()

    # ------------------------------------------------------------ manifest

    def _flush_all(self) -> None:
        for mm in self._maps.values():
            mm.flush()

    def _write_manifest(self) -> None:
        if self.kind != "disk":
            return
        m = {"format": FORMAT, "step": self.step, "slot": self.slot, "losses": self.losses,
             "adam": asdict(self.adam), "meta": self.meta,
             "groups": {g: {"params": [[p.name, list(p.shape), p.offset] for p in sl],
                            "numel": self.numel(g), "mask": bool(self._has_mask.get(g))}
                        for g, sl in self.layout.items()}}
        tmp = self.path / "manifest.json.tmp"
        with open(tmp, "w") as f:
            json.dump(m, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / "manifest.json")
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _crash_point(where: str) -> None:
    """Crash injection for the crash-safety test: LLMBENCH_STREAM_CRASH=<where>:<step> kills this
    process with SIGKILL (kill -9) at that point of that step."""
    spec = os.environ.get("LLMBENCH_STREAM_CRASH")
    if not spec:
        return
    at, _, step = spec.partition(":")
    _crash_point.count = getattr(_crash_point, "count", 0) + (at == where)
    if at == where and _crash_point.count == int(step or 1):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
