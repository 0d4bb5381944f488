"""Reused CPU memory for ``run_with_cache``: a pool of the storage that earlier caches released.

Why a pool, and why it copies. PyTorch's CPU allocator does not cache: every tensor is a
glibc ``malloc`` and every release a ``free``. A plain forward frees each intermediate
within a layer or two, so glibc hands the same memory back to the next one. A full cache
keeps every activation alive until the user drops it: glibc grows the heap (or maps new
blocks) by the cache's size during the forward, and when the cache is dropped it gives that
memory back to the kernel (it trims the heap's top and unmaps big blocks). The next call's
activations then land on fresh pages, which the kernel maps and zeroes on first touch, one
page fault per 4 KiB: on a GPT-2-small-shaped model about a quarter of a full cache's time.

The cached tensors are the forward's own outputs, which torch allocates; nothing can steer
those allocations into a pool short of changing the allocator for the whole process (the
glibc settings the README describes, which are opt-in). So on the CPU ``run_with_cache``
copies each activation into a storage from this pool instead of keeping it: the copy costs
memory bandwidth, the forward's intermediates die as in a plain forward, and the pool's
storages stay mapped from one call to the next, so a repeated cache costs no page faults.

A storage is reused only when nothing but the pool refers to it (no tensor, view, numpy
array or storage object the user holds): a cache the user keeps is never overwritten. After
each call the pool lets go of the free storages that call did not reuse, so it holds at most
one spare cache beyond the caches the user keeps, and memory stays flat over repeated calls.

Example:
    >>> _, cache = model.run_with_cache(tokens)   # the first call allocates
    >>> del cache
    >>> _, cache = model.run_with_cache(tokens)   # this one reuses that memory
    >>> interp.cache_memory.set_reuse(False)      # keep the activations themselves instead
"""

from __future__ import annotations

import math
import mmap
import sys
import threading
import weakref

import torch
from torch import Tensor, nn

# Off by default: on a quiet 2-core machine (GPT-2-small shape, 4 x 256 tokens) the copy
# made a full cache 1.29x the forward against 1.08x without it, with more page faults
# (241,000 against 88,000), so the pool is an opt-in experiment until it pays for itself.
_reuse = False
_MAPPED_BYTES = 256 << 10  # above glibc's default mmap threshold (128 KiB)
_HUGE_PAGE = 2 << 20


def set_reuse(enabled: bool) -> bool:
    """Turn the pool on or off for every model in this process (off by default); returns the
    previous setting. Off, a CPU cache holds the activations themselves (no copy)."""
    global _reuse
    previous, _reuse = _reuse, bool(enabled)
    return previous


def _is_free(storages: list[torch.UntypedStorage], index: int) -> bool:
    """Whether only the pool's list refers to ``storages[index]``: no tensor holds it (each
    holds one count of the storage, the pool's Python object another) and nothing else holds
    that Python object (the one every tensor's ``untyped_storage()`` returns). ``getrefcount``
    sees the list's reference and the one its argument takes."""
    pointer = storages[index]._cdata
    return torch._C._storage_Use_Count(pointer) == 1 and sys.getrefcount(storages[index]) == 2


def _mapped_storage(nbytes: int) -> torch.UntypedStorage:
    """``nbytes`` of memory mapped for this storage alone (unmapped when it dies), so a big
    storage the pool holds never sits inside glibc's heap: there it would fragment the heap
    that the forward's own intermediates reuse, and cost the forward page faults of its own.
    Small storages (glibc keeps those in its heap anyway), and any the kernel will not map,
    come from torch's allocator."""
    if nbytes < _MAPPED_BYTES:
        return torch.UntypedStorage(nbytes)
    try:
        memory = mmap.mmap(-1, nbytes)
    except OSError:  # e.g. the process's limit on mappings
        return torch.UntypedStorage(nbytes)
    if nbytes >= _HUGE_PAGE and hasattr(mmap, "MADV_HUGEPAGE"):
        memory.madvise(mmap.MADV_HUGEPAGE)  # 2 MiB pages: the first call faults 512x less
    return torch.frombuffer(memory, dtype=torch.uint8).untyped_storage()


