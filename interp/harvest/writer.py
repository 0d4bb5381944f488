"""Shard buffers and the background writer: while a shard is written to disk (serialised,
hashed, fsynced), the next shard's forwards run.

On a GPU the buffers are pinned host memory and each batch's activations are copied into
them with ``non_blocking=True``; the writer waits on a CUDA event recorded after the shard's
last copy, so the host never stalls the GPU for a copy. Two buffer sets alternate: the
harvest blocks only when the writer is a whole shard behind.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from interp.harvest.shards import write_shard
from interp.harvest.stats import RunningStats


@dataclass
class ShardBuffers:
    """Host buffers for one shard: hook -> [capacity, d] in the storage dtype, and the token
    ids [capacity] (int32)."""

    activations: dict[str, Tensor]
    token_ids: Tensor

    @classmethod
    def allocate(
        cls, widths: dict[str, int], capacity: int, dtype: torch.dtype, pinned: bool
    ) -> ShardBuffers:
        def empty(*shape: int, dtype: torch.dtype) -> Tensor:
            return torch.empty(shape, dtype=dtype, pin_memory=pinned)

        activations = {hook: empty(capacity, d, dtype=dtype) for hook, d in widths.items()}
        return cls(activations, empty(capacity, dtype=torch.int32))

    def tensors(self, n_tokens: int) -> dict[str, Tensor]:
        """The first ``n_tokens`` rows, named as the shard file names them."""
        named = {hook: buffer[:n_tokens] for hook, buffer in self.activations.items()}
        named["token_ids"] = self.token_ids[:n_tokens]
        return named


@dataclass
class _Job:
    index: int
    buffers: ShardBuffers
    n_tokens: int
    stats: dict[str, RunningStats]
    info: dict[str, int]
    ready: torch.cuda.Event | None = field(default=None)


class ShardWriter:
    """Writes finished shards to ``out`` on a background thread.

    Args:
        out: the harvest's folder.
        widths: each hook's vector width, by hook name.
        capacity: the vectors a shard holds.
        dtype: the stored dtype.
        pinned: whether the buffers are pinned host memory (for a GPU's copies).
        n_buffers: the buffer sets that alternate (one filled while another is written).

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> writer = ShardWriter(out, {"blocks.0.hook_resid_post": 128}, 4096, torch.float32)
        >>> buffers = writer.buffers()   # [4096, 128] per hook, [4096] token ids
        >>> n = 100
        >>> buffers.activations["blocks.0.hook_resid_post"][:n] = torch.randn(n, 128)
        >>> buffers.token_ids[:n] = 0
        >>> stats = {"blocks.0.hook_resid_post": RunningStats.of(torch.randn(n, 128))}
        >>> writer.submit(0, buffers, n, stats, {"n_sequences": 1}); writer.close()
        >>> sorted(p.name for p in out.iterdir())   # the shard, then its statistics
        ['shard-00000.safetensors', 'shard-00000.stats.safetensors']
    """

    def __init__(
        self,
        out: Path,
        widths: dict[str, int],
        capacity: int,
        dtype: torch.dtype,
        pinned: bool = False,
        n_buffers: int = 2,
    ) -> None:
        self.out = out
        self._free: queue.Queue[ShardBuffers] = queue.Queue()
        self._allocate = lambda: ShardBuffers.allocate(widths, capacity, dtype, pinned)
        self._unallocated = n_buffers
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="interp-harvest-writer", daemon=True)
        self._thread.start()

    def buffers(self) -> ShardBuffers:
        """A free buffer set (waits for the writer when every set is still being written)."""
        self._raise_if_failed()
        if self._free.empty() and self._unallocated:
            self._unallocated -= 1
            return self._allocate()
        while True:
            try:
                return self._free.get(timeout=1.0)
            except queue.Empty:
                self._raise_if_failed()

    def submit(
        self,
        index: int,
        buffers: ShardBuffers,
        n_tokens: int,
        stats: dict[str, RunningStats],
        info: dict[str, int],
    ) -> None:
        """Queue shard ``index`` (its first ``n_tokens`` rows) for writing."""
        self._raise_if_failed()
        ready = None
        if any(b.is_pinned() for b in buffers.activations.values()) and torch.cuda.is_available():
            ready = torch.cuda.Event()
            ready.record()
        self._jobs.put(_Job(index, buffers, n_tokens, stats, info, ready))

    def close(self) -> None:
        """Wait until every queued shard is on disk; re-raise the writer's error, if any."""
        self._jobs.put(None)
        self._thread.join()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"Writing a shard failed: {self._error}") from self._error

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            if self._error is not None:
                continue
            try:
                if job.ready is not None:
                    job.ready.synchronize()
                stats = {hook: s.cpu() for hook, s in job.stats.items()}
                write_shard(self.out, job.index, job.buffers.tensors(job.n_tokens), stats, job.info)
                self._free.put(job.buffers)
            except BaseException as error:  # reported to the harvest loop by the next call
                self._error = error
