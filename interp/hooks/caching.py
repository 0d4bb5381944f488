"""How ``run_with_cache`` keeps one activation: which positions, in which dtype, on which device.

The default keeps the activation itself (detached, no copy). Options shrink or move it:
``pos_slice`` keeps some positions (the query axis of attention scores and patterns),
``remove_batch_dim`` drops the batch axis of a batch of one, ``dtype`` stores a smaller
floating type, and ``device`` moves it (from a GPU to the CPU through pinned memory with
non-blocking copies, so the transfers overlap the rest of the forward pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from interp.utils.slice import Slice, to_python_int

PositionSlice = None | int | slice | tuple | Sequence[int] | Tensor | Slice


def position_axis(hook_name: str) -> int:
    """The axis of an activation (with its batch axis) that indexes positions: the query axis,
    2, of attention scores and patterns [batch, head, query_pos, key_pos]; 1 otherwise.

    Example:
        >>> position_axis("blocks.0.attn.hook_pattern"), position_axis("blocks.0.hook_resid_pre")
        (2, 1)
    """
    return 2 if hook_name.endswith(("hook_pattern", "hook_attn_scores")) else 1


@dataclass(frozen=True)
class ActivationKeeper:
    """The storage options of a cache, applied to each activation as it is cached.

    ``pos_slice`` keeps some positions, as TransformerLens's ``run_with_cache`` does: an int
    keeps that one position *and the position axis* (``[batch, 1, d_model]`` for a residual
    stream), a ``(start, stop[, step])`` tuple or a slice keeps a range, a list or 1-D tensor
    keeps those positions, and a ``Slice`` is applied as it is (``Slice(-1)`` drops the axis).
    The kept tensor never shares memory with the full activation, so a slice holds only the
    positions asked for.

    Example:
        >>> keeper = ActivationKeeper(pos_slice=-1, dtype=torch.float16)
        >>> kept = keeper.keep(cache["resid_post", 0], "blocks.0.hook_resid_post")
        >>> kept.shape, kept.dtype   # [batch, 1, d_model]
        (torch.Size([1, 1, 128]), torch.float16)
    """

    device: torch.device | str | None = None
    dtype: torch.dtype | None = None
    remove_batch_dim: bool = False
    pos_slice: PositionSlice = None
    # pos_slice as an index: None (all), an int (drops the axis), a slice, or a long tensor.
    positions: None | int | slice | Tensor = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.dtype is not None and not (
            isinstance(self.dtype, torch.dtype) and self.dtype.is_floating_point
        ):
            raise TypeError(
                f"dtype={self.dtype!r}: the cache stores activations in a floating dtype; "
                "pass e.g. torch.float16 or torch.bfloat16."
            )
        object.__setattr__(self, "positions", self.as_index(self.pos_slice))

    @staticmethod
    def as_index(pos_slice: PositionSlice) -> None | int | slice | Tensor:
        """``pos_slice`` as the index ``select_positions`` applies, or a clear error."""
        if isinstance(pos_slice, Slice):
            if pos_slice.mode == "identity":
                return None
            if pos_slice.mode in ("int", "slice"):
                return pos_slice.slice
            pos_slice = pos_slice.slice  # an array of positions
        as_int = to_python_int(pos_slice)
        if as_int is not None:
            return torch.tensor([as_int])  # one position, keeping the axis
        if isinstance(pos_slice, tuple):
            return slice(*pos_slice)
        if pos_slice is None or isinstance(pos_slice, slice):
            return pos_slice
        if isinstance(pos_slice, (list, np.ndarray)):
            try:
                pos_slice = torch.as_tensor(np.asarray(pos_slice))
            except (TypeError, ValueError, RuntimeError):
                pos_slice = None  # reported below
        if isinstance(pos_slice, Tensor):
            if (
                pos_slice.ndim != 1
                or pos_slice.is_floating_point()
                or pos_slice.is_complex()
                or (pos_slice.dtype == torch.bool)
            ):
                raise TypeError(
                    f"pos_slice as a tensor must be a 1-D tensor of integer positions, got "
                    f"{pos_slice.dtype} of shape {tuple(pos_slice.shape)}."
                )
            return pos_slice.long()
        raise TypeError(
            "pos_slice must be an int, a (start, stop[, step]) tuple, a slice, a list of "
            f"positions or a Slice, got {pos_slice!r}."
        )

    def keep(self, activation: Tensor, hook_name: str) -> Tensor:
        """The tensor to store for ``activation`` (detached), with every option applied."""
        kept = activation.detach()
        if self.remove_batch_dim:
            if kept.shape[0] != 1:
                raise ValueError(
                    f"remove_batch_dim=True needs a batch of one, but {hook_name} has batch "
                    f"size {kept.shape[0]}; run one sequence, or keep the batch axis."
                )
            kept = kept[0]
        sliced = self.positions is not None
        if sliced:
            axis = position_axis(hook_name) - int(self.remove_batch_dim)
            kept = self.select_positions(kept, axis, hook_name)
        if self.dtype is not None:
            kept = kept.to(self.dtype)
        if self.device is not None:
            kept = self.move(kept, torch.device(self.device))
        if sliced and kept.untyped_storage().data_ptr() == activation.untyped_storage().data_ptr():
            kept = kept.clone()  # a view would keep every position's memory alive
        return kept

    def select_positions(self, kept: Tensor, axis: int, hook_name: str) -> Tensor:
        n_positions = kept.shape[axis]
        positions = self.positions
        if isinstance(positions, slice):
            return kept[(slice(None),) * axis + (positions,)]
        if isinstance(positions, int):
            if not -n_positions <= positions < n_positions:
                raise IndexError(
                    f"pos_slice={positions} is out of range for {hook_name}, which has "
                    f"{n_positions} positions."
                )
            return kept.select(axis, positions)
        if len(positions) and not (
            -n_positions <= int(positions.min()) and int(positions.max()) < n_positions
        ):
            raise IndexError(
                f"pos_slice={self.pos_slice!r} has positions out of range for {hook_name}, "
                f"which has {n_positions} positions."
            )
        return kept.index_select(axis, (positions % n_positions).to(kept.device))

    @staticmethod
    def move(kept: Tensor, device: torch.device) -> Tensor:
        """``kept`` on ``device``; GPU to CPU goes through pinned memory, without blocking."""
        if device.type == "cpu" and kept.is_cuda:
            pinned = torch.empty(kept.shape, dtype=kept.dtype, pin_memory=True)
            return pinned.copy_(kept, non_blocking=True)
        return kept.to(device)
