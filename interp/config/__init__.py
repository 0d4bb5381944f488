"""The model's configuration: ``HookedTransformerConfig`` with TransformerLens's field names.

One file a concept: ``hooked_transformer_config`` (the dataclass, derived fields, dict round
trips, the GPT-2 family's presets) and ``checks`` (what makes a config valid, with the
errors that name the contradicting fields).

Example:
    >>> from interp.config import HookedTransformerConfig
    >>> cfg = HookedTransformerConfig(n_layers=2, d_model=64, n_heads=4, d_vocab=100, n_ctx=32)
    >>> cfg.d_head, cfg.d_mlp   # d_model / n_heads, 4 * d_model
    (16, 256)
"""

from interp.config.checks import (
    ACTIVATION_FUNCTIONS,
    ATTENTION_TYPES,
    NORMALIZATION_TYPES,
    POSITIONAL_EMBEDDING_TYPES,
)
from interp.config.hooked_transformer_config import HookedTransformerConfig, preset_config

__all__ = [
    "ACTIVATION_FUNCTIONS",
    "ATTENTION_TYPES",
    "NORMALIZATION_TYPES",
    "POSITIONAL_EMBEDDING_TYPES",
    "HookedTransformerConfig",
    "preset_config",
]
