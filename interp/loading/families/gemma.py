"""Gemma 1, Gemma 2 and Gemma 3 (the text model, also inside a
``Gemma3ForConditionalGeneration``).

Gemma 1 is Llama's layout with Gemma's norms (``1 + w``), scaled embedding and GeGLU, tied
embeddings and no sliding window or sandwich norms. Gemma 2 and 3: RMS norms scaling by
``1 + w`` (``rmsnorm_uses_offset``: the checkpoint's ``w`` loads
as it is and the norm adds 1 in float32, as Hugging Face does, so bf16 models round as its
do), the embedding scaled by ``sqrt(d_model)`` (folded into ``W_E`` at load, as
TransformerLens does, rounded as Hugging Face rounds it), sandwich norms, GeGLU, GQA, a
``head_dim`` of their own, ``attn_scale = sqrt(query_pre_attn_scalar)``, tied embeddings and
sliding-window layers. Gemma 2 alternates local and global layers (local first) and
soft-caps scores and logits; Gemma 3 has five local layers to a global one, per-head QK
norms, a rotary base of its own on local layers, and linear rope scaling on global ones; it
soft-caps logits only when its config asks (its ``attn_logit_softcapping`` is unused by
Hugging Face's Gemma 3, so it is here too).
"""

from __future__ import annotations

import math
import re
from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import (
    activation,
    flag,
    positive_int,
    rope_fields,
    rope_number,
    rope_object,
    sliding_layers,
    soft_cap,
    window_fields,
)
from interp.loading.families.llama import llama_like_config, llama_like_table

_COMMON_DEFAULTS = dict(
    hidden_size=2304,
    intermediate_size=9216,
    num_hidden_layers=26,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=256,
    hidden_activation="gelu_pytorch_tanh",
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    attention_bias=False,
    query_pre_attn_scalar=256,
    sliding_window=4096,
)
# GemmaConfig's defaults (transformers 5), for fields a config.json leaves out.
GEMMA_DEFAULTS = dict(
    vocab_size=256000,
    hidden_size=3072,
    intermediate_size=24576,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=16,
    head_dim=256,
    hidden_act="gelu_pytorch_tanh",
    max_position_embeddings=8192,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    rope_theta=10000.0,
    attention_bias=False,
)
# Gemma2Config's / Gemma3TextConfig's defaults (transformers 5), for fields a config.json
# leaves out (Gemma 3's multimodal checkpoints rely on them for most text-model fields).
GEMMA2_DEFAULTS = _COMMON_DEFAULTS | dict(
    vocab_size=256000,
    max_position_embeddings=8192,
    rope_theta=10000.0,
    attn_logit_softcapping=50.0,
    final_logit_softcapping=30.0,
)
GEMMA3_DEFAULTS = _COMMON_DEFAULTS | dict(
    vocab_size=262208,
    max_position_embeddings=131072,
    rope_theta=1_000_000.0,
    rope_local_base_freq=10000.0,
    attn_logit_softcapping=None,
    final_logit_softcapping=None,
    sliding_window_pattern=6,
    use_bidirectional_attention=False,
)


def gemma_config(values: dict[str, Any]) -> dict[str, Any]:
    """Gemma 1: Llama's fields with Gemma's norms. Its released configs say ``hidden_act:
    "gelu"``, which Hugging Face reads as the tanh approximation (``gelu_pytorch_tanh``)."""
    if flag(values, "use_bidirectional_attention"):
        raise ValueError(
            "field 'use_bidirectional_attention' is true (an embedding model); interp loads "
            "causal language models only."
        )
    if values.get("hidden_act") == "gelu":
        values = values | dict(hidden_act="gelu_pytorch_tanh")
    return llama_like_config(values) | dict(rmsnorm_uses_offset=True)


