"""Composition scores: how much a later head reads what an earlier head writes.

Following "A Mathematical Framework for Transformer Circuits", the score of a product
``W_A @ W_B`` is ``||W_A W_B||_F / (||W_A||_F ||W_B||_F)``. An earlier head's OV circuit
composes with a later head's query side (Q-composition, ``OV @ QK``), key side
(K-composition, ``OV @ QK^T``) or value side (V-composition, ``OV @ OV``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from interp.analysis.factored_matrix import FactoredMatrix
from interp.analysis.labels import head_labels

if TYPE_CHECKING:
    from interp.model import HookedTransformer

CompositionMode = Literal["Q", "K", "V"]


def get_comp_score(
    W_A: Float[Tensor, "in_A out_A"], W_B: Float[Tensor, "out_A out_B"]
) -> Float[Tensor, ""]:
    """The composition score of two dense matrices, ``||W_A W_B||_F / (||W_A||_F ||W_B||_F)``.

    Example:
        >>> round(get_comp_score(model.OV[0, 0].AB, model.QK[1, 0].AB).item(), 3)  # Q: L0H0 -> L1H0
        0.038
    """
    return (W_A @ W_B).norm() / (W_A.norm() * W_B.norm())


def composition_scores(
    left: FactoredMatrix, right: FactoredMatrix, broadcast_dims: bool = True
) -> Float[Tensor, "..."]:
    """Composition scores of factored matrices, never forming the d_model x d_model products.

    With ``broadcast_dims`` every left leading index is paired with every right one: shapes
    ``[*left_leading]`` and ``[*right_leading]`` give ``[*left_leading, *right_leading]``.
    Otherwise the leading dims broadcast elementwise.

    Example:
        >>> composition_scores(model.OV, model.QK).shape   # [n_layers, n_heads, n_layers, n_heads]
        torch.Size([2, 1, 2, 1])
    """
    if left.rdim != right.ldim:
        raise ValueError(
            f"left's columns ({left.rdim}) must match right's rows ({right.ldim}): {left}, {right}."
        )
    if broadcast_dims:
        n_left, n_right = left.ndim - 2, right.ndim - 2
        for _ in range(n_right):
            left = left.unsqueeze(-1)
        for _ in range(n_left):
            right = right.unsqueeze(0)
    # Dropping the outer orthogonal factors (U of left, V of right) leaves every norm unchanged.
    left_core = left.collapse_l()  # [..., k_left, d_model]
    right_core = right.collapse_r()  # [..., d_model, k_right]
    product_norm = (left_core @ right_core).norm(dim=(-2, -1))
    return product_norm / (left_core.norm(dim=(-2, -1)) * right_core.norm(dim=(-2, -1)))


def all_composition_scores(
    model: HookedTransformer, mode: CompositionMode, return_labels: bool = False
) -> Float[Tensor, "n_layers n_heads n_layers n_heads"] | tuple[Tensor, list[str]]:
    """Composition scores from every head (first two axes) to every head of a later layer
    (last two axes); pairs not in strictly increasing layer order are 0.

    ``mode`` is ``"Q"``, ``"K"`` or ``"V"``. With ``return_labels`` also returns the flat head
    labels ``["L0H0", "L0H1", ...]`` (reshape the scores to ``[n_layers * n_heads] * 2`` to
    match them).

    Example:
        >>> scores = all_composition_scores(model, "K")   # [n_layers, n_heads, n_layers, n_heads]
        >>> round(scores[0, 0, 1, 0].item(), 3)   # how much L1H0's keys read L0H0's output
        0.164
        >>> round(all_composition_scores(model, "Q")[0, 0, 1, 0].item(), 3)   # K, not Q, here
        0.038
    """
    if mode not in ("Q", "K", "V"):
        raise ValueError(f"mode must be 'Q', 'K' or 'V', got {mode!r}.")
    left = model.OV
    right = {"Q": model.QK, "K": model.QK.T, "V": model.OV}[mode]
    scores = composition_scores(left, right, broadcast_dims=True)
    layers = torch.arange(model.cfg.n_layers, device=scores.device)
    earlier = layers[:, None, None, None] < layers[None, None, :, None]
    scores = torch.where(earlier, scores, torch.zeros_like(scores))
    if return_labels:
        return scores, head_labels(model.cfg.n_layers, model.cfg.n_heads)
    return scores
