"""Small tensor helpers with TransformerLens's names and behaviour."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor


def to_numpy(tensor: Any) -> np.ndarray:
    """A NumPy array of a tensor (detached, on the CPU; bfloat16 as float32), list, tuple,
    array or Python scalar.

    Example:
        >>> to_numpy(torch.ones(2, dtype=torch.bfloat16)).dtype
        dtype('float32')
    """
    if isinstance(tensor, np.ndarray):
        return tensor
    if isinstance(tensor, (list, tuple)):
        return np.array(tensor)
    if isinstance(tensor, Tensor):
        tensor = tensor.detach().cpu()
        return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()
    if isinstance(tensor, (int, float, bool, str)):
        return np.array(tensor)
    raise ValueError(
        f"to_numpy takes a tensor, array, list, tuple or scalar, got {type(tensor).__name__}."
    )


def get_corner(tensor: Any, n: int = 3) -> Any:
    """The top-left ``n x n x ...`` corner of ``tensor`` (every axis cut to ``n``).

    Example:
        >>> get_corner(torch.arange(16).reshape(4, 4), 2).tolist()
        [[0, 1], [4, 5]]
    """
    return tensor[tuple(slice(n) for _ in range(tensor.ndim))]


def remove_batch_dim(tensor: Tensor) -> Tensor:
    """``tensor`` without its first axis if that axis has size 1, else ``tensor`` unchanged."""
    return tensor.squeeze(0) if tensor.ndim > 0 and tensor.shape[0] == 1 else tensor


def transpose(tensor: Float[Tensor, "... a b"]) -> Float[Tensor, "... b a"]:
    """Swap the last two axes."""
    return tensor.transpose(-1, -2)


def is_square(x: Tensor) -> bool:
    """Whether ``x`` is a square matrix (2-D, equal sides)."""
    return x.ndim == 2 and x.shape[0] == x.shape[1]


def is_lower_triangular(x: Tensor) -> bool:
    """Whether ``x`` is a square matrix with nothing above its diagonal."""
    return is_square(x) and x.equal(x.tril())


def get_offset_position_ids(
    past_kv_pos_offset: int, attention_mask: Int[Tensor, "batch offset_pos"]
) -> Int[Tensor, "batch pos"]:
    """Position ids that start at 0 on each row's first attended token (left padding gets 0),
    for the positions after the first ``past_kv_pos_offset`` (those already in a KV cache).

    Example:
        >>> get_offset_position_ids(1, torch.tensor([[0, 1, 1, 1]])).tolist()
        [[0, 1, 2]]
    """
    positions = attention_mask.cumsum(dim=1) - 1
    return positions.clamp(min=0)[:, past_kv_pos_offset:]


def get_cumsum_along_dim(tensor: Tensor, dim: int, reverse: bool = False) -> Tensor:
    """The cumulative sum along ``dim``, from the end when ``reverse``."""
    if reverse:
        return tensor.flip(dims=(dim,)).cumsum(dim=dim).flip(dims=(dim,))
    return tensor.cumsum(dim=dim)


def repeat_along_head_dimension(
    tensor: Float[Tensor, "batch pos d_model"], n_heads: int, clone_tensor: bool = True
) -> Float[Tensor, "batch pos n_heads d_model"]:
    """``tensor`` repeated for each head (a copy unless ``clone_tensor=False``, then a view)."""
    repeated = tensor[:, :, None, :].expand(-1, -1, n_heads, -1)
    return repeated.clone() if clone_tensor else repeated


def get_nested_attr(obj: Any, attr_str: str) -> Any:
    """``obj.a.b.c`` for ``attr_str="a.b.c"``."""
    for attr in attr_str.split("."):
        obj = getattr(obj, attr)
    return obj


def set_nested_attr(obj: Any, attr_str: str, value: Any) -> None:
    """Set ``obj.a.b.c = value`` for ``attr_str="a.b.c"``."""
    *path, last = attr_str.split(".")
    setattr(get_nested_attr(obj, ".".join(path)) if path else obj, last, value)


def get_device() -> str:
    """The best device here, as TransformerLens picks it: ``"cuda"`` if available, ``"mps"``
    only when ``TRANSFORMERLENS_ALLOW_MPS=1`` is set (MPS has known correctness bugs), else
    ``"cpu"``."""
    if torch.cuda.is_available():
        return "cuda"
    mps = torch.backends.mps
    if mps.is_available() and mps.is_built() and os.environ.get("TRANSFORMERLENS_ALLOW_MPS") == "1":
        return "mps"
    return "cpu"
