"""StreamingExecutor: train a model whose weights live in a ParameterStore, streaming them to the
compute device one layer at a time (the Cerebras weight-streaming execution, on torch).

    ex = StreamingExecutor(skeleton, store, device=torch.device("cpu"), prefetch=1)
    loss = ex.train_step(idx, targets)

The model is wrapped from outside: `embed`, each `blocks[i]` and `head` run through
`torch.func.functional_call` with weights the executor materialised; the model's own parameters
may live on the meta device (no memory). One step:

  forward   ends (embeddings + head, kept for the step), then block 0 .. L-1: each block's weights
            are materialised as one flat leaf tensor, used, then its storage is freed
            (`untyped_storage().resize_(0)`, as FSDP does); the autograd graph and the activations
            stay on the device, holding views of the freed storage.
  backward  the head's backward, then block L-1 .. 0: block i's storage is re-filled with the same
            weights (re-streamed, through an alias so autograd's version counters stay valid),
            `torch.autograd.backward(out_i, grad_out_i)`, the flat gradient streams back to the store
            and the store-side AdamW of block i runs on a worker thread while block i-1's backward
            computes. The last block stays resident across the turn.

Mixed precision (`precision="bf16"|"fp16"`): the store keeps fp32 masters and moments; the loader
casts each layer to the compute dtype on the store side, so the link and the device carry 2 bytes
per weight; the gradient of that copy goes back in the compute dtype (one rank) or is upcast to
fp32 before the data-parallel reduction, and the store upcasts, unscales (fp16: the loss was
multiplied by the store's loss scale) and checks it before AdamW (precision.py).

A loader thread runs the schedule `prefetch` layers ahead (on an accelerator it copies from pinned
host memory on a side stream; on CPU the background thread itself copies). No recomputation: the
forward's activations are kept, so the streamed step does the resident step's FLOPs exactly;
`recompute=True` keeps only each block's input and runs the block's forward again in the backward
(one more forward of FLOPs, activation memory of one layer plus the block inputs).
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn
from torch.func import functional_call

from llmbench.streaming import sparse as sp
from llmbench.streaming.precision import ELEMENT_BYTES, needs_loss_scale
from llmbench.streaming.store import ParameterStore

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
MAX_PENDING_UPDATES = 2
"""gradients queued for the store-side optimizer before the backward waits"""


def group_params(model: nn.Module) -> dict[str, dict[str, nn.Parameter]]:
    """Stream groups of a Transformer (embed / blocks / head): `ends` = embedding + head
    parameters (tied ones once), then `block.i`. Keys are the model's parameter names."""
    names = {id(p): n for n, p in model.named_parameters()}
    ends = {}
    for part in (model.embedding, model.head_module):
        for p in part.parameters():
            ends.setdefault(names[id(p)], p)
    groups = {"ends": ends}
    for i, block in enumerate(model.blocks):
        groups[f"block.{i}"] = {names[id(p)]: p for p in block.parameters()}
    return groups


class DeviceAccount:
    """Bytes of weights and gradients materialised on the compute device, counted at each
    allocation and free (on CPU the 'device' copy is a separate tensor, counted the same way)."""

    def __init__(self, budget_bytes: int | None = None):
        self.budget_bytes = budget_bytes
        self.weight_bytes = self.grad_bytes = 0
        self.weight_bytes_peak = self.grad_bytes_peak = self.total_bytes_peak = 0
        self._lock = threading.Lock()

    def add(self, weight: int = 0, grad: int = 0) -> None:
        with self._lock:
            self.weight_bytes += weight
            self.grad_bytes += grad
            self.weight_bytes_peak = max(self.weight_bytes_peak, self.weight_bytes)
            self.grad_bytes_peak = max(self.grad_bytes_peak, self.grad_bytes)
            total = self.weight_bytes + self.grad_bytes
            self.total_bytes_peak = max(self.total_bytes_peak, total)
            if self.budget_bytes is not None and total > self.budget_bytes:
                raise ValueError(f"streamed weights and gradients need {total:,} bytes on the device, "
                                 f"over --device-memory-budget {self.budget_bytes:,}")


