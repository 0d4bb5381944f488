"""Checking the feature indices, token positions and token ids the feature functions take,
before anything runs: an out-of-range value is named with its valid range (negative feature
indices and positions count from the end, as Python's indexing does).

Example:
    >>> checked_index(-1, 128, "feature", "an SAE with d_sae=128")
    127
"""

from __future__ import annotations

import torch
from jaxtyping import Int
from torch import Tensor

from interp.utils.slice import to_python_int


def checked_index(value: object, size: int, name: str, of: str) -> int:
    """``value`` as an index in ``0..size - 1`` (negative ones count from the end); ``name``
    and ``of`` make the message: "feature=200 is out of range for an SAE with d_sae=128"."""
    as_int = to_python_int(value)
    if as_int is None:
        raise TypeError(f"{name} must be an int, got {value!r}.")
    if not -size <= as_int < size:
        raise ValueError(
            f"{name}={as_int} is out of range for {of}: pass 0..{size - 1} (or -{size}..-1 to "
            "count from the end)."
        )
    return as_int % size


def checked_token(value: object, d_vocab: int, name: str) -> int:
    """``value`` as a token id in ``0..d_vocab - 1``."""
    as_int = to_python_int(value)
    if as_int is None:
        raise TypeError(f"{name} must be a token id (an int), got {value!r}.")
    if not 0 <= as_int < d_vocab:
        raise ValueError(
            f"{name}={as_int} is not a token id of this model: pass 0..{d_vocab - 1} "
            "(model.to_single_token turns a string into one)."
        )
    return as_int


def checked_count(value: object, name: str, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum`` (a k, a batch size, a context width)."""
    as_int = to_python_int(value)
    if as_int is None or as_int < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
    return as_int


def checked_patch_index(index: object, n_pos: int, d_sae: int) -> Int[Tensor, "n 2"]:
    """``feature_patch``'s ``(position, feature)`` rows as a [n, 2] long tensor with
    non-negative entries; a single pair is one row."""
    rows = torch.as_tensor(index)
    if rows.is_floating_point() and rows.numel() == 0:
        rows = rows.long()
    if rows.is_floating_point() or rows.is_complex() or rows.dtype == torch.bool:
        raise TypeError(f"index must hold integer (position, feature) pairs, got {index!r}.")
    if rows.ndim == 1 and rows.numel() in (0, 2):
        rows = rows.reshape(-1, 2)
    if rows.ndim != 2 or rows.shape[1] != 2:
        raise ValueError(
            f"index must be (position, feature) pairs, [n, 2]; got shape {tuple(rows.shape)}: "
            "pass e.g. [(5, 7), (5, 9)]."
        )
    rows = rows.long().cpu()
    for column, (size, what) in enumerate(
        ((n_pos, f"tokens of {n_pos} positions"), (d_sae, f"an SAE with d_sae={d_sae}"))
    ):
        values = rows[:, column]
        bad = ((values < -size) | (values >= size)).nonzero()
        if len(bad):
            row = int(bad[0])
            name = ("position", "feature")[column]
            raise ValueError(
                f"index row {row} {tuple(rows[row].tolist())}: {name}={int(values[row])} is out "
                f"of range for {what}: pass 0..{size - 1} (or -{size}..-1 to count from the end)."
            )
        rows[:, column] = values % size
    return rows
