"""Every rank of a tensor-parallel model must run the same input with hooks at the same
points: a digest of each forward's input and of where hooks are attached is compared over
the ranks (one small all-gather), and a difference is an error on every rank, instead of a
silent mix of two computations or a hang (a gathered hook point runs a collective only
where a hook is attached, so the ranks must agree on where)."""

from __future__ import annotations

import hashlib
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn


def input_digest(value: Any) -> int:
    """A 62-bit digest of a forward's input (tokens, text or a residual stream tensor).

    Example:
        >>> input_digest(torch.tensor([[1, 2]])) == input_digest(torch.tensor([[1, 2]]))
        True
        >>> input_digest(torch.tensor([[1, 2]])) == input_digest(torch.tensor([[2, 1]]))
        False
    """
    digest = hashlib.sha256()
    if isinstance(value, Tensor):
        data = value.detach().cpu().contiguous()
        digest.update(f"{tuple(data.shape)} {data.dtype}".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    else:
        digest.update(repr(value).encode())
    return int.from_bytes(digest.digest()[:8], "little") >> 2


def hooked_points(model: nn.Module) -> list[str]:
    """The hook points where this thread's hooks are attached, with their mode."""
    return [
        f"{name}{' (sharded)' if getattr(point, 'sharded', False) else ''}"
        for name, point in model.hook_dict.items()
        if point.has_hooks
    ]


def check_same_inputs(model: nn.Module, args: tuple, kwargs: dict) -> None:
    """A forward pre-hook: raise on every rank when the ranks' inputs, or the points where
    their hooks are attached, differ."""
    value = args[0] if args else kwargs.get("input")
    tp = model.tp
    hooked = hooked_points(model)
    mine = torch.tensor([input_digest(value), input_digest(hooked)], dtype=torch.int64)
    if dist.get_backend(tp.group) == "nccl":
        mine = mine.to(tp.device)
    digests = [torch.empty_like(mine) for _ in range(tp.size)]
    dist.all_gather(digests, mine, group=tp.group)
    values = [int(d[0].item()) for d in digests]
    hooks = [int(d[1].item()) for d in digests]
    if len(set(hooks)) > 1:
        differ = [rank for rank, d in enumerate(hooks) if d != hooks[0]]
        raise ValueError(
            f"The ranks of a tensor-parallel model have hooks at different points (rank 0's "
            f"differ from rank(s) {differ}'s; this rank's: {hooked[:6]}"
            f"{'...' if len(hooked) > 6 else ''}). Attach the same hooks on every rank (the "
            "same code runs on each); a hook may act differently by rank, not be missing."
        )
    if len(set(values)) > 1:
        differ = [rank for rank, d in enumerate(values) if d != values[0]]
        raise ValueError(
            f"The ranks of a tensor-parallel model were given different inputs (rank 0's "
            f"differs from rank(s) {differ}'s). Every rank must run the same tokens: build "
            "them the same way on each (the same seed for sampling, the same data order)."
        )
