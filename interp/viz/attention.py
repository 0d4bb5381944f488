"""Attention views on circuitsvis: every head of a layer, or one head's pattern.

Each function takes the attention pattern as a tensor or reads it from an
``ActivationCache``, plus the prompt's string tokens, and returns a ``CircuitsVisView``
that displays inline in a notebook and saves to an offline HTML file.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from interp.cache import ActivationCache
from interp.viz.circuitsvis_view import CircuitsVisView, circuitsvis_tokens

PatternSource = (
    ActivationCache
    | Float[Tensor, "head query_pos key_pos"]
    | Float[Tensor, "batch head query_pos key_pos"]
)


def layer_pattern(
    source: PatternSource, layer: int | None = None, batch_index: int = 0
) -> Float[Tensor, "head query_pos key_pos"]:
    """One prompt's attention pattern for every head of a layer, on the CPU in fp32.

    ``source`` is a cache (then ``layer`` picks ``blocks.{layer}.attn.hook_pattern``) or a
    pattern tensor; ``batch_index`` picks the prompt when there is a batch axis.

    Example:
        >>> layer_pattern(cache, layer=1).shape   # [head, query_pos, key_pos]
        torch.Size([1, 21, 21])
    """
    if isinstance(source, ActivationCache):
        if layer is None:
            raise ValueError("Reading the pattern from a cache needs layer=, e.g. layer=0.")
        pattern = source["pattern", layer]
        if source.has_batch_dim:
            pattern = pattern[batch_index]
    elif isinstance(source, Tensor):
        pattern = source[batch_index] if source.ndim == 4 else source
    else:
        raise TypeError(
            f"Expected an ActivationCache or a pattern tensor, got {type(source).__name__}."
        )
    if pattern.ndim != 3 or pattern.shape[1] != pattern.shape[2]:
        raise ValueError(
            "An attention pattern must be [head, query_pos, key_pos] (or with a leading batch "
            f"axis) with query_pos == key_pos; got shape {tuple(pattern.shape)}."
        )
    return pattern.detach().to("cpu", torch.float32)


def _check_tokens(tokens: Sequence[str], n_positions: int) -> list[str]:
    tokens = circuitsvis_tokens(tokens)
    if len(tokens) != n_positions:
        raise ValueError(
            f"Got {len(tokens)} tokens for {n_positions} positions; pass "
            "model.to_str_tokens(prompt) for the same prompt the pattern came from."
        )
    return tokens


def attention_heads(
    source: PatternSource,
    tokens: Sequence[str],
    layer: int | None = None,
    head_names: Sequence[str] | None = None,
    batch_index: int = 0,
) -> CircuitsVisView:
    """Every head of one layer: small thumbnails, and the selected head in full.

    ``source``: a cache (with ``layer``) or a pattern [head, query_pos, key_pos] or
    [batch, head, query_pos, key_pos]; ``tokens``: the ``query_pos`` string tokens.

    Example:
        >>> logits, cache = model.run_with_cache(tokens)
        >>> attention_heads(cache, model.to_str_tokens(tokens), layer=0)   # shows in a notebook
        CircuitsVisView('AttentionHeads', props=[...])
    """
    pattern = layer_pattern(source, layer, batch_index)
    tokens = _check_tokens(tokens, pattern.shape[-1])
    prefix = f"L{layer}" if layer is not None else ""
    names = (
        list(head_names)
        if head_names is not None
        else [f"{prefix}H{head}" for head in range(pattern.shape[0])]
    )
    if len(names) != pattern.shape[0]:
        raise ValueError(f"Got {len(names)} head names for {pattern.shape[0]} heads.")
    title = f"Layer {layer} attention heads" if layer is not None else "Attention heads"
    props = {"attention": pattern, "tokens": tokens, "attentionHeadNames": names}
    return CircuitsVisView("AttentionHeads", props, title=title)


def attention_pattern(
    source: PatternSource,
    tokens: Sequence[str],
    layer: int | None = None,
    head: int = 0,
    batch_index: int = 0,
) -> CircuitsVisView:
    """One head's pattern as a heatmap from query (rows) to key (columns) tokens.

    Example:
        >>> attention_pattern(cache, model.to_str_tokens(tokens), layer=1, head=0)
        CircuitsVisView('AttentionPattern', props=[...])
    """
    pattern = layer_pattern(source, layer, batch_index)
    if not -pattern.shape[0] <= head < pattern.shape[0]:
        raise ValueError(f"head={head} is out of range for {pattern.shape[0]} heads.")
    tokens = _check_tokens(tokens, pattern.shape[-1])
    title = f"L{layer}H{head} attention" if layer is not None else f"Head {head} attention"
    props = {"attention": pattern[head], "tokens": tokens, "showAxisLabels": True}
    return CircuitsVisView("AttentionPattern", props, title=title)
