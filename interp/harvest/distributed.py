"""Which shards this process harvests, under ``torchrun`` or alone.

``torchrun`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and the ``env://`` rendezvous
variables; the harvest then joins the process group (NCCL on GPUs, gloo on CPUs) and takes
shards ``i`` with ``i % world_size == rank``. The assignment depends only on the shard's
index, so the shards' content does not depend on how many processes ran.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

# Ranks wait for each other at the start (the manifest) and the end (the statistics); one
# rank may finish a shard later than the others, so the wait is generous.
BARRIER_TIMEOUT = datetime.timedelta(hours=6)


@dataclass(frozen=True)
class Ranks:
    """This process's ``rank`` among ``world_size``; ``owns_group`` if it started the group."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False

    def owns(self, shard_index: int) -> bool:
        """Whether this rank harvests shard ``shard_index`` (``i % world_size == rank``)."""
        return shard_index % self.world_size == self.rank

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def broadcast(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank."""
        if self.world_size == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        if self.owns_group:
            dist.barrier()  # every rank done before the group is torn down
            dist.destroy_process_group()


def init_ranks() -> Ranks:
    """Join ``torchrun``'s process group when launched by it (``WORLD_SIZE`` > 1), else run
    alone. An already initialised group (e.g. the caller's) is used as it is.

    Example:
        >>> init_ranks()   # alone; under torchrun --nproc-per-node 2: rank 0 or 1 of 2
        Ranks(rank=0, world_size=1, local_rank=0, owns_group=False)
    """
    if dist.is_available() and dist.is_initialized():
        return Ranks(dist.get_rank(), dist.get_world_size(), _local_rank(), owns_group=False)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return Ranks()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(_local_rank())
    dist.init_process_group(backend, init_method="env://", timeout=BARRIER_TIMEOUT)
    return Ranks(dist.get_rank(), dist.get_world_size(), _local_rank(), owns_group=True)


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def default_device(ranks: Ranks) -> str:
    """This rank's GPU when there are GPUs (``cuda:LOCAL_RANK``), else the CPU."""
    return f"cuda:{ranks.local_rank}" if torch.cuda.is_available() else "cpu"
