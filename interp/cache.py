"""ActivationCache: the activations of one forward pass, by hook name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from interp.utils import get_act_name


class ActivationCache:
    """A read-only mapping from hook names to activations, with TransformerLens's shorthand.

    Example:
        >>> logits, cache = model.run_with_cache(tokens)
        >>> cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
        True
        >>> cache["resid_post", -1].shape, cache["scale", 2, "ln1"].shape
    """

    def __init__(self, cache_dict: dict[str, Tensor], model: Any, has_batch_dim: bool = True):
        self.cache_dict = cache_dict
        self.model = model
        self.has_batch_dim = has_batch_dim

    # ------------------------------------------------------------------ mapping protocol
    def key_of(self, key: str | tuple) -> str:
        """The full hook name for a key: a name, or ``(name, layer[, layer_type])``."""
        if isinstance(key, str):
            return get_act_name(key)
        if not isinstance(key, tuple) or not 1 <= len(key) <= 3:
            raise KeyError(
                f"Cache keys are a hook name or (name, layer[, layer_type]); got {key!r}."
            )
        name, layer, *layer_type = key
        if isinstance(layer, int) and layer < 0:
            layer += self.model.cfg.n_layers
        return get_act_name(name, layer, *layer_type)

    def __getitem__(self, key: str | tuple) -> Tensor:
        name = self.key_of(key)
        if name not in self.cache_dict:
            raise KeyError(
                f"{name!r} is not in this cache. It holds {len(self.cache_dict)} activations, "
                f"e.g. {list(self.cache_dict)[:5]}; widen run_with_cache's names_filter to keep it."
            )
        return self.cache_dict[name]

    def __contains__(self, key: str | tuple) -> bool:
        return self.key_of(key) in self.cache_dict

    def __iter__(self) -> Iterator[str]:
        return iter(self.cache_dict)

    def __len__(self) -> int:
        return len(self.cache_dict)

    def keys(self):
        return self.cache_dict.keys()

    def values(self):
        return self.cache_dict.values()

    def items(self):
        return self.cache_dict.items()

    def __repr__(self) -> str:
        return f"ActivationCache with {len(self)} activations ({self.nbytes / 2**20:.1f} MiB)"

    # ----------------------------------------------------------------- moving / resizing
    @property
    def nbytes(self) -> int:
        """Total bytes held by the cached tensors."""
        return sum(t.numel() * t.element_size() for t in self.cache_dict.values())

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> ActivationCache:
        """Move (and optionally cast) every activation; returns self for chaining."""
        self.cache_dict = {k: v.to(device=device, dtype=dtype) for k, v in self.cache_dict.items()}
        return self

    def remove_batch_dim(self) -> ActivationCache:
        """Drop the batch axis of a batch-of-one cache, in place; returns self."""
        if not self.has_batch_dim:
            return self
        sizes = {t.shape[0] for t in self.cache_dict.values()}
        if sizes - {1}:
            raise ValueError(
                f"remove_batch_dim needs a batch of 1; this cache has batch sizes {sizes}."
            )
        self.cache_dict = {k: v[0] for k, v in self.cache_dict.items()}
        self.has_batch_dim = False
        return self
