"""Host memory of this process and of the machine (Linux; no torch), for the torch runs (measure, stream).

    from llmbench.measure import hostmem as memory
    memory.reuse_heap()                 # freed tensors are reused, not faulted in again (see below)
    memory.peak_rss_bytes()             # the process's high-water mark so far (VmHWM)
    memory.available_bytes()            # what the kernel says can still be allocated

Why `reuse_heap`. torch's CPU allocator is glibc malloc, and glibc serves every block above its
mmap threshold (128 KiB, raised up to 32 MiB as large blocks are freed) as a mapping of its own,
unmapped when freed: each training step gets its activations, logits, gradients (and a streamed
step its layer-sized weight buffers) as fresh pages, and the kernel zeroes each 4 KiB page on its
first touch. Counted on this project's 2-core CPU host (gpt2-small, 8 x 256, fp32): 1.4 million
minor page faults and 2.3-5.7 s of system CPU time per `measure train` step (6.2-8.3 s a step),
1.7 million in a streamed step, whose threads' allocations come from per-thread arenas (64 MiB heaps,
so every layer-sized block there is a mapping too). A GPU has no such cost: torch's CUDA caching
allocator keeps freed blocks for the next step. `reuse_heap` makes glibc behave the same way:
one arena for all threads (`M_ARENA_MAX`), no mapping of its own for any block up to 1 GiB
(`M_MMAP_THRESHOLD`) and no trimming of the heap's top below 2 GiB (`M_TRIM_THRESHOLD`; mallopt
takes a C int, and ctypes silently wraps a larger value: 2**40 became 0, trim on every free), so
a step reuses the previous step's freed pages: once the heap has grown to the working set (2-3
steps), 0 faults in most steps, 0.03-0.13 s of system time, 5.7-5.9 s a step. The process keeps
its working set's high-water mark, as a caching allocator does. (Allocators that cache,
jemalloc or tcmalloc by LD_PRELOAD, are the usual CPU advice — PyTorch's performance tuning guide,
pytorch/tutorials#1512; DeepRec's CPU memory optimisation cites the page faults of large blocks —
but a preload cannot be set from inside the process.) What one heap keeps beyond the live
tensors is its fragmentation: with the disk store, where host RAM is the scarce resource, peak
RSS above a warm process was 15.2 / 13.8 / 10.0 bytes per parameter at 6 / 12 / 24 layers (tiny
model, width 384) against 7.8 / 4.3 / 2.3 with every block of 1 MiB or more its own mapping. So a
stream run with a disk store calls `bound_heap` (that 1 MiB threshold, and the heap's top trimmed
again), and pays the faults, small next to its disk reads; and a CPU run whose estimated peak
(a stream run's; measure's training suites: footprint "measure") would leave less than
REUSE_HEADROOM of it free asks `heap_for`, which falls back to `bound_heap` too: `stream
compare` of GPT-2 medium at 16 x 256 peaked at 22.2 GiB with `bound_heap` and was killed for
memory at 24.3 GB, still in its warm-up, with `reuse_heap`.
Both are process-wide and apply to the allocations after them; threads started before keep
the arenas they have. `measure serve` keeps glibc's default: its steps allocate little (no page
faults either way for a small model) and ran 5-20% slower on one heap (docs/serve.md).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import resource

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc malloc.h
MMAP_THRESHOLD_BYTES = 1 << 30
TRIM_THRESHOLD_BYTES = (1 << 31) - 1  # mallopt takes a C int: the largest it can say
#: peak RSS with reuse_heap over that with bound_heap: `stream compare`, gpt2-small 8 x 256, fp32,
#: this CPU host: 10.4-10.5 GB (two runs, 2026-12-05) against 8.0 GB (2026-12-04)
REUSE_HEADROOM = 1.3
BOUND_MMAP_THRESHOLD_BYTES = 1 << 20
BOUND_TRIM_THRESHOLD_BYTES = 128 << 10  # glibc's default


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except OSError:
        return None


def reuse_heap() -> bool:
    """Keep freed blocks for reuse (see the module docstring). False where there is no glibc or
    it refuses a setting."""
    libc = _libc()
    try:
        return all([libc.mallopt(M_ARENA_MAX, 1), libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
                    libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)])
    except (AttributeError, TypeError):
        return False


def heap_for(need_bytes: int | None) -> str:
    """`reuse_heap` where the machine has REUSE_HEADROOM x `need_bytes` available (what one heap
    keeps beyond the live tensors), else `bound_heap`: 'reuse' or 'bound'."""
    avail = available_bytes()
    if need_bytes is None or avail is None or avail >= REUSE_HEADROOM * need_bytes:
        reuse_heap()
        return "reuse"
    bound_heap()
    return "bound"


def bound_heap() -> bool:
    """Every block of 1 MiB or more its own mapping, returned to the OS when freed (see the module
    docstring). False where there is no glibc or it refuses a setting."""
    libc = _libc()
    try:
        return all([libc.mallopt(M_MMAP_THRESHOLD, BOUND_MMAP_THRESHOLD_BYTES),
                    libc.mallopt(M_TRIM_THRESHOLD, BOUND_TRIM_THRESHOLD_BYTES)])
    except (AttributeError, TypeError):
        return False


def release_freed_memory() -> None:
    """Give the heaps' free pages back to the OS (glibc `malloc_trim`); no-op elsewhere."""
    libc = _libc()
    try:
        libc.malloc_trim(0)
    except (AttributeError, TypeError):
        pass


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far: VmHWM. Not `ru_maxrss`: Linux carries the
    parent's RSS at fork into a child's ru_maxrss across exec, so a child of a big process (a
    test runner, torchrun) reports its parent's size until it outgrows it."""
    hwm = _meminfo("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _meminfo(key: str, path: str = "/proc/self/status") -> int | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_bytes() -> int | None:
    """This process's resident set size now (VmRSS)."""
    return _meminfo("VmRSS")


def available_bytes() -> int | None:
    """MemAvailable: memory the kernel can give without swapping (page cache it can drop included)."""
    return _meminfo("MemAvailable", "/proc/meminfo")


def total_bytes() -> int | None:
    """MemTotal: the machine's RAM."""
    return _meminfo("MemTotal", "/proc/meminfo")
