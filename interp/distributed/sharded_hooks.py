"""Opt-in sharded hooks: inside ``sharded_hooks(model)``, a hook on a per-head or per-neuron
hook point of a tensor-parallel model sees only this rank's part of the activation (no
gather, no traffic), and ``hook.shard`` gives its heads' or neurons' range. For harvesting
at scale: each rank saves its part, and the parts side by side along the axis are what one
process sees.

Example (on every rank of ``torchrun --nproc_per_node 2``):

    >>> with sharded_hooks(model):  # a tensor-parallel model  # doctest: +SKIP
    ...     model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", save_my_heads)])
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from interp.distributed.hooks import GatheredHookPoint


@contextmanager
def sharded_hooks(model: nn.Module) -> Iterator[None]:
    """Within the block, hooks on ``model``'s per-head and per-neuron hook points see this
    rank's part (``hook.shard``: axis, first, end); outside it, the whole activation again.
    A model without tensor parallel is a ``ValueError``."""
    points = [m for m in model.modules() if isinstance(m, GatheredHookPoint)]
    if not points:
        raise ValueError(
            "sharded_hooks needs a tensor-parallel model (from_pretrained(..., tp_size=N)); "
            "this one has no split hook points."
        )
    before = [point.sharded for point in points]
    for point in points:
        point.sharded = True
    try:
        yield
    finally:
        for point, was in zip(points, before, strict=True):
            point.sharded = was
