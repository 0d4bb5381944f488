"""SAELens's ``sae_lens.util`` helpers: dtype names, dataclass field filtering, the layer
of a hook name, a temporary seed, special token ids and cosine similarities.

Example:
    >>> from interp.sae.util import dtype_to_str, str_to_dtype
    >>> dtype_to_str(torch.bfloat16), str_to_dtype("torch.float16")
    ('bfloat16', torch.float16)
    >>> from interp.sae.util import extract_stop_at_layer_from_tlens_hook_name
    >>> extract_stop_at_layer_from_tlens_hook_name("blocks.3.hook_resid_post")
    4
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from interp.sae.constants import DTYPE_MAP, DTYPE_TO_STR

__all__ = [
    "cosine_similarities",
    "dtype_to_str",
    "extract_layer_from_tlens_hook_name",
    "extract_stop_at_layer_from_tlens_hook_name",
    "filter_valid_dataclass_fields",
    "get_special_token_ids",
    "path_or_tmp_dir",
    "str_to_dtype",
    "temporary_seed",
]

# The first ".<digits>" segment followed by "." or the end: "blocks.30.hook_resid_post" and
# Hugging Face module paths such as "model.layers.30" alike.
_LAYER_SEGMENT = re.compile(r"\.(\d+)(?:\.|$)")
# Tokenizer attributes holding structural special tokens (not chat-template extras).
_SPECIAL_TOKEN_ATTRS = (
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "decoder_start_token_id",
)


def str_to_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """A config's dtype name (``"float32"``, ``"torch.bfloat16"``...) as a ``torch.dtype``;
    a ``torch.dtype`` is returned as given. Names are case-sensitive, as SAELens's."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPE_MAP:
        raise ValueError(f"Invalid dtype: {dtype!r}. Must be one of {list(DTYPE_MAP)}")
    return DTYPE_MAP[dtype]


def dtype_to_str(dtype: torch.dtype) -> str:
    """The name a config stores for ``dtype`` (``"bfloat16"``); only SAE dtypes have one."""
    if dtype not in DTYPE_TO_STR:
        raise ValueError(f"Invalid dtype: {dtype}. Must be one of {list(DTYPE_TO_STR)}")
    return DTYPE_TO_STR[dtype]


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


def extract_layer_from_tlens_hook_name(hook_name: str) -> int | None:
    """The layer a hook name's first numeric segment names, or ``None`` if it has none."""
    found = _LAYER_SEGMENT.search(hook_name)
    return None if found is None else int(found.group(1))


def extract_stop_at_layer_from_tlens_hook_name(hook_name: str) -> int | None:
    """The ``stop_at_layer`` that still runs the hook's layer (its layer + 1), or ``None``."""
    layer = extract_layer_from_tlens_hook_name(hook_name)
    return None if layer is None else layer + 1


@contextmanager
def temporary_seed(seed: int | None) -> Iterator[None]:
    """Seed torch's global generators inside the block only (restored after); ``None``: no-op."""
    if seed is None:
        yield
        return
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        yield


@contextmanager
def path_or_tmp_dir(path: str | Path | None) -> Iterator[Path]:
    """``Path(path)``, or a temporary directory (removed on exit) when ``path`` is ``None``."""
    if path is not None:
        yield Path(path)
        return
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def get_special_token_ids(tokenizer: Any) -> list[int]:
    """The ids of a tokenizer's BOS, EOS, PAD, SEP and decoder-start tokens (those it has)."""
    ids = {getattr(tokenizer, attr, None) for attr in _SPECIAL_TOKEN_ATTRS}
    return list(ids - {None})


def cosine_similarities(mat1: torch.Tensor, mat2: torch.Tensor | None = None) -> torch.Tensor:
    """Cosine similarity of each row of ``mat1`` [n1, d] with each of ``mat2`` [n2, d] -> [n1, n2].

    ``mat2`` defaults to ``mat1``; norms are clamped at 1e-8, so a zero row scores 0.
    """
    mat2 = mat1 if mat2 is None else mat2
    unit1 = mat1 / mat1.norm(dim=1, keepdim=True).clamp(min=1e-8)
    unit2 = mat2 / mat2.norm(dim=1, keepdim=True).clamp(min=1e-8)
    return unit1 @ unit2.T
