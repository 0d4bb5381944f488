"""Opt-in, for a whole process: glibc's ``malloc`` keeps the memory it frees.

Why a full cache on the CPU costs more than the forward. PyTorch's CPU tensors are glibc
``malloc`` blocks (its CPU allocator does not cache). A plain forward frees each intermediate
within a layer or two, so glibc hands the same memory to the next one. A full cache keeps
every activation alive until the user drops it; then glibc gives that memory back to the
kernel (it unmaps blocks above its mmap threshold and trims its heap's free top), and the
next call's activations land on fresh pages that the kernel maps and zeroes on first touch,
one page fault per 4 KiB: about 290,000 faults a call on a GPT-2-small-shaped model at
4 x 256 tokens (fp32), against 50,000-130,000 for its forward (the 206 MB of logits).

``keep_freed_memory()`` sets glibc's two thresholds so high that it serves every block from
its heap and never trims it: freed memory is reused without faults (3 a full cache, none a
forward, on that shape; the cache then costs 1.02-1.03x the forward in CPU time against
1.08-1.09x, one thread), and the process's resident memory stays at its peak instead of
shrinking. That is a choice for the whole process, so the library never makes it on import;
the processes interp owns make it (``interp harvest``, ``interp serve``,
``interp demo`` and ``python -m interp.harvest``, which ``torchrun`` launches), and a script,
notebook or worker that runs many caches can call it first.

What else was measured, and why it is not the library's default (the README gives the
figures): a per-model pool that copied each activation into storage earlier caches released
halved the faults but paid a copy of every activation and held a spare cache's memory, for
no gain in time, so it was removed; setting the thresholds only around ``run_with_cache``
cannot work, since the cache is freed later, outside the call, and ``mallopt`` turns glibc's
adaptive mmap threshold off for good; PyTorch's ``THP_MEM_ALLOC_ENABLE=1`` (huge pages for
tensors of 2 MiB or more) is read once, at the process's first allocation, is as
process-wide as these settings, and cost more CPU time (1.37x: the kernel still zeroes
every page). The same settings before Python starts are the environment
variables ``MALLOC_MMAP_THRESHOLD_=2147483647 MALLOC_TRIM_THRESHOLD_=2147483647``; preloading
tcmalloc (``LD_PRELOAD=libtcmalloc_minimal.so.4``) is the other route.

Example:
    >>> import interp.utils.malloc_tuning
    >>> interp.utils.malloc_tuning.keep_freed_memory()
    True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

# mallopt's parameter numbers (glibc's malloc.h) and the largest value it takes (an int).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
_LARGEST = 2**31 - 1


def keep_freed_memory() -> bool:
    """Make glibc keep and reuse freed memory in this process (see the module's docstring).

    Returns False, changing nothing, where the C library is not glibc (macOS, musl) or
    refuses the settings. Calling it again changes nothing more.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    settings = (M_TRIM_THRESHOLD, _LARGEST), (M_MMAP_THRESHOLD, _LARGEST)
    return all(libc.mallopt(parameter, value) == 1 for parameter, value in settings)
