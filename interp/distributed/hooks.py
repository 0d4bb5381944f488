"""Hook points of a tensor-parallel model: hooks see what they see in one process.

A per-head or per-neuron activation lives split over the ranks; ``GatheredHookPoint``
gathers it whole (only when a hook is attached: no traffic otherwise), runs the hooks on the
whole tensor on every rank (so a hook's edit is the same everywhere), and gives each rank
its part of the result back. Backward, its hooks see the whole gradient. A residual-stream
activation is whole on every rank already: ``ReplicatedHookPoint`` runs its hooks as they
are. Both make a hook's error (a wrong shape, an exception) raise on every rank at once,
never leaving the others waiting in the next collective.
"""

from __future__ import annotations

from torch import Tensor, nn

from interp.distributed.collectives import ShardLayout, gather_shards, scatter_shards
from interp.distributed.process_group import TPGroup, raise_together
from interp.hooks import HookPoint


class ReplicatedHookPoint(HookPoint):
    """A hook point whose activation every rank holds whole (the residual stream, norms,
    the router): its hooks run as in one process; an error in one rank's raises on all."""

    def __init__(self, tp: TPGroup) -> None:
        super().__init__()
        self.tp = tp

    def forward(self, activation: Tensor) -> Tensor:
        if not self.has_hooks:
            return activation
        error, result = None, activation
        try:
            result = super().forward(activation)
        except Exception as caught:  # raised below, on every rank together
            error = caught
        raise_together(error, self.tp, f"A hook on {self.name}")
        return result


class GatheredHookPoint(ReplicatedHookPoint):
    """A hook point on a per-head or per-neuron activation split along ``layout``: hooks see
    (and edit, and get the gradient of) the whole activation; each rank keeps its part.

    With ``sharded`` on (``interp.distributed.sharded_hooks``), hooks see this rank's part
    alone, with no gather: ``shard`` says which heads or neurons it holds.
    """

    def __init__(self, tp: TPGroup, layout: ShardLayout) -> None:
        super().__init__(tp)
        self.layout = layout
        self.sharded = False

    @property
    def shard(self) -> tuple[int, int, int]:
        """(axis, first, end): the heads or neurons ``[first, end)`` this rank holds, along
        ``axis`` of the activation (negative: counted from the end)."""
        start = self.layout.starts[self.tp.rank]
        return self.layout.dim, start, start + self.layout.count

    def forward(self, activation: Tensor) -> Tensor:
        if not self.has_hooks:
            return activation
        if self.sharded:  # hooks on this rank's part: no traffic
            return super().forward(activation)
        whole = gather_shards(activation, self.layout, self.tp)
        return scatter_shards(super().forward(whole), self.layout, self.tp)

    def extra_repr(self) -> str:
        return f"dim={self.layout.dim}, rank {self.tp.rank} of {self.tp.size}"


def replace_hook_points(module: nn.Module, tp: TPGroup) -> None:
    """Swap every plain ``HookPoint`` under ``module`` (its hooks kept) for a gathered one
    where its parent's ``tp_layouts`` names it (``{"hook_q": layout}``), a replicated one
    elsewhere."""
    for parent in list(module.modules()):
        layouts = getattr(parent, "tp_layouts", {})
        for child_name, child in list(parent.named_children()):
            if type(child) is HookPoint:
                setattr(
                    parent, child_name, distributed_hook_point(child, tp, layouts.get(child_name))
                )


def distributed_hook_point(
    old: HookPoint, tp: TPGroup, layout: ShardLayout | None
) -> ReplicatedHookPoint:
    """``old``'s name, hooks and context on a gathered (``layout``) or replicated hook point."""
    new = GatheredHookPoint(tp, layout) if layout is not None else ReplicatedHookPoint(tp)
    new.name, new.fwd_hooks, new.bwd_hooks, new.ctx = (
        old.name,
        old.fwd_hooks,
        old.bwd_hooks,
        old.ctx,
    )
    return new
