"""``ActivationStore``: a PyTorch iterable dataset over a finished harvest's shards, with a
shuffle buffer, for training SAEs and probes.

Shards are dealt to ``DataLoader`` workers (and, with ``rank``/``world_size``, to training
processes) by a seeded permutation: each worker reads disjoint shards, so every stored vector
comes out exactly once an epoch. ``set_epoch`` reshuffles.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import Tensor
from torch.utils.data import IterableDataset, get_worker_info

from interp.harvest.shards import MANIFEST


class ActivationStore(IterableDataset):
    """The vectors a harvest stored at ``hook`` (default: its only hook), shuffled through a
    buffer of ``shuffle_buffer`` vectors (0: shard order, no shuffle). Yields vectors [d], or
    batches [batch_size, d] with ``batch_size`` (the last may be short); with ``with_tokens``,
    (vectors, token_ids) pairs.

    Example:
        >>> store = ActivationStore("acts/", "blocks.1.hook_resid_post", batch_size=4096, seed=0)
        >>> loader = DataLoader(store, batch_size=None, num_workers=4)
        >>> for epoch in range(3):
        ...     store.set_epoch(epoch)
        ...     for batch in loader: ...   # [4096, d_model]
    """

    def __init__(
        self,
        path: str | Path,
        hook: str | None = None,
        *,
        batch_size: int | None = None,
        shuffle_buffer: int = 1 << 16,
        seed: int = 0,
        with_tokens: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        super().__init__()
        self.path = Path(path)
        manifest_path = self.path / MANIFEST
        if not manifest_path.is_file():
            raise FileNotFoundError(f"{manifest_path} does not exist; is {path!r} a harvest?")
        self.manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if self.manifest.get("status") != "complete":
            raise ValueError(
                f"The harvest in {str(path)!r} is not finished; run the same harvest command "
                "again to complete it."
            )
        hooks = list(self.manifest["config"]["hooks"])
        if hook is None and len(hooks) != 1:
            raise ValueError(f"This harvest has hooks {hooks}; choose one with hook=.")
        if hook is not None and hook not in hooks:
            raise KeyError(f"Hook {hook!r} was not harvested; this harvest has {hooks}.")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size}).")
        self.hook = hook or hooks[0]
        self.batch_size = batch_size
        self.shuffle_buffer = shuffle_buffer
        self.seed = seed
        self.with_tokens = with_tokens
        self.rank, self.world_size = rank, world_size
        self.epoch = 0

    @property
    def n_tokens(self) -> int:
        """How many vectors one epoch yields over all workers and ranks."""
        return self.manifest["n_tokens"]

    @property
    def d(self) -> int:
        return self.manifest["config"]["hooks"][self.hook]["d"]

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle: epoch ``e`` uses seed ``(seed, e)`` for the shard order and the buffer."""
        self.epoch = epoch

    def my_shards(self) -> list[str]:
        """The shard files this worker of this rank reads this epoch."""
        info = get_worker_info()
        worker, n_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        part, n_parts = self.rank * n_workers + worker, self.world_size * n_workers
        files = [record["file"] for record in self.manifest["shards"]]
        if self.shuffle_buffer:
            order = torch.randperm(len(files), generator=self._generator(-1)).tolist()
            files = [files[i] for i in order]
        return files[part::n_parts]

    def _generator(self, part: int) -> torch.Generator:
        return torch.Generator().manual_seed(hash((self.seed, self.epoch, part)) & (2**63 - 1))

    def _read(self, file: str) -> tuple[Tensor, Tensor]:
        with safe_open(str(self.path / file), framework="pt") as shard:
            return shard.get_tensor(self.hook), shard.get_tensor("token_ids")

    def _mixed(self) -> Iterator[tuple[Tensor, Tensor]]:
        """Blocks of (vectors, token_ids), shuffled through the buffer."""
        info = get_worker_info()
        generator = self._generator(self.rank * 1_000_003 + (info.id if info else 0))
        vectors = ids = None
        for file in self.my_shards():
            new_vectors, new_ids = self._read(file)
            if not self.shuffle_buffer:
                yield new_vectors, new_ids
                continue
            vectors = new_vectors if vectors is None else torch.cat([vectors, new_vectors])
            ids = new_ids if ids is None else torch.cat([ids, new_ids])
            if len(vectors) >= self.shuffle_buffer:
                order = torch.randperm(len(vectors), generator=generator)
                keep = self.shuffle_buffer // 2
                yield vectors[order[keep:]], ids[order[keep:]]
                vectors, ids = vectors[order[:keep]], ids[order[:keep]]
        if vectors is not None and len(vectors):
            order = torch.randperm(len(vectors), generator=generator)
            yield vectors[order], ids[order]

    def __iter__(self) -> Iterator[Any]:
        pending_vectors: list[Tensor] = []
        pending_ids: list[Tensor] = []
        n_pending = 0
        for vectors, ids in self._mixed():
            if self.batch_size is None:
                for i in range(len(vectors)):
                    yield (vectors[i], ids[i]) if self.with_tokens else vectors[i]
                continue
            pending_vectors.append(vectors)
            pending_ids.append(ids)
            n_pending += len(vectors)
            if n_pending < self.batch_size:
                continue
            all_vectors, all_ids = torch.cat(pending_vectors), torch.cat(pending_ids)
            n_full = n_pending // self.batch_size * self.batch_size
            for start in range(0, n_full, self.batch_size):
                batch = all_vectors[start : start + self.batch_size]
                yield (
                    (batch, all_ids[start : start + self.batch_size]) if self.with_tokens else batch
                )
            pending_vectors, pending_ids = [all_vectors[n_full:]], [all_ids[n_full:]]
            n_pending -= n_full
        if self.batch_size is not None and n_pending:
            batch, batch_ids = torch.cat(pending_vectors), torch.cat(pending_ids)
            yield (batch, batch_ids) if self.with_tokens else batch
