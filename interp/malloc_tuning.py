"""Opt-in, for a whole process: glibc's ``malloc`` keeps the memory it frees.

PyTorch's CPU tensors are glibc ``malloc`` blocks. By default glibc gives big freed blocks
back to the kernel (it unmaps blocks above its mmap threshold and trims the heap's free top),
so the next big tensor lands on fresh pages that the kernel maps and zeroes on first touch,
one page fault per 4 KiB: every forward's logits, and every activation of a full cache once
the previous cache is dropped. ``keep_freed_memory()`` sets the two thresholds so high that
glibc serves every block from its heap and never trims it: freed memory is reused, without
faults, and the process's resident memory stays at its peak instead of shrinking.

That is a choice for a whole process, so the library never makes it on import: call it at
the start of a script, a notebook or a worker that runs many forwards. The same settings as
environment variables, before Python starts, are
``MALLOC_MMAP_THRESHOLD_=2147483647 MALLOC_TRIM_THRESHOLD_=2147483647``; preloading jemalloc
or tcmalloc (``LD_PRELOAD``) is the other route (they cache freed memory themselves).

Example:
    >>> import interp.malloc_tuning
    >>> interp.malloc_tuning.keep_freed_memory()
    True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

from interp import cache_memory

# mallopt's parameter numbers (glibc's malloc.h) and the largest value it takes (an int).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
_LARGEST = 2**31 - 1


def keep_freed_memory() -> bool:
    """Make glibc keep and reuse freed memory in this process (see the module's docstring).

    It also turns ``run_with_cache``'s pool off (``interp.cache_memory.set_reuse(False)``):
    with glibc reusing memory, keeping the activations themselves costs no page faults, and
    the pool's copies would be the only cost left. Returns False, changing nothing, where
    the C library is not glibc (macOS, musl) or refuses the settings.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    settings = (M_TRIM_THRESHOLD, _LARGEST), (M_MMAP_THRESHOLD, _LARGEST)
    if not all(libc.mallopt(parameter, value) == 1 for parameter, value in settings):
        return False
    cache_memory.set_reuse(False)
    return True
