"""Position slices of cached activations: which positions a ``pos_slice`` keeps, as
TransformerLens's ``Slice(pos_slice)``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from interp.utils import Slice
from interp.utils.slice import to_python_int

# Which positions to keep: None (all), an int (drops the pos axis), a (start, stop[, step])
# tuple or a slice, indices, or a Slice; as TransformerLens's ``Slice(pos_slice)``.
PosSlice = int | slice | tuple | Sequence[int] | Tensor | Slice | None


def slice_positions(tensor: Tensor, pos_slice: PosSlice, dim: int) -> Tensor:
    """``tensor`` with ``pos_slice`` applied along ``dim``, as TransformerLens's ``Slice``.

    Example:
        >>> slice_positions(torch.zeros(2, 5, 3), -1, dim=-2).shape
        torch.Size([2, 3])
    """
    if isinstance(pos_slice, Slice):
        pos_slice = None if pos_slice.mode == "identity" else pos_slice.slice
    if pos_slice is None:
        return tensor
    as_int = to_python_int(pos_slice)
    if as_int is not None:
        return tensor.select(dim, as_int)
    if isinstance(pos_slice, tuple):
        pos_slice = slice(*pos_slice)
    if isinstance(pos_slice, slice):
        return tensor[(slice(None),) * (dim % tensor.ndim) + (pos_slice,)]
    indices = torch.as_tensor(pos_slice, device=tensor.device)
    if indices.dtype == torch.bool or indices.is_floating_point() or indices.ndim != 1:
        raise TypeError(
            f"pos_slice must be None, an int, a slice or a 1-D list of ints; got {pos_slice!r}."
        )
    size = tensor.shape[dim]
    if indices.numel() and not (-size <= int(indices.min()) and int(indices.max()) < size):
        raise IndexError(f"pos_slice {pos_slice!r} is out of range for {size} positions.")
    return tensor.index_select(dim, indices % size)
