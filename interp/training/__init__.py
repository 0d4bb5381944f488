"""Training the shipped models, one concept a module; ``interp.train`` runs a recipe.

- ``recipes``: ``Recipe`` and ``RECIPES``, everything that fixes a run besides seed and data;
- ``text``: character-level text data, its held-out loss and sampling;
- ``copied_segments``: the generated token data the attention-only model trains on;
- ``induction_probes``: induction and previous-token scores on repeated random tokens;
- ``loop``: the learning-rate schedule, the optimizer and the training loop.

Example:
    >>> from interp.training.text import default_text, split_text
    >>> train_text, val_text = split_text(default_text())
"""
