"""``Slice``: TransformerLens's one object for "which positions (or rows) to keep"."""

from __future__ import annotations

import numbers

import numpy as np
import torch
from torch import Tensor

from interp.utils.tensors import to_numpy

# What ``Slice`` accepts: None (keep all), an int, a (start, stop[, step]) tuple, a slice,
# or a list / 1-D tensor / array of indices (or a boolean mask).
SliceInput = None | int | tuple | slice | list | Tensor | np.ndarray


def to_python_int(value: object) -> int | None:
    """``value`` as a Python int if it is an integer scalar (0-d tensors and arrays too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, (Tensor, np.ndarray)) and value.ndim == 0:
        dtype = value.dtype
        if isinstance(value, Tensor):
            is_int = not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)
        else:
            is_int = np.issubdtype(dtype, np.integer)
        return int(value.item()) if is_int else None
    return None


class Slice:
    """An index along one axis, as TransformerLens's ``Slice``.

    Modes: ``"int"`` (an int: selects one index and drops the axis), ``"slice"`` (a slice, or a
    tuple read as ``slice(*tuple)``), ``"array"`` (a list, tensor or array of indices, or a
    boolean mask) and ``"identity"`` (None: keeps everything).

    Example:
        >>> x = torch.arange(10).reshape(2, 5)
        >>> Slice(-1).apply(x, dim=1).tolist(), Slice((1, 3)).apply(x, dim=1).shape
        ([4, 9], torch.Size([2, 2]))
        >>> Slice([0, 2]).indices(5).tolist(), Slice.unwrap(-1).apply(x, dim=1).shape
        ([0, 2], torch.Size([2, 1]))
    """

    def __init__(self, input_slice: SliceInput = None) -> None:
        as_int = to_python_int(input_slice)
        if as_int is not None:
            self.slice, self.mode = as_int, "int"
        elif isinstance(input_slice, tuple):
            self.slice, self.mode = slice(*input_slice), "slice"
        elif isinstance(input_slice, slice):
            self.slice, self.mode = input_slice, "slice"
        elif isinstance(input_slice, (list, Tensor, np.ndarray)):
            self.slice, self.mode = to_numpy(input_slice), "array"
        elif input_slice is None:
            self.slice, self.mode = slice(None), "identity"
        else:
            raise ValueError(
                f"Invalid input_slice {input_slice!r}: pass None, an int, a (start, stop[, step]) "
                "tuple, a slice, or a list / tensor of indices."
            )

    def apply(self, tensor: Tensor, dim: int = 0) -> Tensor:
        """``tensor`` indexed along ``dim`` (negative dims count from the end)."""
        index = [slice(None)] * tensor.ndim
        index[dim] = self.slice
        return tensor[tuple(index)]

    def indices(self, max_ctx: int | None = None) -> np.ndarray:
        """The indices this slice selects from an axis of length ``max_ctx`` (an int needs none).

        Example:
            >>> Slice((1, 6, 2)).indices(10).tolist()
            [1, 3, 5]
        """
        if self.mode == "int":
            return np.array([self.slice], dtype=np.int64)
        if max_ctx is None:
            raise ValueError(f"max_ctx is needed for the indices of a {self.mode} Slice.")
        return np.arange(max_ctx, dtype=np.int64)[self.slice]

    def __repr__(self) -> str:
        return f"Slice: {self.slice} Mode: {self.mode} "

    @classmethod
    def unwrap(cls, slice_input: Slice | SliceInput) -> Slice:
        """A ``Slice`` for ``slice_input``; a bare int becomes ``[int]``, which keeps the axis
        (what ``run_with_cache(pos_slice=-1)`` does). A ``Slice`` is returned as it is."""
        if isinstance(slice_input, Slice):
            return slice_input
        as_int = to_python_int(slice_input)
        return cls([as_int] if as_int is not None else slice_input)
