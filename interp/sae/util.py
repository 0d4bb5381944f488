"""SAELens's ``sae_lens.util`` helpers that SAE code calls: dtype names and dataclass
field filtering.

Example:
    >>> from interp.sae.util import dtype_to_str, str_to_dtype
    >>> dtype_to_str(torch.bfloat16), str_to_dtype("torch.float16")
    ('bfloat16', torch.float16)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from interp.sae.sae import dtype_to_str, str_to_dtype

__all__ = ["dtype_to_str", "filter_valid_dataclass_fields", "str_to_dtype"]


def filter_valid_dataclass_fields(
    source: dict[str, Any] | object,
    destination: object | type,
    whitelist_fields: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The entries of ``source`` (a dict or dataclass) that are fields of ``destination``."""
    if not dataclasses.is_dataclass(destination):
        raise ValueError(f"{destination} is not a dataclass")
    if dataclasses.is_dataclass(source) and not isinstance(source, type):
        source = dataclasses.asdict(source)
    elif not isinstance(source, dict):
        raise ValueError(f"{source} is not a dict or dataclass")
    names = {f.name for f in dataclasses.fields(destination)} | set(whitelist_fields or ())
    return {key: value for key, value in source.items() if key in names}
