"""The training recipes of the shipped models: everything that fixes a run besides the seed
and the data.

Example:
    >>> RECIPES["shakespeare-char"].steps
    2000
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Recipe:
    """Everything that fixes a training run besides the seed and the data.

    ``config`` holds HookedTransformerConfig arguments; a text recipe leaves out ``d_vocab``
    (it is the text's alphabet size).
    """

    config: dict[str, Any]
    data: str  # "text" (characters of a text) or "copied-segment" (see copied_segment_batch)
    steps: int
    batch_size: int
    lr: float
    min_lr: float
    warmup_steps: int
    weight_decay: float
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float | None = 1.0
    seed: int = 0
    threads: int = 1
    data_options: dict[str, Any] = field(default_factory=dict)


RECIPES: dict[str, Recipe] = {
    "shakespeare-char": Recipe(
        config=dict(
            n_layers=4,
            d_model=128,
            n_heads=4,
            n_ctx=128,
            act_fn="gelu",
            default_prepend_bos=False,
        ),
        data="text",
        steps=2000,
        batch_size=16,
        lr=2e-3,
        min_lr=2e-4,
        warmup_steps=100,
        weight_decay=0.1,
        seed=1337,
    ),
    # Found by a search over data, width, heads, init scale and learning rate: with one head
    # per layer, no layer norm, a large init and a loss on copied tokens only, layer 0
    # becomes a previous-token head and layer 1 an induction head.
    "attn-only-2l": Recipe(
        config=dict(
            n_layers=2,
            d_model=128,
            n_heads=1,
            d_head=64,
            n_ctx=64,
            d_vocab=512,
            attn_only=True,
            normalization_type=None,
            init_range=0.1,
        ),
        data="copied-segment",
        data_options=dict(min_segment=2, max_segment=24),
        steps=1500,
        batch_size=32,
        lr=1e-2,
        min_lr=0.0,
        warmup_steps=200,
        weight_decay=0.0,
        betas=(0.9, 0.98),
        grad_clip=None,
        seed=0,
    ),
}