class StoragePool:
    """CPU storages by size in bytes, lent out as tensors and taken back once unreferenced."""

    def __init__(self) -> None:
        self._storages: dict[int, list[torch.UntypedStorage]] = {}
        self._lock = threading.Lock()

    def nbytes(self) -> int:
        """Bytes the pool holds, lent out or not."""
        with self._lock:
            return sum(size * len(storages) for size, storages in self._storages.items())

    def empty(self, shape: torch.Size, dtype: torch.dtype, taken: set[int]) -> Tensor:
        """A contiguous CPU tensor of ``shape`` and ``dtype`` on a free storage of exactly
        its size (a new one if none is free); the storage's id is added to ``taken``."""
        nbytes = math.prod(shape) * dtype.itemsize
        with self._lock:
            same_size = self._storages.setdefault(nbytes, [])
            free = next((i for i in range(len(same_size)) if _is_free(same_size, i)), None)
            if free is None:
                same_size.append(_mapped_storage(nbytes))
                free = len(same_size) - 1
            storage = same_size[free]
            taken.add(id(storage))
            # A normal tensor even under inference_mode, so the next call may write it.
            with torch.inference_mode(False):
                return torch.empty(0, dtype=dtype).set_(storage, 0, shape)

    def release_free(self, keep: set[int]) -> None:
        """Let go of the free storages whose ids are not in ``keep``."""
        with self._lock:
            for size, storages in list(self._storages.items()):
                kept = [
                    storages[i]
                    for i in range(len(storages))
                    if id(storages[i]) in keep or not _is_free(storages, i)
                ]
                if kept:
                    self._storages[size] = kept
                else:
                    del self._storages[size]


class PoolLease:
    """One ``run_with_cache`` call's use of a pool: CPU copies of its activations, one copy
    for an activation that several hooks see (so aliases stay aliases)."""

    def __init__(self, pool: StoragePool) -> None:
        self.pool = pool
        self.taken: set[int] = set()
        # id(activation) -> (the activation, weakly; its version; the axis sliced; the copy)
        self._copies: dict[int, tuple[weakref.ref, int | None, int, Tensor]] = {}

    def copy(self, source: Tensor, dtype: torch.dtype) -> Tensor:
        """``source`` (a CPU tensor) copied, in ``dtype``, into a pool storage. An axis that
        ``source`` broadcasts (stride 0, as the positional embedding's batch axis) is copied
        once and broadcast again, so the copy is no bigger than what it copies."""
        broadcast = [
            axis
            for axis, (size, stride) in enumerate(zip(source.shape, source.stride(), strict=True))
            if stride == 0 and size > 1
        ]
        compact = source
        for axis in broadcast:
            compact = compact.narrow(axis, 0, 1)
        copy = self.pool.empty(compact.shape, dtype, self.taken).copy_(compact)
        return copy.expand(source.shape) if broadcast else copy

    def copy_of(self, activation: Tensor, key: int) -> Tensor | None:
        """The copy made earlier in this call of this very activation (same tensor, not
        modified since, same ``key``), or None."""
        seen = self._copies.get(id(activation))
        if seen is None:
            return None
        ref, version, seen_key, copy = seen
        if ref() is activation and version == _version(activation) and seen_key == key:
            return copy.detach()  # its own tensor on the same storage, as an alias would be
        return None

    def remember(self, activation: Tensor, key: int, copy: Tensor) -> None:
        self._copies[id(activation)] = (weakref.ref(activation), _version(activation), key, copy)

    def __enter__(self) -> PoolLease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._copies.clear()
        self.pool.release_free(self.taken)


def _version(activation: Tensor) -> int | None:
    """The count of in-place changes to ``activation``; None for an inference tensor, which
    keeps none (under ``torch.inference_mode`` the same tensor is taken as unchanged)."""
    return None if activation.is_inference() else activation._version


_pools: weakref.WeakKeyDictionary[nn.Module, StoragePool] = weakref.WeakKeyDictionary()
_pools_lock = threading.Lock()


def pool_for(model: nn.Module) -> StoragePool:
    """``model``'s pool (one a model, created on first use, gone with the model)."""
    with _pools_lock:
        if model not in _pools:
            _pools[model] = StoragePool()
        return _pools[model]


def lease(model: nn.Module) -> PoolLease | None:
    """A lease on ``model``'s pool for one call, to use as a context manager (on exit it
    releases the free storages the call did not reuse); None when reuse is off."""
    return PoolLease(pool_for(model)) if _reuse else None
