"""Data parallel over copies of a tensor-parallel model: with ``world = dp x tp`` processes
(torchrun ``--nproc_per_node dp*tp``, ``from_pretrained(..., tp_size=tp)``), each of the
``dp`` tensor-parallel groups takes a share of the work (prompts for a patching sweep or
for harvesting), and the results are gathered back, in order, on every rank.

Example (on every rank):

    >>> mine = data_parallel_share(model, prompts)  # this copy's prompts  # doctest: +SKIP
    >>> results = gather_data_parallel(model, [sweep(model, p) for p in mine])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch.distributed as dist
from torch import nn


def _bounds(n_items: int, dp_size: int) -> list[int]:
    """Where each copy's contiguous share starts (and the end): as even as it can be."""
    return [n_items * index // dp_size for index in range(dp_size + 1)]


def data_parallel_share(model: nn.Module, items: Sequence[Any]) -> Sequence[Any]:
    """This copy's contiguous share of ``items`` (all of them without data parallel).

    Example:
        >>> from types import SimpleNamespace
        >>> copy_1_of_2 = SimpleNamespace(tp=SimpleNamespace(dp_rank=1, dp_size=2))
        >>> data_parallel_share(copy_1_of_2, list("abcde"))
        ['c', 'd', 'e']
    """
    tp = model.tp
    bounds = _bounds(len(items), tp.dp_size)
    return items[bounds[tp.dp_rank] : bounds[tp.dp_rank + 1]]


def gather_data_parallel(model: nn.Module, results: list[Any]) -> list[Any]:
    """Every copy's ``results`` (one per item of its share), concatenated in the items'
    order, on every rank (pickled: tensors come back on the CPU of each rank)."""
    tp = model.tp
    if tp.dp_size == 1:
        return list(results)
    parts: list[list[Any] | None] = [None] * tp.dp_size
    dist.all_gather_object(parts, [_to_cpu(result) for result in results], group=tp.dp_group)
    return [result for part in parts for result in part]


def _to_cpu(value: Any) -> Any:
    return value.cpu() if hasattr(value, "cpu") else value
