"""The four communication steps of tensor parallelism, as autograd functions, so gradients
through a sharded model equal one process's (Megatron-LM's conjugate pairs):

- ``copy_to_shards``: the replicated input of a sharded layer; identity forward, its
  gradient (each rank's part, from its own heads or neurons) all-reduced backward;
- ``reduce_from_shards``: the sum of every rank's partial output; all-reduce forward,
  identity backward (each rank already holds the whole gradient);
- ``gather_shards`` / ``scatter_shards``: a per-head or per-neuron activation made whole
  for a hook and cut back to this rank's part, along a ``ShardLayout``.

Forward and backward both keep the ranks in step: every rank runs the same collectives in
the same order (what the model's hooks and modules guarantee).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from interp.distributed.process_group import TPGroup


@dataclass(frozen=True)
class ShardLayout:
    """Which part of a hooked activation each rank holds, along axis ``dim``: rank ``r``
    holds ``[starts[r], starts[r] + count)`` of ``total``. Ranks may hold the same part
    (grouped-query key/value heads, fewer than the ranks): the first rank holding a part
    is its ``owner``, whose copy the gathered tensor takes."""

    dim: int
    total: int
    count: int
    starts: tuple[int, ...]

    def owners(self) -> list[int]:
        """The ranks whose parts make the whole, in order."""
        first = {}
        for rank, start in enumerate(self.starts):
            first.setdefault(start, rank)
        return [first[start] for start in sorted(first)]

    def is_owner(self, rank: int) -> bool:
        return self.starts.index(self.starts[rank]) == rank


def _all_reduce(tensor: Tensor, tp: TPGroup) -> Tensor:
    tensor = tensor.contiguous().clone()
    dist.all_reduce(tensor, group=tp.group)
    return tensor


def _all_gather(tensor: Tensor, tp: TPGroup) -> list[Tensor]:
    tensor = tensor.contiguous()
    parts = [torch.empty_like(tensor) for _ in range(tp.size)]
    dist.all_gather(parts, tensor, group=tp.group)
    return parts


class _CopyToShards(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, tp: TPGroup) -> Tensor:
        ctx.tp = tp
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        return _all_reduce(grad, ctx.tp), None


class _ReduceFromShards(torch.autograd.Function):
    @staticmethod
    def forward(ctx, partial: Tensor, tp: TPGroup) -> Tensor:
        return _all_reduce(partial, tp)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        return grad, None


class _GatherShards(torch.autograd.Function):
    @staticmethod
    def forward(ctx, local: Tensor, layout: ShardLayout, tp: TPGroup) -> Tensor:
        ctx.layout, ctx.tp = layout, tp
        parts = _all_gather(local, tp)
        return torch.cat([parts[rank] for rank in layout.owners()], dim=layout.dim)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        # Every rank holds the whole gradient; a part held by several ranks flows back
        # through its owner alone (the others' uses were summed into it on the way).
        layout, rank = ctx.layout, ctx.tp.rank
        local = grad.narrow(layout.dim, layout.starts[rank], layout.count)
        if not layout.is_owner(rank):
            local = torch.zeros_like(local)
        return local.contiguous(), None, None


class _ScatterShards(torch.autograd.Function):
    @staticmethod
    def forward(ctx, whole: Tensor, layout: ShardLayout, tp: TPGroup) -> Tensor:
        ctx.layout, ctx.tp = layout, tp
        return whole.narrow(layout.dim, layout.starts[tp.rank], layout.count).contiguous()

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        # The whole gradient: each part is the sum of what every rank holding it computed.
        layout = ctx.layout
        shape = list(grad.shape)
        shape[layout.dim] = layout.total
        whole = grad.new_zeros(shape)
        for start, part in zip(layout.starts, _all_gather(grad, ctx.tp), strict=True):
            whole.narrow(layout.dim, start, layout.count).add_(part)
        return whole, None, None


def copy_to_shards(x: Tensor, tp: TPGroup) -> Tensor:
    """``x`` as the input of a sharded layer: unchanged; backward, its gradient summed over
    the ranks."""
    return _CopyToShards.apply(x, tp)


def reduce_from_shards(partial: Tensor, tp: TPGroup) -> Tensor:
    """The sum over the ranks of ``partial`` (each rank's heads' or neurons' share)."""
    return _ReduceFromShards.apply(partial, tp)


def gather_shards(local: Tensor, layout: ShardLayout, tp: TPGroup) -> Tensor:
    """The whole activation (every rank's part along ``layout.dim``), on every rank."""
    return _GatherShards.apply(local, layout, tp)


def scatter_shards(whole: Tensor, layout: ShardLayout, tp: TPGroup) -> Tensor:
    """This rank's part of a whole activation; backward, the whole gradient rebuilt."""
    return _ScatterShards.apply(whole, layout, tp)
