"""ActivationCache: the activations of one forward pass, by hook name.

The container is here (indexing, moving, batch slicing); what it computes from the
activations is in its mixins, one file a concept: ``resid`` (residual-stream
decompositions), ``components`` (per-head and per-neuron stacks) and ``logit_attrs`` (layer
norm on stacks, direct logit attribution). Keys resolve in ``keys``; ``pos_slice`` arguments
in ``positions``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from interp.cache.components import ComponentStackMixin
from interp.cache.keys import missing_key_message, resolve_key
from interp.cache.logit_attrs import LogitAttributionMixin
from interp.cache.positions import PosSlice, slice_positions
from interp.cache.resid import ResidDecompositionMixin
from interp.utils import Slice

__all__ = ["ActivationCache", "PosSlice", "slice_positions"]


class ActivationCache(ResidDecompositionMixin, ComponentStackMixin, LogitAttributionMixin):
    """A read-only mapping from hook names to activations, with TransformerLens's shorthand.

    Example:
        >>> logits, cache = model.run_with_cache(tokens)
        >>> cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
        True
        >>> cache["resid_post", -1].shape   # [batch, pos, d_model]
        torch.Size([1, 21, 128])
        >>> shakespeare = interp.load_model("shakespeare-char")   # LayerNorm, 4 layers
        >>> _, shakespeare_cache = shakespeare.run_with_cache("To be, or not to be")
        >>> shakespeare_cache["scale", 2, "ln1"].shape   # blocks.2.ln1.hook_scale: [batch, pos, 1]
        torch.Size([1, 19, 1])
    """

    def __init__(self, cache_dict: dict[str, Tensor], model: Any, has_batch_dim: bool = True):
        self.cache_dict = cache_dict
        self.model = model
        self.has_batch_dim = has_batch_dim

    # ------------------------------------------------------------------ mapping protocol
    def key_of(self, key: str | tuple) -> str:
        """The full hook name for a key: a name, or ``(name, layer[, layer_type])``; a layer
        counts from the end when negative and must exist in the model."""
        return resolve_key(key, self.model)

    def __getitem__(self, key: str | tuple) -> Tensor:
        if isinstance(key, str) and key in self.cache_dict:
            return self.cache_dict[key]
        name = self.key_of(key)
        if name not in self.cache_dict:
            raise KeyError(missing_key_message(key, name, self.model, self.cache_dict))
        return self.cache_dict[name]

    def __contains__(self, key: str | tuple) -> bool:
        try:
            return key in self.cache_dict or self.key_of(key) in self.cache_dict
        except KeyError:
            return False

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

    def toggle_autodiff(self, mode: bool = False) -> None:
        """``torch.set_grad_enabled(mode)``, as TransformerLens: global state, for the whole
        process (``with torch.inference_mode():`` is the local alternative)."""
        logging.warning("Changed the global state, set autodiff to %s", mode)
        torch.set_grad_enabled(mode)

    def apply_slice_to_batch_dim(self, batch_slice: Slice | PosSlice) -> ActivationCache:
        """A new cache with ``batch_slice`` applied to the batch axis of every activation (an
        int drops the axis); entries whose first axis is not the batch are left as they are.

        Example:
            >>> first = cache.apply_slice_to_batch_dim([0])   # a list keeps the batch axis
            >>> first["pattern", 0].shape, first.has_batch_dim
            (torch.Size([1, 1, 21, 21]), True)
            >>> one = cache.apply_slice_to_batch_dim(0)   # an int drops it
            >>> one["pattern", 0].shape, one.has_batch_dim
            (torch.Size([1, 21, 21]), False)
        """
        batch_slice = batch_slice if isinstance(batch_slice, Slice) else Slice(batch_slice)
        if not self.has_batch_dim:
            raise ValueError(
                "This cache has no batch axis (remove_batch_dim was applied), so "
                f"batch_slice={batch_slice.slice!r} cannot be applied."
            )
        sizes = Counter(t.shape[0] for t in self.cache_dict.values() if t.ndim > 0)
        batch_size = sizes.most_common(1)[0][0] if sizes else 1
        sliced = {
            name: batch_slice.apply(t, dim=0) if t.ndim > 0 and t.shape[0] == batch_size else t
            for name, t in self.cache_dict.items()
        }
        return ActivationCache(sliced, self.model, has_batch_dim=batch_slice.mode != "int")
