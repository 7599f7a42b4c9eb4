"""ParameterStore: the MemoryX role. fp32 master weights and Adam moments per layer, off the device.

    store = ParameterStore.create(Tier.parse("disk:/tmp/st"), init_groups, adam=AdamConfig(lr=1e-3))
    w = store.weights("block.3")          # flat fp32 CPU tensor, the committed step's weights
    store.update("block.3", grad_flat)    # AdamW into the other slot (store side, any thread)
    store.commit(loss)                    # every group updated -> flip the manifest, atomically
    store.close()                         # unlock the directory

Layout. A *group* is what streams as one unit: `ends` (embeddings + final norm + LM head: tied to
the embeddings) or one transformer block. Each group is one flat fp32 vector (its parameters
concatenated in `named_parameters` order) so a layer streams as one contiguous copy.

Two slots per group, A and B (double buffering). The committed state lives in slot `slot`; the
optimizer of the next step reads it and writes the other slot, never the one the manifest names,
so the committed state is never touched while a step runs. `commit` flushes the new slot and only
then flips the manifest (storedir.StoreDir.write_manifest: tmp, fsync, `os.replace`, fsync of the
directory): a crash (kill -9) at any moment leaves either the old step or the new one. A step
whose fp16 gradients overflowed is `skip`ped: the half-written other slot is simply not adopted
(the double buffer makes skipped steps free). The store is the checkpoint: `ParameterStore.open`
resumes from the manifest. Disk stores are locked, refuse to replace what is not theirs and
validate their manifest (storedir.py).

Disk format (`disk:PATH`): per group and slot one raw little-endian fp32 file
`<group>.<slot>.f32` holding [weights | exp_avg | exp_avg_sq] (3 x numel floats), memory-mapped
(`mmap`, shared) and viewed zero-copy as torch tensors; an optional sparsity mask is one
`<group>.mask.u8` file (one byte per weight). Why raw flat files and not .pt/.safetensors: a
layer is then one sequential read the OS pages in on demand (nothing is loaded at open), a write
is an in-place store into the page cache with an explicit flush (msync) before the manifest flips,
nothing is pickled, and `np.fromfile` reads it anywhere. New files are sparse: zero moments and the
untouched slot take no disk until the first steps write them (24 bytes per parameter from step 2).
`release(group)` drops a group's pages from this process's mapping after use (madvise DONTNEED:
dirty pages stay in the page cache and reach the file), so a store larger than RAM keeps the
process's resident memory near one group's worth. `manifest.json` holds the layout, the committed
step, slot and Adam step count, the loss scaler, the AdamW settings and every committed loss.
"""
from __future__ import annotations

import math
import mmap
import os
import threading
from dataclasses import asdict, dataclass

import numpy as np
import torch

