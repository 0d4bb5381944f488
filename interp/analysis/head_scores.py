"""Attention-head scores: how well each head's pattern matches a head type's ideal pattern.

A detection pattern is a ``[pos, pos]`` (query, key) 0/1 matrix of where a head of that type
should attend: the previous token, earlier copies of the current token (duplicate-token), or
the token after an earlier copy of the current token (induction). Scores follow
TransformerLens's ``head_detector``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.analysis.labels import head_label_grid

if TYPE_CHECKING:
    from interp.cache import ActivationCache
    from interp.model import HookedTransformer

HeadName = Literal["previous_token_head", "duplicate_token_head", "induction_head"]
HEAD_NAMES: tuple[HeadName, ...] = ("previous_token_head", "duplicate_token_head", "induction_head")
ErrorMeasure = Literal["abs", "mul"]
# A head is named as a head of a kind (in a summary) only at this score or above: at least
# this fraction of its attention goes where a head of that kind attends.
HEAD_THRESHOLD = 0.3


def previous_token_pattern(tokens: Int[Tensor, "... pos"]) -> Float[Tensor, "... pos pos"]:
    """1 where the query attends to the key just before it.

    Example:
        >>> previous_token_pattern(torch.tensor([5, 6, 7]))
        tensor([[0., 0., 0.],
                [1., 0., 0.],
                [0., 1., 0.]])
    """
    n_pos = tokens.shape[-1]
    pattern = torch.eye(n_pos, device=tokens.device).roll(-1, dims=-1).tril(-1)
    return pattern.expand(*tokens.shape, n_pos).clone()


def duplicate_token_pattern(tokens: Int[Tensor, "... pos"]) -> Float[Tensor, "... pos pos"]:
    """1 where the key is an earlier copy of the query's token.

    Example:
        >>> duplicate_token_pattern(torch.tensor([5, 6, 5]))[2]
        tensor([1., 0., 0.])
    """
    same_token = tokens[..., :, None] == tokens[..., None, :]  # [..., query, key]
    return same_token.float().tril(-1)


def induction_pattern(tokens: Int[Tensor, "... pos"]) -> Float[Tensor, "... pos pos"]:
    """1 where the key comes right after an earlier copy of the query's token.

    Example:
        >>> induction_pattern(torch.tensor([5, 6, 5]))[2]   # "5 6 5" -> attend to "6"
        tensor([0., 1., 0.])
    """
    duplicates = duplicate_token_pattern(tokens)
    shifted = torch.zeros_like(duplicates)
    shifted[..., 1:] = duplicates[..., :-1]  # key k+1 after a duplicate at key k
    return shifted.tril()


DETECTION_PATTERNS = {
    "previous_token_head": previous_token_pattern,
    "duplicate_token_head": duplicate_token_pattern,
    "induction_head": induction_pattern,
}


def detection_pattern(name: HeadName, tokens: Int[Tensor, "... pos"]) -> Tensor:
    """The ``[..., pos, pos]`` detection pattern of a head type named in ``HEAD_NAMES``."""
    if name not in DETECTION_PATTERNS:
        raise ValueError(f"Unknown head type {name!r}; choose one of {HEAD_NAMES}.")
    return DETECTION_PATTERNS[name](tokens)


def attention_similarity(
    patterns: Float[Tensor, "... query key"],
    detection: Float[Tensor, "... query key"],
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
    error_measure: ErrorMeasure = "mul",
) -> Float[Tensor, "..."]:
    """How well attention patterns match a detection pattern, one score per leading index.

    ``"mul"``: the fraction of attention that falls where the detection pattern is 1 (0 to 1).
    ``"abs"``: 1 minus the summed absolute difference divided by the sequence length, rounded
    to 3 decimals as TransformerLens does (-1 to 1). ``exclude_bos`` drops key 0 and
    ``exclude_current_token`` the diagonal from the comparison.

    Example:
        >>> scores = attention_similarity(cache["pattern", 1][0], induction_pattern(tokens[0]))
        >>> scores.shape   # [n_heads]
        torch.Size([1])
        >>> round(scores[0].item(), 2)   # L1H0; only the 10 second-copy queries (of 21) can match
        0.47
    """
    if error_measure not in ("mul", "abs"):
        raise ValueError(f"error_measure must be 'mul' or 'abs', got {error_measure!r}.")
    n_pos = patterns.shape[-1]
    keep = torch.ones(patterns.shape[-2:], device=patterns.device)
    if exclude_bos:
        keep[:, 0] = 0
    if exclude_current_token:
        keep.fill_diagonal_(0)
    detection = detection.to(patterns)
    if error_measure == "mul":
        kept = patterns * keep
        return (kept * detection).sum((-2, -1)) / kept.sum((-2, -1))
    difference = ((patterns - detection).abs() * keep).sum((-2, -1)) / n_pos
    return 1 - torch.round(difference, decimals=3)


def head_scores(
    model: HookedTransformer,
    tokens: Int[Tensor, "batch pos"] | str | list[str],
    cache: ActivationCache | None = None,
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
    error_measure: ErrorMeasure = "mul",
    return_labels: bool = False,
) -> dict[str, Float[Tensor, "n_layers n_heads"]] | tuple[dict[str, Tensor], list[list[str]]]:
    """Previous-token, duplicate-token and induction scores of every head, from one forward.

    Returns ``{head type: [n_layers, n_heads] scores}`` averaged over the batch (and
    ``labels[l][h] == "L{l}H{h}"`` with ``return_labels``). A given ``cache`` must hold the
    attention patterns of these tokens.

    Example:
        >>> scores = head_scores(model, tokens)   # BOS and 10 random tokens, repeated
        >>> scores["induction_head"].shape   # [n_layers, n_heads]
        torch.Size([2, 1])
        >>> round(scores["previous_token_head"][0, 0].item(), 2)   # L0H0
        0.94
    """
    if isinstance(tokens, (str, list)):
        tokens = model.to_tokens(tokens)
    tokens = tokens if tokens.ndim == 2 else tokens[None]
    if cache is None:
        _, cache = model.run_with_cache(
            tokens, names_filter=lambda name: name.endswith("hook_pattern"), return_type=None
        )
    patterns = torch.stack([cache["pattern", layer] for layer in range(model.cfg.n_layers)])
    if not cache.has_batch_dim:
        patterns = patterns[:, None]
    if patterns.shape[1] != tokens.shape[0] or patterns.shape[-1] != tokens.shape[-1]:
        raise ValueError(
            f"The cache's patterns {tuple(patterns.shape[1:])} do not match tokens of shape "
            f"{tuple(tokens.shape)}: pass the cache of these tokens."
        )
    # patterns: [n_layers, batch, n_heads, query, key]; detection: [batch, 1, query, key]
    scores = {
        name: attention_similarity(
            patterns.float(),
            make_pattern(tokens.to(patterns.device))[:, None],
            exclude_bos,
            exclude_current_token,
            error_measure,
        ).mean(dim=1)
        for name, make_pattern in DETECTION_PATTERNS.items()
    }
    if return_labels:
        return scores, head_label_grid(model.cfg.n_layers, model.cfg.n_heads)
    return scores


def induction_layers(
    previous_token_scores: Float[Tensor, "n_layers n_heads"], threshold: float = HEAD_THRESHOLD
) -> Tensor:
    """``[n_layers]`` bools: the layers whose heads can be induction heads. An induction head
    attends to the token after an earlier copy of the current one, which it finds by keys
    that a previous-token head in an earlier layer has written; so a head in layer ``L``
    counts only if some head in a layer before ``L`` has a previous-token score of at least
    ``threshold``. Layer 0 never can.

    Example:
        >>> induction_layers(torch.tensor([[0.9], [0.1], [0.0]]))
        tensor([False,  True,  True])
    """
    strong = (previous_token_scores.nan_to_num(0.0) >= threshold).any(dim=1)  # [n_layers]
    upstream = strong.int().cumsum(0) > 0  # a previous-token head in this layer or before
    return torch.cat([torch.zeros(1, dtype=torch.bool), upstream[:-1]])


def strongest_heads(
    scores: dict[str, Float[Tensor, "n_layers n_heads"]], threshold: float = HEAD_THRESHOLD
) -> dict[str, tuple[str, float] | None]:
    """The best head of each kind in ``head_scores``'s output, ``(label, score)``, or
    ``None`` where no head scores ``threshold`` or more; an induction head must also sit
    after a previous-token head (``induction_layers``). NaN scores never count.

    Example:
        >>> strongest_heads(head_scores(model, tokens))
        {'previous_token_head': ('L0H0', 0.94), 'duplicate_token_head': None,
         'induction_head': ('L1H0', 0.47)}
    """
    best: dict[str, tuple[str, float] | None] = {}
    for kind, values in scores.items():
        values = values.float().nan_to_num(float("-inf")).clone()
        if kind == "induction_head" and "previous_token_head" in scores:
            values[~induction_layers(scores["previous_token_head"], threshold)] = float("-inf")
        index = int(values.flatten().argmax())
        layer, head = divmod(index, values.shape[1])
        score = float(values[layer, head])
        best[kind] = (f"L{layer}H{head}", score) if score >= threshold else None
    return best