class StreamingExecutor:
    """Layer-by-layer forward/backward over a ParameterStore (rank 0) or a SwarmComm (all ranks)."""

    def __init__(self, model: nn.Module, store: ParameterStore | None, *, device: torch.device,
                 prefetch: int = 1, comm=None, budget_bytes: int | None = None,
                 record_digests: bool = False, recompute: bool = False, precision: str = "fp32"):
        if prefetch < 0:
            raise ValueError(f"--prefetch must be >= 0, got {prefetch}")
        self.model, self.store, self.device, self.prefetch, self.comm = model, store, device, prefetch, comm
        self.dtype = DTYPES[precision]
        self.elsize = ELEMENT_BYTES[precision]
        self.scaled = needs_loss_scale(precision)
        self.owner = comm is None or comm.rank == 0
        if self.owner and store is None:
            raise ValueError("the store owner (rank 0) needs a ParameterStore")
        self.groups = list(group_params(model))
        self.layout = {g: [(n, tuple(p.shape), p.numel()) for n, p in ps.items()]
                       for g, ps in group_params(model).items()}
        self.numel = {g: sum(n for *_, n in sl) for g, sl in self.layout.items()}
        self.n_layers = len(model.blocks)
        self.account = DeviceAccount(budget_bytes)
        self.record_digests = record_digests
        self.recompute = recompute
        self._local_names(model)
        self._sparse_setup()
        self._accel = device.type != "cpu"
        if self._accel:
            mod = torch.get_device_module(device)
            self._mod, self._side = mod, mod.Stream(device)
            self._grad_stream = mod.Stream(device)
        self._permits = threading.Semaphore(prefetch + 1)
        self._work: queue.Queue = queue.Queue()
        self._ready: queue.Queue = queue.Queue()
        self._released: dict[str, threading.Event] = {}
        self._flats: dict[str, torch.Tensor] = {}
        self._opt = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-optimizer")
        self._futures = []
        self._stopping = False
        self.reset_stats()
        self._thread = threading.Thread(target=self._loader, name="stream-loader", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ set-up

    def _local_names(self, model: nn.Module) -> None:
        """For each submodule we call: its local parameter name -> the group's (global) name."""
        glob = {id(p): n for n, p in model.named_parameters()}
        self._local = {}
        for key, mod in [("embed", model.embedding), ("head", model.head_module)] + \
                [(f"block.{i}", b) for i, b in enumerate(model.blocks)]:
            self._local[key] = {ln: glob[id(p)] for ln, p in mod.named_parameters(remove_duplicate=False)}

    def _sparse_setup(self) -> None:
        """Rank 0's store holds the masks; with data parallel the other ranks learn how many
        weights each masked group keeps (the size of its broadcast), then get the masks with
        every broadcast."""
        self._mask_dev: dict[str, torch.Tensor] = {}
        self._bits: dict[str, torch.Tensor] = {}
        self._n_kept: dict[str, int] = {}
        masks = {g: self.store.mask(g) for g in self.groups} if self.owner else {}
        for g, m in masks.items():
            if m is not None:
                self._bits[g] = sp.pack_bits(m)
                self._mask_dev[g] = m.to(self.device)
                self._n_kept[g] = int(m.sum())
        if self.comm is not None:
            self._n_kept = self.comm.gather_objects(self._n_kept)[0]
            for g in self._n_kept:
                self._bits.setdefault(g, torch.zeros((self.numel[g] + 7) // 8, dtype=torch.uint8))

    def reset_stats(self) -> None:
        self.stats = {"weight_bytes_in": 0, "grad_bytes_out": 0, "stream_wait_s": 0.0,
                      "optimizer_wait_s": 0.0, "optimizer_busy_s": 0.0, "steps": 0,
                      "skipped_steps": 0, "fetch_busy_s": 0.0, "forward_s": 0.0, "backward_s": 0.0,
                      "reduce_s": 0.0}
        self.digests: list[str] = []

    # ------------------------------------------------------------ the loader (store -> device)

    def _loader(self) -> None:
        if self._accel and self.device.index is not None:
            self._mod.set_device(self.device.index)
        while True:
            item = self._work.get()
            if item is None or self._stopping:
                return
            group, phase = item
            try:
                if group != "ends":
                    self._permits.acquire()
                if phase == "bwd":
                    self._released[group].wait()
                t0 = time.perf_counter()
                got = self._materialise(group, self._flats.get(group) if phase == "bwd" else None)
                self.stats["fetch_busy_s"] += time.perf_counter() - t0  # one loader: no race
                self._ready.put((group, got))
            except BaseException as e:  # hand it to the main thread
                self._ready.put((group, e))

    def _materialise(self, group: str, flat: torch.Tensor | None):
        if not self._accel:
            return self._alloc_fill(group, flat), None
        # allocate and copy on the side stream; _take makes the compute stream wait for it and
        # record_stream()s the storage, so a free on the compute stream is stream-safe
        with self._mod.stream(self._side):
            flat = self._alloc_fill(group, flat)
            return flat, self._side.record_event()

    def _alloc_fill(self, group: str, flat: torch.Tensor | None) -> torch.Tensor:
        n = self.numel[group]
        fresh = flat is None
        if fresh:
            flat = torch.empty(n, dtype=self.dtype, device=self.device)
        else:
            flat.untyped_storage().resize_(n * self.elsize)
        self.account.add(weight=n * self.elsize)
        # fill through an alias: the same storage, its own version counter, so the autograd graph
        # that saved views of `flat` in the forward accepts the re-streamed weights
        alias = torch.empty(0, dtype=self.dtype, device=self.device).set_(
            flat.untyped_storage(), 0, (n,), (1,))
        self._fill(group, alias)
        if fresh:
            flat.requires_grad_(True)
        return flat

    def _fill(self, group: str, alias: torch.Tensor) -> None:
        """Copy the committed weights into `alias` in the compute dtype (rank 0), then broadcast
        them (data parallel). The fp32 -> bf16/fp16 cast happens on the store side, so the link
        carries 2 bytes per weight."""
        if group in self._bits:
            return self._fill_sparse(group, alias)
        if self.owner:
            src = self._host(self.store.weights(group))
            self.stats["weight_bytes_in"] += src.numel() * self.elsize
            alias.copy_(src, non_blocking=self._accel)
            self.store.release(group)  # after the copy: `src` may be the mapped store itself
        if self.comm is not None:
            self.comm.broadcast(alias)
            if not self.owner:
                self.stats["weight_bytes_in"] += alias.numel() * self.elsize

    def _host(self, src: torch.Tensor) -> torch.Tensor:
        """What crosses the link: `src` in the compute dtype, in pinned memory on an accelerator."""
        if src.dtype == self.dtype and (not self._accel or src.is_pinned()):
            return src
        return self._host_buffer(src.shape).copy_(src)

    def _host_buffer(self, shape) -> torch.Tensor:
        """A host buffer in the compute dtype: pinned on an accelerator (torch's caching host
        allocator reuses the blocks once their copies are done)."""
        return torch.empty(shape, dtype=self.dtype, pin_memory=self._accel)

    def _fill_sparse(self, group: str, alias: torch.Tensor) -> None:
        """Sparse: the kept values and the bitmask cross the link (and the broadcast: every rank
        decodes rank 0's mask, so the masks are identical on all ranks); the device rebuilds the
        dense layer and keeps the mask to select the kept gradients."""
        if self.owner:
            values, bits = sp.encode(self.store.weights(group), self.store.mask(group), self._bits[group])
            values = self._host(values)
            self.store.release(group)
            vals = values.to(self.device, non_blocking=True) if self._accel else values.clone()
            bits = bits.to(self.device, non_blocking=True) if self._accel else bits.clone()
        else:
            vals = torch.empty(self._n_kept[group], dtype=self.dtype, device=self.device)
            bits = torch.empty_like(self._bits[group], device=self.device)
        if self.comm is not None:
            self.comm.broadcast(vals)
            self.comm.broadcast(bits)
        self.stats["weight_bytes_in"] += vals.numel() * self.elsize + bits.numel()
        self._mask_dev[group] = sp.decode_into(alias, vals, bits)

    def _take(self, group: str) -> torch.Tensor:
        t0 = time.perf_counter()
        got, result = self._ready.get()
        self.stats["stream_wait_s"] += time.perf_counter() - t0
        if isinstance(result, BaseException):
            raise result
        if got != group:
            raise RuntimeError(f"loader out of order: wanted {group}, got {got}")
        flat, event = result
        if event is not None:
            cur = self._mod.current_stream(self.device)
            cur.wait_event(event)
            flat.record_stream(cur)
        self._flats[group] = flat
        return flat

    def _free_weights(self, group: str, flat: torch.Tensor) -> None:
        flat.untyped_storage().resize_(0)
        self.account.add(weight=-self.numel[group] * self.elsize)
        if group != "ends":
            self._permits.release()

    def _views(self, key: str, flats: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """local name -> view of the group's flat weights, for functional_call"""
        out = {}
        for g, flat in flats.items():
            parts = torch.split(flat, [n for *_, n in self.layout[g]])
            byname = {name: t.view(shape) for (name, shape, _), t in zip(self.layout[g], parts)}
            out.update(byname)
        return {ln: out[gn] for ln, gn in self._local[key].items()}

    # ------------------------------------------------------------ gradients (device -> store)

    def _grad_out(self, group: str, flat: torch.Tensor) -> None:
        grad = flat.grad
        flat.grad = None
        mask = self._mask_dev.get(group)
        payload = grad[mask] if mask is not None else grad
        if self.comm is not None:  # an fp32 sum, on the device (NCCL needs device tensors)
            t0 = time.perf_counter()
            payload = self.comm.reduce_mean(payload.float())
            self.stats["reduce_s"] += time.perf_counter() - t0
        event = None
        if self._accel and self.owner:
            compute = self._mod.current_stream(self.device)
            with self._mod.stream(self._grad_stream):
                self._grad_stream.wait_stream(compute)  # the gradient is complete
                payload.record_stream(self._grad_stream)
                payload = payload.to("cpu", non_blocking=True)
                event = self._grad_stream.record_event()
        self.stats["grad_bytes_out"] += payload.numel() * payload.element_size()
        self.account.add(grad=-grad.numel() * self.elsize)
        if self.owner:
            self._backpressure()
            self._futures.append(self._opt.submit(self._update, group, payload, event))

    def _backpressure(self) -> None:
        """At most MAX_PENDING_UPDATES gradients wait for the store-side optimizer: when the store
        is slower than the backward (a disk tier), the backward waits (counted as exposed optimizer
        time) instead of queueing every layer's gradient in host memory."""
        t0 = time.perf_counter()
        while sum(not f.done() for f in self._futures) >= MAX_PENDING_UPDATES:
            next(f for f in self._futures if not f.done()).result()
        self.stats["optimizer_wait_s"] += time.perf_counter() - t0

    def _update(self, group: str, payload: torch.Tensor, event) -> None:
        t0 = time.perf_counter()
        if event is not None:
            event.synchronize()
        mask = self.store.mask(group)
        if mask is not None:
            dense = torch.zeros(self.numel[group], dtype=torch.float32)
            dense[mask] = payload.cpu()
            payload = dense
        self.store.update(group, payload.cpu())  # upcast to fp32 (and unscaled) there
        self.store.release(group)
        self.stats["optimizer_busy_s"] += time.perf_counter() - t0  # one worker: no race

    # ------------------------------------------------------------ one step

    def train_step(self, idx: torch.Tensor, targets: torch.Tensor) -> float:
        L = self.n_layers
        self._released = {f"block.{i}": threading.Event() for i in range(L)}
        for item in [("ends", "fwd")] + [(f"block.{i}", "fwd") for i in range(L)] + \
                [(f"block.{i}", "bwd") for i in range(L - 2, -1, -1)]:
            self._work.put(item)
        m = self.model
        scale = self._loss_scale()
        t0, waited = time.perf_counter(), self._waited()
        ends = self._take("ends")
        x0 = functional_call(m.embedding, self._views("embed", {"ends": ends}), (idx,))
        x, acts = x0.detach(), []
        for i in range(L):
            g = f"block.{i}"
            flat = self._take(g)
            if self.record_digests:
                self._digest(flat)
            x_in, out = self._block_forward(i, flat, x)
            acts.append((x_in, out))
            if i < L - 1:
                self._free_weights(g, flat)
                self._released[g].set()
            x = out
        h = x.detach().requires_grad_(True)
        logits = functional_call(m.head_module, self._views("head", {"ends": ends}), (h,))
        loss = m.loss(logits, targets)
        del logits
        t0, waited = self._phase("forward_s", t0, waited), self._waited()
        self._backward(loss * scale if scale is not None else loss, ends,
                       grad_bytes=self.numel["ends"] * self.elsize)
        grad = h.grad
        for i in range(L - 1, -1, -1):
            g = f"block.{i}"
            flat = self._take(g) if i < L - 1 else self._flats[g]
            x_in, out = acts[i]
            acts[i] = None
            if self.recompute:  # rebuild the block's graph from its input, with the re-streamed weights
                x_in.requires_grad_(True)
                out = functional_call(m.blocks[i], self._views(g, {g: flat}), (x_in,))
            self._backward(out, flat, grad, grad_bytes=self.numel[g] * self.elsize)
            grad = x_in.grad
            self._grad_out(g, flat)
            self._free_weights(g, flat)
        self._backward(x0, None, grad)
        self._grad_out("ends", ends)
        self._free_weights("ends", ends)
        self._phase("backward_s", t0, waited)
        return self._finish_step(loss.detach())

    def _waited(self) -> float:
        """seconds so far that the main thread waited (weights, optimizer) or reduced"""
        st = self.stats
        return st["stream_wait_s"] + st["optimizer_wait_s"] + st["reduce_s"]

    def _phase(self, name: str, t0: float, waited: float) -> float:
        """Add the compute time since t0 (the wall time less the waits in it) to stats[name]."""
        now = time.perf_counter()
        self.stats[name] += now - t0 - (self._waited() - waited)
        return now

    def _loss_scale(self) -> float | None:
        """fp16: this step's loss scale, rank 0's (its store keeps the scaler), on every rank."""
        if not self.scaled:
            return None
        scale = self.store.loss_scale.scale if self.owner else None
        return self.comm.gather_objects(scale)[0] if self.comm is not None else scale

    def _block_forward(self, i: int, flat: torch.Tensor, x: torch.Tensor):
        """Block i's forward on its own leaf input; with recompute, no graph is kept (the device
        keeps the block's input only and the backward runs the forward again)."""
        g = f"block.{i}"
        x_in = x.detach().requires_grad_(not self.recompute)
        with torch.set_grad_enabled(not self.recompute):
            out = functional_call(self.model.blocks[i], self._views(g, {g: flat}), (x_in,))
        return x_in, out

    def _backward(self, out, flat, grad=None, grad_bytes=0) -> None:
        if grad_bytes:
            self.account.add(grad=grad_bytes)
        torch.autograd.backward(out, grad)

    def _finish_step(self, loss: torch.Tensor) -> float:
        if self.comm is not None:
            loss = self.comm.mean_loss(loss)
        value = float(loss)
        t0 = time.perf_counter()
        for f in self._futures:
            f.result()
        self._futures.clear()
        self.stats["optimizer_wait_s"] += time.perf_counter() - t0
        if self.owner and not self.store.finish(value):
            self.stats["skipped_steps"] += 1
        if self.comm is not None:
            self.comm.barrier()
        self.stats["steps"] += 1
        self._flats.clear()
        return value

    def _digest(self, flat: torch.Tensor) -> None:
        import hashlib

        raw = flat.detach().cpu().clone().view(torch.uint8).numpy().tobytes()  # clone: numpy pins storage
        self.digests.append(hashlib.sha1(raw).hexdigest()[:16])

    def close(self) -> None:
        """Stop the loader (also when a step failed half-way and it waits for a permit or a
        release) and the optimizer worker."""
        self._stopping = True
        self._work.put(None)
        for _ in range(self.n_layers + self.prefetch + 2):
            self._permits.release()
        for ev in self._released.values():
            ev.set()
        self._thread.join(timeout=10)
        self._opt.shutdown(wait=True)
