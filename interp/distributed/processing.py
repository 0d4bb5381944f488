"""TransformerLens's weight processing on a tensor-parallel model: every step but one acts
on each head or neuron alone, so it runs on each rank's shard as it is; folding the value
biases sums over every head, so each rank's share is all-reduced."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from interp.distributed.process_group import TPGroup
from interp.loading.processing import process_weights


@torch.no_grad()
def fold_value_biases_tp(model: Any, tp: TPGroup) -> None:
    """``b_O += sum over every rank's heads of b_V[h] @ W_O[h]``; ``b_V`` becomes zero."""
    for block in model.blocks:
        attn = block.attn
        folded = torch.einsum("hd,hdm->m", attn.b_V.float(), attn.W_O.float()).contiguous()
        dist.all_reduce(folded, group=tp.group)
        attn.b_O.copy_(attn.b_O.float() + folded)
        attn.key_value_weights()[3].zero_()


def process_weights_tp(model: Any, tp: TPGroup, **steps: bool) -> Any:
    """``process_weights`` with the same steps (in TransformerLens's order), the value
    biases folded over every rank's heads."""
    fold_values = steps.pop("fold_value_biases", False)
    refactor = steps.pop("refactor_factored_attn_matrices", False)
    process_weights(model, **steps, fold_value_biases=False, refactor_factored_attn_matrices=False)
    if fold_values or refactor:  # refactoring folds them first: done here, over the ranks
        fold_value_biases_tp(model, tp)
    if refactor:  # per head: each rank's own
        process_weights(
            model,
            fold_ln=False,
            center_writing_weights=False,
            center_unembed=False,
            fold_value_biases=False,
            refactor_factored_attn_matrices=True,
        )
    return model
