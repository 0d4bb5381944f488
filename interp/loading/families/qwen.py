"""Qwen 2 / 2.5 (Llama's layout with q/k/v biases) and Qwen 3 (no biases; per-head QK norms,
a ``head_dim`` of its own). TransformerLens sets ``default_prepend_bos=False`` for both."""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import flag, positive_int, sliding_layers, window_fields
from interp.loading.families.llama import LLAMA_DEFAULTS, llama_like_config, llama_like_table

# Qwen2Config's / Qwen3Config's defaults (transformers 5), for fields a config.json leaves out.
QWEN2_DEFAULTS = LLAMA_DEFAULTS | dict(
    vocab_size=151936,
    intermediate_size=22016,
    num_key_value_heads=32,
    max_position_embeddings=32768,
    use_sliding_window=False,
    sliding_window=4096,
    max_window_layers=28,
)
QWEN3_DEFAULTS = QWEN2_DEFAULTS | dict(head_dim=128)


def _window(values: dict[str, Any]) -> dict[str, Any]:
    """Qwen's optional sliding window: on the layers from ``max_window_layers`` on."""
    if not flag(values, "use_sliding_window"):
        return {}
    n_layers = positive_int(values, "num_hidden_layers")
    first = values["max_window_layers"]
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise ValueError(
            f"field 'max_window_layers' is {first!r}; it must be a layer index (an integer >= 0)."
        )
    default = [layer >= first for layer in range(n_layers)]
    return window_fields(values["sliding_window"], sliding_layers(values, default))


def qwen2_config(values: dict[str, Any]) -> dict[str, Any]:
    return llama_like_config(values) | _window(values) | dict(default_prepend_bos=False)


def qwen3_config(values: dict[str, Any]) -> dict[str, Any]:
    return qwen2_config(values) | dict(use_qk_norm=True)


def qwen2_table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    return llama_like_table(cfg, qkv_bias=True)


def qwen3_table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    bias = flag(values, "attention_bias")
    return llama_like_table(cfg, qkv_bias=bias, o_bias=bias)


QWEN2 = Family(
    name="Qwen2",
    architectures=("Qwen2ForCausalLM",),
    model_types=("qwen2",),
    defaults=QWEN2_DEFAULTS,
    config=qwen2_config,
    table=qwen2_table,
)
QWEN3 = Family(
    name="Qwen3",
    architectures=("Qwen3ForCausalLM",),
    model_types=("qwen3",),
    defaults=QWEN3_DEFAULTS,
    config=qwen3_config,
    table=qwen3_table,
)