def _gemma_config(values: dict[str, Any], sliding: list[bool]) -> dict[str, Any]:
    """The fields Gemma 2 and 3 share on top of Llama's."""
    values = values | dict(hidden_act=activation(values, "hidden_activation", "hidden_act"))
    scalar = values["query_pre_attn_scalar"]
    if isinstance(scalar, bool) or not isinstance(scalar, (int, float)) or scalar <= 0:
        raise ValueError(f"field 'query_pre_attn_scalar' is {scalar!r}; it must be positive.")
    return (
        llama_like_config(values)
        | window_fields(values["sliding_window"], sliding)
        | dict(
            use_normalization_before_and_after=True,
            rmsnorm_uses_offset=True,
            attn_scale=math.sqrt(scalar),
            attn_scores_soft_cap=soft_cap(values, "attn_logit_softcapping"),
            output_logits_soft_cap=soft_cap(values, "final_logit_softcapping"),
        )
    )


def gemma2_config(values: dict[str, Any]) -> dict[str, Any]:
    n_layers = positive_int(values, "num_hidden_layers")
    sliding = sliding_layers(values, [layer % 2 == 0 for layer in range(n_layers)])
    return _gemma_config(values, sliding)


def gemma3_config(values: dict[str, Any]) -> dict[str, Any]:
    if flag(values, "use_bidirectional_attention"):
        raise ValueError(
            "field 'use_bidirectional_attention' is true (an embedding model); interp loads "
            "causal language models only."
        )
    n_layers = positive_int(values, "num_hidden_layers")
    pattern = values.get("_sliding_window_pattern") or values["sliding_window_pattern"]
    sliding = sliding_layers(values, [(layer + 1) % pattern != 0 for layer in range(n_layers)])
    where = "rope_parameters.sliding_attention"
    local = rope_object(rope_object(values, "rope_parameters"), "sliding_attention", where)
    if not local:
        where, local = "rope_local_base_freq", dict(rope_theta=values["rope_local_base_freq"])
    local_type = local.get("rope_type") or local.get("type") or "default"
    if local_type != "default":
        raise ValueError(
            f"rope type {local_type!r} on sliding-window layers (field {where!r}) is not "
            "supported; interp scales the rotary frequencies of global layers only."
        )
    theta_field = f"{where}.rope_theta" if where != "rope_local_base_freq" else where
    local_base = rope_number(local, "rope_theta", theta_field, 10000.0, "default")
    return (
        _gemma_config(values, sliding)
        | rope_fields(values, positive_int(values, "max_position_embeddings"), "full_attention")
        # Hugging Face's Gemma 3 attention never applies attn_logit_softcapping.
        | dict(use_qk_norm=True, rotary_base_local=local_base, attn_scores_soft_cap=-1.0)
    )


def gemma_table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    bias = flag(values, "attention_bias")
    return llama_like_table(cfg, qkv_bias=bias, o_bias=bias, gemma=True)


GEMMA = Family(
    name="Gemma",
    architectures=("GemmaForCausalLM",),
    model_types=("gemma",),
    defaults=GEMMA_DEFAULTS,
    config=gemma_config,
    table=gemma_table,
)
GEMMA2 = Family(
    name="Gemma 2",
    architectures=("Gemma2ForCausalLM",),
    model_types=("gemma2",),
    defaults=GEMMA2_DEFAULTS,
    config=gemma2_config,
    table=gemma_table,
)
GEMMA3 = Family(
    name="Gemma 3",
    architectures=("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
    model_types=("gemma3_text", "gemma3"),
    defaults=GEMMA3_DEFAULTS,
    config=gemma3_config,
    table=gemma_table,
    # Gemma3ForConditionalGeneration's text model: saved as language_model.model.* (or
    # model.language_model.* in memory); its vision tower and projector are not loaded.
    renames=(
        ("language_model.model.", "model."),
        ("model.language_model.", "model."),
        ("language_model.lm_head.", "lm_head."),
    ),
    ignored=re.compile(r"^(model\.)?(vision_tower|multi_modal_projector)\."),
)
