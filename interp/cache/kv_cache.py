"""Keys and values of positions already seen, so generation feeds one new token a step."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float, Int
from torch import Tensor


@dataclass
class KeyValueCacheEntry:
    """One attention layer's past keys and values, [batch, past_pos, n_kv_heads, d_head]:
    one per key/value head (``n_key_value_heads``, not expanded for grouped-query
    attention), keys already rotated for rotary models."""

    keys: Float[Tensor, "batch past_pos n_kv_heads d_head"] | None = None
    values: Float[Tensor, "batch past_pos n_kv_heads d_head"] | None = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[1]

    def extend(
        self,
        new_keys: Float[Tensor, "batch new_pos n_kv_heads d_head"],
        new_values: Float[Tensor, "batch new_pos n_kv_heads d_head"],
    ) -> tuple[Tensor, Tensor]:
        """Append the new positions and return all keys and values so far."""
        if self.keys is not None:
            new_keys = torch.cat([self.keys, new_keys], dim=1)
            new_values = torch.cat([self.values, new_values], dim=1)
        self.keys, self.values = new_keys, new_values
        return new_keys, new_values


@dataclass
class KeyValueCache:
    """Per-layer key/value caches plus the padding mask of every position seen so far.

    Example:
        >>> kv_cache = KeyValueCache.empty(model.cfg.n_layers)
        >>> _ = model(tokens[:, :-1], past_kv_cache=kv_cache)        # fills the cache
        >>> kv_cache.entries[0].keys.shape   # [batch, pos, n_heads, d_head]
        torch.Size([1, 20, 1, 64])
        >>> last = model(tokens[:, -1:], past_kv_cache=kv_cache)  # attends to the prompt too
        >>> torch.allclose(last[0, -1], model(tokens)[0, -1], atol=1e-4)
        True
    """

    entries: list[KeyValueCacheEntry]
    # 1 for real tokens, 0 for left padding; None when nothing was padded.
    attention_mask: Int[Tensor, "batch past_pos"] | None = field(default=None)

    @classmethod
    def empty(cls, n_layers: int) -> KeyValueCache:
        return cls([KeyValueCacheEntry() for _ in range(n_layers)])

    @property
    def length(self) -> int:
        return self.entries[0].length

    def __getitem__(self, layer: int) -> KeyValueCacheEntry:
        return self.entries[layer]
