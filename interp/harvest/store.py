"""``ActivationStore``: a PyTorch iterable dataset over a finished harvest's shards, with a
shuffle buffer, for training SAEs and probes.

Shards are dealt to ``DataLoader`` workers (and, with ``rank``/``world_size``, to training
processes) by a seeded permutation: each worker reads disjoint shards, so every stored vector
comes out exactly once an epoch. ``set_epoch`` reshuffles.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor
from torch.utils.data import IterableDataset, get_worker_info

from interp.harvest.shards import MANIFEST, sha256_file

_REDO = "run the same harvest command again to redo it (it rewrites shards that changed)"


class ActivationStore(IterableDataset):
    """The vectors a harvest stored at ``hook`` (default: its only hook), shuffled through a
    buffer of ``shuffle_buffer`` vectors (0: shard order, no shuffle). Yields vectors [d], or
    batches [batch_size, d] with ``batch_size`` (the last may be short); with ``with_tokens``,
    (vectors, token_ids) pairs.

    A shard missing or of another size than the manifest records is refused when the store
    is made; a shard's bytes are checked against the manifest's sha256 the first time the
    store reads it (one streamed pass), so a changed shard is never read.

    Example:
        >>> import tempfile
        >>> from torch.utils.data import DataLoader
        >>> from interp.harvest import harvest
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "input.txt").write_text("To be, or not to be. " * 20)
        >>> _ = harvest("shakespeare-char", folder / "input.txt", "blocks.1.hook_resid_post",
        ...             folder / "acts", seq_len=64, progress=False)
        >>> store = ActivationStore(folder / "acts", "blocks.1.hook_resid_post", batch_size=256)
        >>> loader = DataLoader(store, batch_size=None)   # num_workers=4 reads 4 shards at once
        >>> for epoch in range(2):
        ...     store.set_epoch(epoch)
        ...     print([tuple(batch.shape) for batch in loader])   # [batch, d_model]
        [(256, 128), (128, 128)]
        [(256, 128), (128, 128)]
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
        self.manifest = _read_manifest(self.path)
        hooks = list(self.manifest["config"]["hooks"])
        if hook is None and len(hooks) != 1:
            raise ValueError(f"This harvest has hooks {hooks}; choose one with hook=.")
        if hook is not None and hook not in hooks:
            raise KeyError(f"Hook {hook!r} was not harvested; this harvest has {hooks}.")
        if batch_size is not None:
            batch_size = _count(batch_size, "batch_size", 1, "or None for single vectors")
        shuffle_buffer = _count(shuffle_buffer, "shuffle_buffer", 0, "0 reads in shard order")
        world_size = _count(world_size, "world_size", 1, "the number of training processes")
        rank = _count(rank, "rank", 0, "this process's index")
        if not rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size}).")
        self._records = {record["file"]: record for record in self.manifest["shards"]}
        for record in self._records.values():
            self._check_size(record)
            for part in record.get("parts", []):  # a tensor-parallel harvest's other ranks'
                self._check_size(part)
        self.hook = hook or hooks[0]
        # A tensor-parallel harvest's split hook: the ranks whose columns make it, in order.
        split = self.manifest["config"].get("tensor_parallel", {}).get("hooks", {}).get(self.hook)
        self._owners = None if split is None else list(split["owners"])
        self.batch_size = batch_size
        self.shuffle_buffer = shuffle_buffer
        self.seed = seed
        self.with_tokens = with_tokens
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        # Shards whose sha256 this copy of the store checked: once per shard in one process
        # (in each DataLoader worker, once per epoch unless persistent_workers=True).
        self._verified: set[str] = set()

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
        """A shard's vectors and token ids; the first time this store opens it, its bytes
        are checked against the manifest's sha256 (one streamed pass, then page cache). A
        tensor-parallel harvest's split hook is its parts' columns side by side."""
        vectors, ids = self._read_file(file, self._records[file])
        if self._owners is None:
            return vectors, ids
        parts = {part["rank"]: part for part in self._records[file].get("parts", [])}
        columns = [vectors]  # rank 0's, in the shard's own file
        for rank in self._owners[1:]:
            columns.append(self._read_file(parts[rank]["file"], parts[rank])[0])
        return torch.cat(columns, dim=1), ids  # [tokens, d]

    def _read_file(self, file: str, record: dict[str, Any]) -> tuple[Tensor, Tensor]:
        """``file``'s vectors of the hook and its token ids, its size and sha256 checked
        against ``record`` the first time."""
        path = self.path / file
        if file not in self._verified:
            self._check_size(record)
            if "sha256" in record and sha256_file(path) != record["sha256"]:
                raise ValueError(
                    f"{path}'s bytes changed since the harvest (its sha256 is not the one in "
                    f"{MANIFEST}); {_REDO}."
                )
            self._verified.add(file)
        try:
            with safe_open(str(path), framework="pt") as shard:
                return shard.get_tensor(self.hook), shard.get_tensor("token_ids")
        except SafetensorError as error:
            raise ValueError(f"{path} is not a readable shard ({error}); {_REDO}.") from error

    def _check_size(self, record: dict[str, Any]) -> None:
        """A shard the manifest lists is there, with the size it records."""
        path = self.path / record["file"]
        if not path.is_file():
            raise FileNotFoundError(f"{path}, a shard {MANIFEST} lists, is missing; {_REDO}.")
        size = path.stat().st_size
        if "bytes" in record and size != record["bytes"]:
            raise ValueError(
                f"{path} is {size} bytes, but {MANIFEST} records {record['bytes']}: it was "
                f"truncated or replaced; {_REDO}."
            )

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


def _read_manifest(folder: Path) -> dict[str, Any]:
    """A finished harvest's manifest, checked to have what the store reads."""
    path = folder / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; is {str(folder)!r} a harvest?")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{path} is not valid JSON ({error}): the harvest's manifest is damaged; harvest "
            "again into a new folder."
        ) from error
    if not isinstance(manifest, dict):
        raise ValueError(f"{path} holds a JSON {type(manifest).__name__}, not a harvest manifest.")
    if manifest.get("status") != "complete":
        raise ValueError(
            f"The harvest in {str(folder)!r} is not finished; run the same harvest command "
            "again to complete it."
        )
    config, shards = manifest.get("config"), manifest.get("shards")
    well_formed = (
        isinstance(config, dict)
        and isinstance(config.get("hooks"), dict)
        and isinstance(shards, list)
        and all(isinstance(r, dict) and isinstance(r.get("file"), str) for r in shards)
    )
    if not well_formed:
        raise ValueError(
            f"{path} is not a finished harvest's manifest (it needs config.hooks and a list of "
            "shards, each with its file); harvest again into a new folder."
        )
    return manifest


def _count(value: object, name: str, minimum: int, meaning: str) -> int:
    """``value`` as an int >= ``minimum``, else an error naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= {minimum} ({meaning}), got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum} ({meaning}), got {value}.")
    return int(value)
