"""Checks on what patching is given: clean and corrupted activations that fit together."""

from __future__ import annotations

from torch import Tensor


def check_same_shape(
    name: str,
    clean: Tensor,
    corrupted: Tensor,
    clean_label: str = "clean",
    corrupted_label: str = "corrupted",
) -> None:
    """Raise if an activation's clean and corrupted values differ in shape: the prompts
    differ in number or length, and patching one into the other would fail or broadcast.

    Example:
        >>> z = cache["blocks.0.attn.hook_z"]   # [batch, pos, head_index, d_head]
        >>> check_same_shape("blocks.0.attn.hook_z", z, z)   # fine: nothing happens
        >>> check_same_shape("blocks.0.attn.hook_z", z, z[:, :5])
        Traceback (most recent call last):
        ValueError: The clean blocks.0.attn.hook_z has shape (1, 21, 1, 64) but the corrupted ...
    """
    if clean.shape != corrupted.shape:
        raise ValueError(
            f"The {clean_label} {name} has shape {tuple(clean.shape)} but the {corrupted_label} "
            f"run's is {tuple(corrupted.shape)}; {clean_label} and {corrupted_label} prompts must "
            "have the same number of prompts and of tokens: choose prompts that tokenize to the "
            "same length (model.to_str_tokens shows the tokens)."
        )