from llmbench.errors import BadInput
from llmbench.streaming.config import Tier
from llmbench.streaming.precision import LossScale
from llmbench.streaming.storedir import DTYPE, FORMAT, SLOTS, StoreDir, mask_file, slot_file


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
            raise BadInput(f"lr must be positive, got {self.lr}")
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise BadInput(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not self.eps > 0 or not self.weight_decay >= 0:
            raise BadInput("eps must be positive and weight_decay non-negative")


#: the AdamW hyperparameters of `measure train` (measure/train.make_adamw: GPT-3's betas 0.9/0.95 and
#: weight decay 0.1): the stream trainers use them, so a streamed step does measure's update
MEASURE_ADAMW = {"beta1": 0.9, "beta2": 0.95, "weight_decay": 0.1}


@dataclass(frozen=True)
class ParamSlice:
    name: str
    shape: tuple[int, ...]
    offset: int
    """first element in the group's flat vector"""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def layout_of(groups: dict[str, dict[str, tuple[int, ...]]]) -> dict[str, list[ParamSlice]]:
    """{group: {param name: shape}} -> {group: [ParamSlice]} (parameters concatenated in order)."""
    layout = {}
    for g, shapes in groups.items():
        off, slices = 0, []
        for name, shape in shapes.items():
            slices.append(ParamSlice(name, tuple(shape), off))
            off += math.prod(shape)
        layout[g] = slices
    return layout


class ParameterStore:
    """Master weights + AdamW state per group, in host RAM or memory-mapped disk files."""

    def __init__(self, tier: Tier, layout: dict[str, list[ParamSlice]], *, adam: AdamConfig,
                 meta: dict | None = None, has_mask: dict[str, bool] | None = None,
                 loss_scale: LossScale | None = None, pin_memory: bool = False,
                 directory: StoreDir | None = None):
        self.tier = Tier.parse(tier)
        self.kind, self.path = self.tier.kind, self.tier.path
        self.layout, self.adam, self.meta = layout, adam, dict(meta or {})
        self.step = self.adam_step = self.slot = 0
        self.losses: list[float] = []
        self.skipped: list[int] = []
        """steps whose update was skipped (fp16 gradients overflowed)"""
        self.loss_scale = loss_scale
        self.pin_memory = pin_memory and self.kind == "ram"
        self._dir = directory
        self._has_mask = has_mask or {g: False for g in layout}
        self._slots: dict[tuple[str, int], torch.Tensor] = {}  # (group, slot) -> (3, numel)
        self._maps: dict[tuple[str, int], mmap.mmap] = {}
        self._masks: dict[str, torch.Tensor | None] = {}
        self._updated: set[str] = set()
        self._found_inf = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------ create / open / close

    @classmethod
    def create(cls, tier, groups, *, adam: AdamConfig, masks: dict[str, torch.Tensor] | None = None,
               meta: dict | None = None, capacity_bytes: int | None = None,
               loss_scale: LossScale | None = None, pin_memory: bool = False,
               overwrite: bool = False) -> "ParameterStore":
        """A fresh store at step 0. `groups` is {group: {param name: tensor}} or an iterable of
        (group, {param name: tensor}) pairs whose first item is a {group: {name: shape}} layout
        (see trainers.initial_groups), so a model larger than RAM is written one group at a time.
        A disk store refuses an existing store without `overwrite` (storedir.prepare_new)."""
        shapes, items = _shapes_and_items(groups)
        masks = masks or {}
        store = cls(tier, layout_of(shapes), adam=adam, meta=meta, pin_memory=pin_memory,
                    loss_scale=loss_scale, has_mask={g: g in masks for g in shapes})
        store.check_capacity(capacity_bytes)
        if store.kind == "disk":
            store._dir = StoreDir.lock(store.path)
            try:
                store._dir.prepare_new(store._manifest()["groups"], overwrite=overwrite)
                store._write_manifest(complete=False)
            except BaseException:
                store.close()
                raise
        try:
            for g, params in items:
                store._fill_new(g, params, masks.get(g))
            store._write_manifest()
        except BaseException:
            store.close()
            raise
        return store

    def _fill_new(self, group: str, params: dict[str, torch.Tensor], mask) -> None:
        flat = torch.cat([t.detach().reshape(-1).float().cpu() for t in params.values()])
        if flat.numel() != self.numel(group):
            raise ValueError(f"group {group}: {flat.numel()} elements, layout says {self.numel(group)}")
        if mask is not None:
            mask = mask.reshape(-1).to(torch.bool).cpu()
            flat = flat * mask
        for slot in range(SLOTS):
            buf = self._alloc(group, slot, create=True)
            if slot == 0:
                buf[0].copy_(flat)
        self._masks[group] = self._alloc_mask(group, mask)
        self.flush_slot(group, 0)
        self.release(group)

    @classmethod
    def open(cls, tier, *, pin_memory: bool = False) -> "ParameterStore":
        """Resume a disk store from its (validated) manifest: the committed step."""
        tier = Tier.parse(tier)
        if tier.kind != "disk":
            raise BadInput("--resume needs a disk store (--store disk:PATH)")
        if not (tier.path / "manifest.json").exists():
            raise BadInput(f"no store to resume at {tier.path} (no manifest.json)")
        d = StoreDir.lock(tier.path)
        try:
            m = d.read_manifest()
            if m is None or not m["complete"]:
                raise BadInput(f"store {tier.path} was never completed (its creation was "
                               "interrupted); start again with --overwrite")
            d.check_files(m)
            return cls._from_manifest(tier, m, d)
        except BaseException:
            d.close()
            raise

    @classmethod
    def _from_manifest(cls, tier: Tier, m: dict, d: StoreDir) -> "ParameterStore":
        layout = {g: [ParamSlice(n, tuple(s), o) for n, s, o in info["params"]]
                  for g, info in m["groups"].items()}
        ls = m["loss_scale"]
        store = cls(tier, layout, adam=AdamConfig(**m["adam"]), meta=m["meta"], directory=d,
                    has_mask={g: info["mask"] for g, info in m["groups"].items()},
                    loss_scale=LossScale(**ls) if ls is not None else None)
        store.step, store.adam_step, store.slot = m["step"], m["adam_step"], m["slot"]
        store.losses, store.skipped = list(m["losses"]), list(m["skipped"])
        for g in layout:
            for slot in range(SLOTS):
                store._alloc(g, slot, create=False)
            store._masks[g] = store._alloc_mask(g, None) if store._has_mask[g] else None
        return store

    def close(self) -> None:
        """Drop the mappings and release the directory lock (idempotent)."""
        self._slots.clear()
        for mm in self._maps.values():
            try:
                mm.close()
            except BufferError:  # a caller still holds a view: the OS unmaps at exit
                pass
        self._maps.clear()
        if self._dir is not None:
            self._dir.close()
            self._dir = None

    def __enter__(self) -> "ParameterStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _alloc(self, group: str, slot: int, *, create: bool) -> torch.Tensor:
        n = self.numel(group)
        if self.kind == "ram":
            buf = torch.zeros(3, n, dtype=torch.float32, pin_memory=self.pin_memory)
        else:
            f = self.path / slot_file(group, slot)
            with open(f, "x+b" if create else "r+b") as fh:
                if create:
                    fh.truncate(3 * n * 4)  # sparse: reads as zeros, takes no disk until written
                mm = mmap.mmap(fh.fileno(), 3 * n * 4)
            self._maps[(group, slot)] = mm
            buf = torch.from_numpy(np.frombuffer(mm, dtype=DTYPE).reshape(3, n))
        self._slots[(group, slot)] = buf
        return buf

    def _alloc_mask(self, group: str, mask: torch.Tensor | None) -> torch.Tensor | None:
        if not self._has_mask.get(group):
            return None
        if self.kind == "ram":
            return mask.clone()
        f = self.path / mask_file(group)
        if mask is not None:
            with open(f, "xb") as fh:
                fh.write(mask.numpy().astype(np.uint8).tobytes())
        return torch.from_numpy(np.fromfile(f, dtype=np.uint8, count=self.numel(group)).astype(bool))

    # ------------------------------------------------------------ reads

    @property
    def groups(self) -> list[str]:
        return list(self.layout)

    def numel(self, group: str) -> int:
        last = self.layout[group][-1]
        return last.offset + last.numel

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
            raise BadInput(f"the store needs {self.nbytes:,} bytes, over its capacity of "
                           f"{capacity_bytes:,} bytes")

    def release(self, group: str) -> None:
        """Disk: drop the group's pages from this process's mapping (they stay in the page cache,
        dirty ones reach the file); the next access pages them in again. RAM: nothing."""
        for slot in range(SLOTS):
            mm = self._maps.get((group, slot))
            if mm is not None:
                mm.madvise(mmap.MADV_DONTNEED)

    def flush_slot(self, group: str, slot: int) -> None:
        mm = self._maps.get((group, slot))
        if mm is not None:
            mm.flush()

    # ------------------------------------------------------------ the optimizer, store side

    def update(self, group: str, grad: torch.Tensor) -> bool:
        """AdamW step of one group: read the committed slot, write the other one. With a loss
        scale, the gradient is unscaled first and an inf/NaN marks the step for skipping (no
        write). Returns False when the gradient was not finite.

        The math is torch's fused AdamW kernel, measure train's, so a streamed run matches a
        resident one (tests/test_stream.py checks weights and moments)."""
        g = grad.reshape(-1).to(torch.float32)
        if self.loss_scale is not None:
            g = g * torch.tensor(self.loss_scale.inv_scale, dtype=torch.float32)
            if not bool(torch.isfinite(g).all()):
                with self._lock:
                    self._found_inf = True
                    self._updated.add(group)
                return False
        old, new = self._slots[(group, self.slot)], self._slots[(group, 1 - self.slot)]
        _adamw_into(self.adam, self.adam_step + 1, old, new, g)
        mask = self._masks.get(group)
        if mask is not None:
            new[0].mul_(mask)
        self.flush_slot(group, 1 - self.slot)
        with self._lock:
            self._updated.add(group)
        _crash_point("update")
        return True

    def finish(self, loss: float) -> bool:
        """End of a step: commit it, or skip it when a gradient overflowed. True if committed."""
        if self._found_inf:
            self.skip(loss)
            return False
        self.commit(loss)
        return True

    def commit(self, loss: float) -> None:
        """Every group updated: adopt the other slot (flush it, then flip the manifest)."""
        missing = set(self.layout) - self._updated
        if missing:
            raise RuntimeError(f"commit before every group was updated: {sorted(missing)}")
        if self._found_inf:
            raise RuntimeError("commit of a step whose gradients overflowed: skip it")
        for g in self.layout:
            self.flush_slot(g, 1 - self.slot)
        _crash_point("before_manifest")
        self.step, self.adam_step, self.slot = self.step + 1, self.adam_step + 1, 1 - self.slot
        self._end_step(loss, found_inf=False)

    def skip(self, loss: float) -> None:
        """The step's gradients overflowed (fp16): keep the committed slot, count the step, back
        off the loss scale (GradScaler skips optimizer.step() the same way)."""
        self.skipped.append(self.step)
        self.step += 1
        self._end_step(loss, found_inf=True)

    def _end_step(self, loss: float, *, found_inf: bool) -> None:
        self.losses.append(float(loss))
        if self.loss_scale is not None:
            self.loss_scale = self.loss_scale.after(found_inf)
        self._updated.clear()
        self._found_inf = False
        self._write_manifest()

    # ------------------------------------------------------------ manifest

    def _manifest(self, complete: bool = True) -> dict:
        return {"format": FORMAT, "complete": complete, "dtype": DTYPE, "step": self.step,
                "adam_step": self.adam_step, "slot": self.slot, "losses": self.losses,
                "skipped": self.skipped, "adam": asdict(self.adam), "meta": self.meta,
                "loss_scale": self.loss_scale.to_dict() if self.loss_scale is not None else None,
                "groups": {g: {"params": [[p.name, list(p.shape), p.offset] for p in sl],
                               "numel": self.numel(g), "mask": bool(self._has_mask.get(g))}
                           for g, sl in self.layout.items()}}

    def _write_manifest(self, complete: bool = True) -> None:
        if self._dir is not None:
            self._dir.write_manifest(self._manifest(complete))


def _shapes_and_items(groups):
    """({group: {name: shape}}, iterable of (group, {name: tensor})) from either form of `groups`."""
    if isinstance(groups, dict):
        shapes = {g: {n: tuple(t.shape) for n, t in ps.items()} for g, ps in groups.items()}
        return shapes, groups.items()
    it = iter(groups)
    return next(it), it


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


def _adamw_into(a: AdamConfig, t: int, old, new, g: torch.Tensor) -> None:
    """AdamW step t from slot `old` (weights, m, v) into slot `new`: the slot is copied, then
    updated in place by torch's fused AdamW kernel, the one `measure train` runs
    (measure/train.make_adamw). On the 2-core CPU, loaded, one GPT-2-small block (7.1M parameters):
    113-118 ms with the copy against 350-387 ms op by op (docs/stream.md), less time the
    optimizer thread takes from the backward. Where the fused kernel is missing: the op-by-op math."""
    for o, n in zip(old, new):
        n.copy_(o)
    try:
        torch._fused_adamw_([new[0]], [g], [new[1]], [new[2]], [], [torch.tensor(float(t))], lr=a.lr,
                            beta1=a.beta1, beta2=a.beta2, weight_decay=a.weight_decay, eps=a.eps,
                            amsgrad=False, maximize=False)
    except (AttributeError, RuntimeError, NotImplementedError):
        _adamw_ops(a, t, new, g)


def _adamw_ops(a: AdamConfig, t: int, new, g: torch.Tensor) -> None:
    """torch.optim.AdamW's single-tensor path, op for op, in place on a slot."""
    new[0].mul_(1 - a.lr * a.weight_decay)
    new[1].lerp_(g, 1 - a.beta1)
    new[2].mul_(a.beta2).addcmul_(g, g, value=1 - a.beta2)
    denom = (new[2].sqrt() / math.sqrt(1 - a.beta2 ** t)).add_(a.eps)
    new[0].addcdiv_(new[1], denom, value=-a.lr / (1 - a.beta1 ** t))
