"""Reading a dtype: the one parser behind every ``dtype=`` argument, config ``dtype`` field
and ``--dtype`` flag (the model config, the loaders, SAEs, harvesting).

A dtype is given as a ``torch.dtype`` or its name, with or without ``torch.``
(``"bfloat16"``, ``"torch.float16"``), or one of the short names ``DTYPE_ALIASES``
(``"bf16"``, ``"fp16"``, ``"fp32"``, ``"fp64"``). A caller that takes only some dtypes says
which (``allowed``); anything else is a ``ValueError`` naming the argument and the fix.

Example:
    >>> parse_dtype("bf16")
    torch.bfloat16
    >>> parse_dtype("torch.float16", allowed=(torch.float32, torch.float16))
    torch.float16
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

# The short names harvesting's --dtype has always taken, beside torch's own names.
DTYPE_ALIASES = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp64": torch.float64,
}


def dtype_name(dtype: torch.dtype) -> str:
    """torch's name of ``dtype`` without ``torch.`` (``"bfloat16"``), as configs store it.

    Example:
        >>> dtype_name(torch.bfloat16)
        'bfloat16'
    """
    return str(dtype).removeprefix("torch.")


def parse_dtype(
    dtype: Any, what: str = "dtype", allowed: Sequence[torch.dtype] | None = None
) -> torch.dtype:
    """The ``torch.dtype`` that ``dtype`` is or names (see the module docstring); ``what`` is
    how the error message names the argument (``"dtype"``, ``"--dtype"``), ``allowed`` the
    dtypes the caller takes (None: any).

    Example:
        >>> parse_dtype("torch.int8")
        torch.int8
    """
    resolved = dtype
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
        resolved = DTYPE_ALIASES.get(name) or getattr(torch, name, None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(
            f"{what}={dtype!r} is not a torch dtype; use e.g. 'float32', 'bfloat16' or 'float16'."
        )
    if allowed is not None and resolved not in allowed:
        names = ", ".join(dtype_name(option) for option in allowed)
        raise ValueError(f"{what}={dtype!r} is {resolved}, not one this takes; use one of {names}.")
    return resolved
