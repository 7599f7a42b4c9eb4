"""Host memory of this process and of the machine (Linux; no torch), for the streaming runs.

    from llmbench.streaming import memory
    memory.bound_heap()                 # freed tensors go back to the OS (see below)
    memory.peak_rss_bytes()             # the process's high-water mark so far (VmHWM)
    memory.available_bytes()            # what the kernel says can still be allocated

Why `bound_heap`. torch's CPU allocator is glibc malloc. glibc raises its mmap threshold each time
a large mmapped block is freed (up to 32 MiB), after which blocks below that size come from heaps
that keep freed memory resident, one heap per thread (the loader and optimizer threads have their
own). A streamed step allocates and frees layer-sized buffers on three threads, and the resident
phase of `stream compare` frees 16 bytes per parameter before the store takes 24: with the dynamic
threshold the process kept both (46 bytes per parameter measured on a 25M-parameter model against
28 with a fixed threshold). `bound_heap` fixes the threshold at 1 MiB (`mallopt(M_MMAP_THRESHOLD)`,
which also turns the dynamic rule off): every tensor of 1 MiB or more is its own mapping, returned
to the OS when freed. It is a process-wide setting; it costs page faults on re-allocation, which
are small next to the compute of such tensors.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import resource

M_MMAP_THRESHOLD = -3  # glibc malloc.h
MMAP_THRESHOLD_BYTES = 1 << 20


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except OSError:
        return None


def bound_heap(threshold_bytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold (see the module docstring). False where there is no glibc."""
    libc = _libc()
    try:
        return bool(libc.mallopt(M_MMAP_THRESHOLD, int(threshold_bytes)))
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
