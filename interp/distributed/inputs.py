"""Every rank of a tensor-parallel model must run the same input: a digest of each forward's
input is compared over the ranks (one small all-gather), and different inputs are an error
on every rank, instead of a silent mix of two computations or a hang."""

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


def check_same_inputs(model: nn.Module, args: tuple, kwargs: dict) -> None:
    """A forward pre-hook: raise on every rank when the ranks' inputs differ."""
    value = args[0] if args else kwargs.get("input")
    tp = model.tp
    mine = torch.tensor([input_digest(value)], dtype=torch.int64)
    if dist.get_backend(tp.group) == "nccl":
        mine = mine.to(tp.device)
    digests = [torch.empty_like(mine) for _ in range(tp.size)]
    dist.all_gather(digests, mine, group=tp.group)
    values = [int(d.item()) for d in digests]
    if len(set(values)) > 1:
        differ = [rank for rank, d in enumerate(values) if d != values[0]]
        raise ValueError(
            f"The ranks of a tensor-parallel model were given different inputs (rank 0's "
            f"differs from rank(s) {differ}'s). Every rank must run the same tokens: build "
            "them the same way on each (the same seed for sampling, the same data order)."
        )
