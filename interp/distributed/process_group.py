"""The processes of a tensor-parallel model: the default process group (started from
torchrun's environment when it is not yet), this process's rank among them, its device, and
how every rank raises the same error together instead of leaving the others waiting.

torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``
for each process it starts; ``init_process_group`` reads them. The backend is NCCL when
CUDA is available (each process on ``cuda:LOCAL_RANK``), gloo on the CPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

_TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class TensorParallelError(RuntimeError):
    """A tensor-parallel run that cannot go on: raised on every rank together."""


@dataclass(frozen=True)
class TPGroup:
    """This process's place in a tensor-parallel model: its ``rank`` of ``size`` in the
    ``group`` the model's collectives run in, and the ``device`` its shard lives on. With
    more processes than ``size`` (data parallel x tensor parallel, a 2-D ``DeviceMesh`` of
    ``("dp", "tp")``), each tensor-parallel group holds one copy of the model: this one is
    ``dp_rank`` of ``dp_size``, and ``dp_group`` joins the ranks of the same ``rank`` in
    every copy."""

    group: dist.ProcessGroup
    rank: int
    size: int
    device: torch.device
    dp_rank: int = 0
    dp_size: int = 1
    dp_group: dist.ProcessGroup | None = None


def tensor_parallel_group(tp_size: int, device: torch.device | str | None = None) -> TPGroup:
    """The default process group as a ``TPGroup`` of ``tp_size`` ranks, started from
    torchrun's environment if it is not yet (NCCL on CUDA, gloo on the CPU).

    Every rank must ask for the same ``tp_size``, and it must divide the world size: with
    more processes, consecutive groups of ``tp_size`` ranks each hold a copy of the model (a
    2-D mesh, data parallel x tensor parallel). Either mistake is a ``ValueError`` on every
    rank.

    Example:
        >>> tensor_parallel_group(2)   # outside torchrun, no process group
        Traceback (most recent call last):
        ...
        interp.distributed.process_group.TensorParallelError: tp_size=2 needs 2 processes...
    """
    if isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 1:
        raise ValueError(f"tp_size={tp_size!r} must be a positive int (the number of ranks).")
    if not dist.is_available():
        raise TensorParallelError(
            f"tp_size={tp_size} needs torch.distributed, which this PyTorch build lacks."
        )
    if not dist.is_initialized():
        missing = [name for name in _TORCHRUN_VARIABLES if name not in os.environ]
        if missing:
            raise TensorParallelError(
                f"tp_size={tp_size} needs {tp_size} processes, but there is no process group "
                f"and no torchrun environment ({', '.join(missing)} unset). Start the script "
                f"with `torchrun --nproc_per_node {tp_size} script.py` (it calls from_pretrained "
                "on every rank), or call torch.distributed.init_process_group first."
            )
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend)
    group = dist.group.WORLD
    rank, world = dist.get_rank(), dist.get_world_size()
    sizes = [None] * world
    dist.all_gather_object(sizes, tp_size)
    if len(set(sizes)) > 1:
        raise ValueError(
            f"The ranks asked for different tp_size: {sizes} (rank i's at index i); pass the "
            "same tp_size on every rank."
        )
    if world % tp_size:
        raise ValueError(
            f"tp_size={tp_size} does not divide the process group's {world} processes: each "
            f"copy of the model runs on tp_size processes, so start tp_size (torchrun "
            f"--nproc_per_node {tp_size}) or a multiple of it (data parallel x tensor parallel)."
        )
    on_cuda = dist.get_backend(group) == "nccl"
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if on_cuda else "cpu"
    if world == tp_size:
        return TPGroup(group=group, rank=rank, size=world, device=torch.device(device))
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(
        "cuda" if on_cuda else "cpu", (world // tp_size, tp_size), mesh_dim_names=("dp", "tp")
    )
    return TPGroup(
        group=mesh.get_group("tp"),
        rank=mesh.get_local_rank("tp"),
        size=tp_size,
        device=torch.device(device),
        dp_rank=mesh.get_local_rank("dp"),
        dp_size=world // tp_size,
        dp_group=mesh.get_group("dp"),
    )


def raise_together(error: BaseException | None, tp: TPGroup, what: str) -> None:
    """Raise on every rank if ``error`` is not None on any: the failing rank re-raises its
    own, the others a ``TensorParallelError`` naming the rank and its message. One small
    all-reduce when no rank failed; the ranks must all call it, at the same point.
    """
    failed = torch.tensor([0 if error is None else 1], dtype=torch.int64)
    if dist.get_backend(tp.group) == "nccl":
        failed = failed.to(tp.device)
    dist.all_reduce(failed, op=dist.ReduceOp.MAX, group=tp.group)
    if not int(failed.item()):
        return
    messages: list[str | None] = [None] * tp.size
    own = None if error is None else f"{type(error).__name__}: {error}"
    dist.all_gather_object(messages, own, group=tp.group)
    if error is not None:
        raise error
    rank, message = next((r, m) for r, m in enumerate(messages) if m is not None)
    raise TensorParallelError(f"{what} failed on rank {rank}, so on every rank: {message}")
