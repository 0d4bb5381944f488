"""TransformerLens's key/value cache names, on interp's own cache (``interp.cache.kv_cache``).

``HookedTransformerKeyValueCache.init_cache(cfg, device, batch_size)`` gives a cache that
``model(tokens, past_kv_cache=cache)`` fills and reads, with TransformerLens's ``freeze()``:
a frozen cache is read but not extended, so many continuations can share one prefix.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.cache.kv_cache import KeyValueCache, KeyValueCacheEntry
from interp.config import HookedTransformerConfig


class HookedTransformerKeyValueCacheEntry(KeyValueCacheEntry):
    """One layer's past keys and values, ``[batch, pos_so_far, n_heads, d_head]``.

    Example:
        >>> entry = HookedTransformerKeyValueCacheEntry.init_cache_entry(model.cfg, "cpu")
        >>> entry.past_keys.shape   # [batch, pos_so_far, n_heads, d_head]: nothing yet
        torch.Size([1, 0, 1, 64])
    """

    def __init__(
        self,
        past_keys: Float[Tensor, "batch pos_so_far n_heads d_head"],
        past_values: Float[Tensor, "batch pos_so_far n_heads d_head"],
        frozen: bool = False,
    ) -> None:
        super().__init__(past_keys, past_values)
        self.frozen = frozen

    @classmethod
    def init_cache_entry(
        cls,
        cfg: HookedTransformerConfig,
        device: torch.device | str | None,
        batch_size: int = 1,
    ) -> HookedTransformerKeyValueCacheEntry:
        """An empty entry for ``batch_size`` sequences, in the model's dtype."""
        n_heads = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
        shape = (batch_size, 0, n_heads, cfg.d_head)
        empty = torch.empty(shape, device=device, dtype=cfg.dtype)
        return cls(empty, empty.clone())

    @property
    def past_keys(self) -> Float[Tensor, "batch pos_so_far n_heads d_head"]:
        return self.keys

    @property
    def past_values(self) -> Float[Tensor, "batch pos_so_far n_heads d_head"]:
        return self.values

    def append(
        self,
        new_keys: Float[Tensor, "batch new_tokens n_heads d_head"],
        new_values: Float[Tensor, "batch new_tokens n_heads d_head"],
    ) -> tuple[Tensor, Tensor]:
        """All keys and values so far plus the new ones; kept unless the entry is frozen."""
        if self.keys is not None and self.keys.shape[0] != new_keys.shape[0]:
            raise ValueError(
                f"This key/value cache holds a batch of {self.keys.shape[0]}, but the new keys "
                f"have batch {new_keys.shape[0]}; init_cache(cfg, device, "
                f"batch_size={new_keys.shape[0]})."
            )
        if self.frozen:
            if self.keys is None:
                return new_keys, new_values
            return torch.cat([self.keys, new_keys], 1), torch.cat([self.values, new_values], 1)
        return super().extend(new_keys, new_values)

    extend = append  # the name the attention layer calls

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return f"HookedTransformerKeyValueCacheEntry(keys {shape}, frozen={self.frozen})"


class HookedTransformerKeyValueCache(KeyValueCache):
    """A key/value cache for every layer, under TransformerLens's name and constructor.

    Example:
        >>> cache = HookedTransformerKeyValueCache.init_cache(model.cfg, model.cfg.device, 1)
        >>> prompt_tokens, continuation_tokens = tokens[:, :11], tokens[:, 11:]
        >>> _ = model(prompt_tokens, past_kv_cache=cache)          # fills it
        >>> cache.freeze()
        >>> logits = model(continuation_tokens, past_kv_cache=cache)  # reads the prompt
        >>> cache                                                     # ... and adds nothing
        HookedTransformerKeyValueCache(2 layers, 11 positions, batch 1, frozen=True)
        >>> torch.allclose(logits, model(tokens)[:, 11:], atol=1e-4)  # as one forward pass
        True
    """

    def __init__(
        self,
        entries: list[HookedTransformerKeyValueCacheEntry],
        previous_attention_mask: Int[Tensor, "batch pos_so_far"] | None = None,
        frozen: bool = False,
    ) -> None:
        self.frozen = False
        super().__init__(entries, previous_attention_mask)
        if frozen:
            self.freeze()

    @classmethod
    def init_cache(
        cls,
        cfg: HookedTransformerConfig,
        device: torch.device | str | None,
        batch_size: int = 1,
    ) -> HookedTransformerKeyValueCache:
        """An empty cache for ``batch_size`` sequences on ``device`` (the config's if None)."""
        device = device if device is not None else cfg.device
        entries = [
            HookedTransformerKeyValueCacheEntry.init_cache_entry(cfg, device, batch_size)
            for _ in range(cfg.n_layers)
        ]
        return cls(entries)

    # The padding mask of the positions seen so far; None while nothing was padded. The
    # model sets it on each forward pass: a frozen cache keeps the one it had.
    @property
    def attention_mask(self) -> Int[Tensor, "batch pos_so_far"] | None:
        return self._attention_mask

    @attention_mask.setter
    def attention_mask(self, mask: Int[Tensor, "batch pos_so_far"] | None) -> None:
        if not self.frozen:
            self._attention_mask = mask

    @property
    def previous_attention_mask(self) -> Int[Tensor, "batch pos_so_far"]:
        """The mask of the positions seen so far (all ones when nothing was padded)."""
        if self._attention_mask is not None:
            return self._attention_mask
        keys = self.entries[0].keys
        return torch.ones(keys.shape[:2], dtype=torch.int, device=keys.device)

    def append_attention_mask(
        self, attention_mask: Int[Tensor, "batch new_tokens"]
    ) -> Int[Tensor, "batch pos_so_far_and_new"]:
        """The mask so far followed by ``attention_mask``; kept unless frozen."""
        previous = self.previous_attention_mask
        updated = torch.cat([previous, attention_mask.to(previous)], dim=-1)
        self.attention_mask = updated
        return updated

    def __repr__(self) -> str:
        batch = self.entries[0].keys.shape[0] if self.entries and self.length else "?"
        return (
            f"HookedTransformerKeyValueCache({len(self.entries)} layers, {self.length} positions, "
            f"batch {batch}, frozen={self.frozen})"
        )

    def freeze(self) -> None:
        """Read the cache without extending it (every entry too)."""
        self.frozen = True
        for entry in self.entries:
            entry.frozen = True

    def unfreeze(self) -> None:
        self.frozen = False
        for entry in self.entries:
            entry.frozen = False
