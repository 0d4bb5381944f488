"""The activation cache: ``ActivationCache``, the activations of one forward pass by hook
name, with TransformerLens's shorthand keys and residual-stream decompositions.

One file a concept: ``activation_cache`` (the container: indexing, moving, batch slicing),
``keys`` (TransformerLens-style keys to hook names), ``positions`` (``pos_slice`` arguments),
``resid`` (residual-stream decompositions), ``components`` (per-head and per-neuron stacks)
and ``logit_attrs`` (layer norm on stacks, direct logit attribution).

Example:
    >>> from interp.cache import ActivationCache
    >>> logits, cache = model.run_with_cache(tokens)
    >>> cache["pattern", 0].shape   # [batch, n_heads, query_pos, key_pos]
    torch.Size([1, 1, 21, 21])
    >>> isinstance(cache, ActivationCache)
    True
"""

from interp.cache.activation_cache import ActivationCache
from interp.cache.positions import PosSlice, slice_positions

__all__ = ["ActivationCache", "PosSlice", "slice_positions"]
