"""Phi 3 and Phi 4 (Microsoft's ``Phi3ForCausalLM``): Llama's layout with the q/k/v
projections fused into one ``qkv_proj`` (all queries, then all keys, then all values) and the
gate and up projections into one ``gate_up_proj`` (gate first), optional partial rotary and
a sliding window on every layer, and LongRoPE scaling for the long-context models."""

from __future__ import annotations

import math
from typing import Any

from torch import Tensor

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Convert, Family, Row
from interp.loading.families.config_fields import (
    fraction,
    positive_int,
    rope_fields,
    rope_parameters,
    window_fields,
)
from interp.loading.families.converters import (
    embedding,
    heads_in,
    heads_out,
    same,
    transposed,
    unembedding_rows,
    zeros,
)
from interp.loading.families.llama import LLAMA_DEFAULTS, llama_like_config

# Phi3Config's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = LLAMA_DEFAULTS | dict(
    vocab_size=32064,
    hidden_size=3072,
    intermediate_size=8192,
    num_hidden_layers=32,
    num_attention_heads=32,
    max_position_embeddings=4096,
    original_max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    sliding_window=None,
)


def config(values: dict[str, Any]) -> dict[str, Any]:
    rope = rope_parameters(values)
    where = "rope_parameters" if isinstance(values.get("rope_parameters"), dict) else "rope_scaling"
    longrope = rope["rope_type"] in ("longrope", "su")  # "su": its older name
    default_rope = dict(rope_type="default", rope_theta=rope["rope_theta"])
    fields = llama_like_config(values | dict(rope_parameters=default_rope, rope_scaling=None))
    if "partial_rotary_factor" in rope:
        factor = fraction(rope, "partial_rotary_factor", "rope_parameters.partial_rotary_factor")
        fields["rotary_dim"] = int(fields["d_head"] * factor)  # as Hugging Face rounds it
    if longrope:
        fields |= longrope_fields(values, rope, where, fields.get("rotary_dim", fields["d_head"]))
    elif rope["rope_type"] != "default":
        fields |= rope_fields(values, fields["n_ctx"])  # linear or llama3, as Llama's
    n_layers = fields["n_layers"]
    return fields | window_fields(values.get("sliding_window"), [True] * n_layers)


def longrope_fields(
    values: dict[str, Any], rope: dict[str, Any], where: str, rotary_dim: int
) -> dict[str, Any]:
    """LongRoPE's config fields, as Hugging Face's ``_compute_longrope_parameters`` reads
    them: both factor lists, the original context (of the rope settings, else config.json's
    ``original_max_position_embeddings``) and the attention factor (given, else
    ``sqrt(1 + log(factor) / log(original))`` for ``factor`` (given, else
    ``max_position_embeddings / original``) above 1)."""
    for name in ("short_factor", "long_factor"):
        factors = rope.get(name)
        if not isinstance(factors, list) or len(factors) != rotary_dim // 2:
            raise ValueError(
                f"field '{where}.{name}' is {factors!r}; LongRoPE needs a list of "
                f"{rotary_dim // 2} numbers, one per rotary frequency (head_dim * "
                "partial_rotary_factor / 2)."
            )
    original = rope.get("original_max_position_embeddings")
    if original is None:
        original = positive_int(values, "original_max_position_embeddings")
    elif isinstance(original, bool) or not isinstance(original, int) or original <= 0:
        raise ValueError(
            f"field '{where}.original_max_position_embeddings' is {original!r}; it must be a "
            "positive integer, the context length the model was trained with."
        )
    attention = rope.get("attention_factor")
    if attention is None:
        factor = rope.get("factor")
        if factor is None:
            factor = positive_int(values, "max_position_embeddings") / original
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    return dict(
        longrope_short_factor=list(rope["short_factor"]),
        longrope_long_factor=list(rope["long_factor"]),
        longrope_original_ctx_len=original,
        longrope_attention_factor=float(attention),
    )


def _fused_qkv(ours: str, n_heads: int, n_kv: int, grouped: str) -> Convert:
    """``qkv_proj`` [(n_heads + 2 n_kv) d_head, d_model] as W_Q and (grouped) W_K, W_V."""

    def convert(tensor: Tensor) -> dict[str, Tensor]:
        d_head = tensor.shape[0] // (n_heads + 2 * n_kv)
        q, k, v = tensor.split([n_heads * d_head, n_kv * d_head, n_kv * d_head])
        return (
            heads_in(ours + "W_Q", n_heads)(q)
            | heads_in(f"{ours}{grouped}W_K", n_kv)(k)
            | heads_in(f"{ours}{grouped}W_V", n_kv)(v)
        )

    return convert


def _fused_gate_up(ours: str) -> Convert:
    """``gate_up_proj`` [2 d_mlp, d_model] (gate rows first) as W_gate and W_in."""

    def convert(tensor: Tensor) -> dict[str, Tensor]:
        gate, up = tensor.chunk(2, dim=0)
        return {ours + "W_gate": gate.T, ours + "W_in": up.T}

    return convert


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    n_kv = cfg.n_key_value_heads or h
    grouped = "_" if n_kv != h else ""
    tied = cfg.tie_word_embeddings
    rows = [Row("model.embed_tokens.weight", (cfg.d_vocab, m), embedding(cfg, tied))]
    for layer in range(cfg.n_layers):
        hf, ours = f"model.layers.{layer}.", f"blocks.{layer}."
        attn = ours + "attn."
        qkv = _fused_qkv(attn, h, n_kv, grouped)
        rows += [
            Row(hf + "input_layernorm.weight", (m,), same(ours + "ln1.w")),
            Row(hf + "self_attn.qkv_proj.weight", ((h + 2 * n_kv) * d, m), qkv),
            zeros(attn + "b_Q", (h, d)),
            zeros(f"{attn}{grouped}b_K", (n_kv, d)),
            zeros(f"{attn}{grouped}b_V", (n_kv, d)),
            Row(hf + "self_attn.o_proj.weight", (m, h * d), heads_out(attn + "W_O", h)),
            zeros(attn + "b_O", (m,)),
            Row(hf + "post_attention_layernorm.weight", (m,), same(ours + "ln2.w")),
            Row(hf + "mlp.gate_up_proj.weight", (2 * mlp, m), _fused_gate_up(ours + "mlp.")),
            Row(hf + "mlp.down_proj.weight", (m, mlp), transposed(ours + "mlp.W_out")),
            zeros(ours + "mlp.b_in", (mlp,)),
            zeros(ours + "mlp.b_out", (m,)),
        ]
    rows.append(Row("model.norm.weight", (m,), same("ln_final.w")))
    return rows + unembedding_rows(cfg, tied)


PHI3 = Family(
    name="Phi-3",
    architectures=("Phi3ForCausalLM",),
    model_types=("phi3",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
