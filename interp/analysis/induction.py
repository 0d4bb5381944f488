"""The standard induction test: random tokens repeated twice.

An induction head attends from each token of the second copy to the token that followed
its first occurrence, and a model that has one predicts the second copy well: its loss
there falls far below the first copy's (which is at chance).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.analysis.labels import head_label_grid

if TYPE_CHECKING:
    from interp.model import HookedTransformer


def repeated_random_tokens(
    d_vocab: int,
    seq_len: int,
    batch: int = 1,
    bos_token_id: int | None = None,
    seed: int | None = None,
    device: torch.device | str | None = None,
) -> Int[Tensor, "batch full_pos"]:
    """``[bos] r_1..r_n r_1..r_n`` with ``r`` uniform over the vocabulary (``full_pos`` is
    ``2 * seq_len`` plus one for a BOS token).

    Example:
        >>> repeated_random_tokens(100, 3, seed=0, bos_token_id=99)
        tensor([[99, 44, 39, 33, 44, 39, 33]])
    """
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    first_copy = torch.randint(0, d_vocab, (batch, seq_len), generator=generator)
    parts = [first_copy, first_copy]
    if bos_token_id is not None:
        parts.insert(0, torch.full((batch, 1), bos_token_id))
    return torch.cat(parts, dim=1).to(device)


@dataclass
class InductionTest:
    """The results of ``induction_test``.

    ``induction_scores[l, h]`` is head L{l}H{h}'s mean attention from second-copy tokens to
    the token after their first occurrence (0 to 1; ``labels[l][h]`` names it).
    ``loss_by_position[i]`` is the mean loss of predicting token ``i + 1``.
    """

    tokens: Int[Tensor, "batch full_pos"]
    induction_scores: Float[Tensor, "n_layers n_heads"]
    loss_by_position: Float[Tensor, " full_pos_minus_1"]
    first_copy_loss: float
    second_copy_loss: float
    labels: list[list[str]]


@torch.no_grad()
def induction_test(
    model: HookedTransformer,
    seq_len: int = 50,
    batch: int = 8,
    seed: int = 0,
    prepend_bos: bool | None = None,
) -> InductionTest:
    """Run the model on repeated random tokens; score every head and the in-context loss.

    The second-copy loss leaves out the first token of the second copy (it cannot be
    predicted). BOS is prepended when the model's tokenizer has one and
    ``cfg.default_prepend_bos`` (or ``prepend_bos``) says so.

    Example:
        >>> result = induction_test(model, seq_len=20)   # 2 * 20 + BOS fits n_ctx=64
        >>> result.induction_scores.shape   # [n_layers, n_heads]
        torch.Size([2, 1])
        >>> [round(score, 2) for score in result.induction_scores.flatten().tolist()]   # L1H0
        [0.0, 0.96]
        >>> result.first_copy_loss > 5 > 1 > result.second_copy_loss   # random, then copied
        True
    """
    bos_token_id = getattr(model.tokenizer, "bos_token_id", None)
    if prepend_bos is None:
        prepend_bos = model.cfg.default_prepend_bos and bos_token_id is not None
    if prepend_bos and bos_token_id is None:
        raise ValueError("prepend_bos=True but the model has no tokenizer with a BOS token.")
    n_bos = int(prepend_bos)
    if seq_len < 2 or 2 * seq_len + n_bos > model.cfg.n_ctx:
        raise ValueError(
            f"seq_len={seq_len} does not fit: it must be >= 2 and 2 * seq_len (+1 for BOS) "
            f"<= n_ctx={model.cfg.n_ctx}."
        )
    tokens = repeated_random_tokens(
        model.cfg.d_vocab, seq_len, batch, bos_token_id if prepend_bos else None, seed, model.device
    )
    (_, loss), cache = model.run_with_cache(
        tokens,
        return_type="both",
        loss_per_token=True,
        names_filter=lambda name: name.endswith("hook_pattern"),
    )
    # Query n_bos + seq_len + i (second copy of r_{i+1}) should attend to key n_bos + i + 1:
    # the diagonal seq_len - 1 below the main one, from its (1 + n_bos)-th entry on.
    patterns = torch.stack([cache["pattern", layer] for layer in range(model.cfg.n_layers)])
    stripe = patterns.diagonal(offset=1 - seq_len, dim1=-2, dim2=-1)[..., 1 + n_bos :]
    losses = loss.float()  # [batch, full_pos - 1]
    return InductionTest(
        tokens=tokens,
        induction_scores=stripe.float().mean(dim=(1, 3)),
        loss_by_position=losses.mean(0),
        first_copy_loss=losses[:, : n_bos + seq_len - 1].mean().item(),
        second_copy_loss=losses[:, n_bos + seq_len :].mean().item(),
        labels=head_label_grid(model.cfg.n_layers, model.cfg.n_heads),
    )
