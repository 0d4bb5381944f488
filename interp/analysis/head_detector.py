"""TransformerLens-compatible head detection: ``detect_head(model, seq, "induction_head")``.

The scoring lives in ``interp.analysis.head_scores``; this module keeps TransformerLens's
function names and arguments so scripts port by changing the import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.analysis.head_scores import (
    HEAD_NAMES,
    ErrorMeasure,
    HeadName,
    attention_similarity,
    detection_pattern,
    duplicate_token_pattern,
    induction_pattern,
    previous_token_pattern,
)

if TYPE_CHECKING:
    from interp.cache import ActivationCache
    from interp.model import HookedTransformer

__all__ = [
    "HEAD_NAMES",
    "detect_head",
    "get_duplicate_token_head_detection_pattern",
    "get_induction_head_detection_pattern",
    "get_previous_token_head_detection_pattern",
]


def get_previous_token_head_detection_pattern(
    tokens: Int[Tensor, "1 pos"],
) -> Float[Tensor, "pos pos"]:
    """TransformerLens's name for ``previous_token_pattern`` of one sequence."""
    return previous_token_pattern(tokens.reshape(-1))


def get_duplicate_token_head_detection_pattern(
    tokens: Int[Tensor, "1 pos"],
) -> Float[Tensor, "pos pos"]:
    """TransformerLens's name for ``duplicate_token_pattern`` of one sequence."""
    return duplicate_token_pattern(tokens.reshape(-1))


def get_induction_head_detection_pattern(tokens: Int[Tensor, "1 pos"]) -> Float[Tensor, "pos pos"]:
    """TransformerLens's name for ``induction_pattern`` of one sequence."""
    return induction_pattern(tokens.reshape(-1))


def detect_head(
    model: HookedTransformer,
    seq: str | list[str] | Int[Tensor, " pos"] | Int[Tensor, "batch pos"],
    detection_pattern: Float[Tensor, "pos pos"] | HeadName,
    heads: list[tuple[int, int]] | dict[int, list[int]] | None = None,
    cache: ActivationCache | None = None,
    *,
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
    error_measure: ErrorMeasure = "mul",
) -> Float[Tensor, "n_layers n_heads"]:
    """Score every head (or the listed ``heads``; the rest get -1) against a head type.

    ``detection_pattern`` is one of ``HEAD_NAMES`` or a lower-triangular ``[pos, pos]`` 0/1
    tensor of where the head should attend. ``seq`` is a text, a list of texts or token ids;
    several sequences are scored one at a time and averaged. ``cache`` (of a single sequence)
    saves the forward pass. ``error_measure`` is ``"mul"`` (fraction of attention on the
    pattern) or ``"abs"`` (1 - summed absolute difference / pos); see ``attention_similarity``.

    Example:
        >>> scores = detect_head(model, "1 2 3 4 1 2 3 4", "induction_head")   # 512 symbols
        >>> scores.shape   # [n_layers, n_heads]
        torch.Size([2, 1])
        >>> detect_head(model, tokens, "previous_token_head").argmax().item()   # L0H0
        0
    """
    sequences = _token_rows(model, seq)
    if cache is not None and len(sequences) != 1:
        raise ValueError(
            f"A cache holds one sequence's activations but seq has {len(sequences)}; "
            "pass one sequence with the cache, or omit the cache."
        )
    selected = _selected_heads(model, heads)
    scores = torch.stack(
        [
            _score_sequence(
                model,
                tokens,
                detection_pattern,
                cache,
                exclude_bos,
                exclude_current_token,
                error_measure,
            )
            for tokens in sequences
        ]
    ).mean(0)
    return torch.where(selected, scores, torch.full_like(scores, -1.0))


def _token_rows(model: HookedTransformer, seq) -> list[Int[Tensor, " pos"]]:
    """The token ids of each sequence in ``seq`` (texts are tokenized one by one)."""
    if isinstance(seq, str):
        return [model.to_tokens(seq)[0]]
    if isinstance(seq, Sequence) and all(isinstance(text, str) for text in seq) and seq:
        return [model.to_tokens(text)[0] for text in seq]
    if isinstance(seq, Tensor) and seq.ndim in (1, 2) and not seq.is_floating_point():
        return list(seq.reshape(-1, seq.shape[-1]))
    raise TypeError(
        f"seq must be a text, a non-empty list of texts, or token ids [pos] / [batch, pos]; "
        f"got {type(seq).__name__}."
    )


def _selected_heads(model: HookedTransformer, heads) -> Tensor:
    """A [n_layers, n_heads] mask of the heads to score."""
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    if heads is None:
        return torch.ones(n_layers, n_heads, dtype=torch.bool)
    pairs = (
        [(layer, head) for layer, layer_heads in heads.items() for head in layer_heads]
        if isinstance(heads, dict)
        else list(heads)
    )
    selected = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    for layer, head in pairs:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(
                f"Head ({layer}, {head}) does not exist: layers are 0..{n_layers - 1} and "
                f"heads 0..{n_heads - 1}."
            )
        selected[layer, head] = True
    return selected


def _score_sequence(
    model: HookedTransformer,
    tokens: Int[Tensor, " pos"],
    pattern: Tensor | HeadName,
    cache: ActivationCache | None,
    exclude_bos: bool,
    exclude_current_token: bool,
    error_measure: ErrorMeasure,
) -> Float[Tensor, "n_layers n_heads"]:
    n_pos = tokens.shape[0]
    if not 1 < n_pos <= model.cfg.n_ctx:
        raise ValueError(
            f"The sequence has {n_pos} tokens; head detection needs 2..n_ctx={model.cfg.n_ctx}."
        )
    if isinstance(pattern, str):
        pattern = detection_pattern(pattern, tokens.cpu())
    if pattern.shape != (n_pos, n_pos) or not torch.equal(pattern, pattern.tril()):
        raise ValueError(
            f"The detection pattern must be lower triangular with shape ({n_pos}, {n_pos}) for "
            f"this {n_pos}-token sequence; got shape {tuple(pattern.shape)}."
        )
    if cache is None:
        _, cache = model.run_with_cache(
            tokens[None], names_filter=lambda name: name.endswith("hook_pattern"), return_type=None
        )
    # [n_layers, n_heads, query, key]
    patterns = torch.stack(
        [
            cache["pattern", layer][0] if cache.has_batch_dim else cache["pattern", layer]
            for layer in range(model.cfg.n_layers)
        ]
    )
    if cache.has_batch_dim and cache["pattern", 0].shape[0] != 1:
        raise ValueError(
            f"The cache holds a batch of {cache['pattern', 0].shape[0]} sequences; pass the cache "
            "of this one sequence (or none)."
        )
    if patterns.shape[-1] != n_pos:
        raise ValueError(
            f"The cache holds {patterns.shape[-1]}-token patterns but seq has {n_pos} tokens."
        )
    return attention_similarity(
        patterns.float(), pattern, exclude_bos, exclude_current_token, error_measure
    ).cpu()
