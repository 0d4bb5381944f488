"""OLMo 2 (AI2's ``Olmo2ForCausalLM``): Llama's layout with its norms moved after the
sublayers (``post_attention_layernorm`` on the attention output, ``post_feedforward_layernorm``
on the MLP's, none before them: ``use_post_norms_only``) and RMS norms on the queries and
keys over all heads of a position at once (``q_norm`` over n_heads * head_dim,
``qk_norm_across_heads``), applied before the rotary embedding. Its RMS norms multiply by
their weight in float32 (``rmsnorm_weight_in_float32``) and it rotates queries and keys in
float32 (``rotary_in_float32``), as Hugging Face's, so bf16 models round as its do."""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import flag
from interp.loading.families.converters import (
    embedding,
    heads_bias,
    heads_in,
    heads_out,
    same,
    transposed,
    unembedding_rows,
    zeros,
)
from interp.loading.families.llama import LLAMA_DEFAULTS, llama_like_config

# Olmo2Config's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = LLAMA_DEFAULTS | dict(
    vocab_size=50304,
    max_position_embeddings=2048,
    rms_norm_eps=1e-5,
)


def config(values: dict[str, Any]) -> dict[str, Any]:
    return llama_like_config(values) | dict(
        use_post_norms_only=True,
        use_qk_norm=True,
        qk_norm_across_heads=True,
        rmsnorm_weight_in_float32=True,  # Olmo2RMSNorm's rounding
        rotary_in_float32=True,  # Olmo 2's rotation, in float32
    )


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    n_kv = cfg.n_key_value_heads or h
    kv = "_" if n_kv != h else ""
    bias = flag(values, "attention_bias")
    tied = cfg.tie_word_embeddings
    rows = [Row("model.embed_tokens.weight", (cfg.d_vocab, m), embedding(cfg, tied))]
    for layer in range(cfg.n_layers):
        hf, ours = f"model.layers.{layer}.", f"blocks.{layer}."
        attn, kv_attn = hf + "self_attn.", f"{ours}attn.{kv}"
        rows += [
            Row(attn + "q_proj.weight", (h * d, m), heads_in(ours + "attn.W_Q", h)),
            Row(attn + "k_proj.weight", (n_kv * d, m), heads_in(kv_attn + "W_K", n_kv)),
            Row(attn + "v_proj.weight", (n_kv * d, m), heads_in(kv_attn + "W_V", n_kv)),
            Row(attn + "o_proj.weight", (m, h * d), heads_out(ours + "attn.W_O", h)),
            Row(attn + "q_norm.weight", (h * d,), same(ours + "attn.q_norm.w")),
            Row(attn + "k_norm.weight", (n_kv * d,), same(ours + "attn.k_norm.w")),
        ]
        if bias:
            rows += [
                Row(attn + "q_proj.bias", (h * d,), heads_bias(ours + "attn.b_Q", h)),
                Row(attn + "k_proj.bias", (n_kv * d,), heads_bias(kv_attn + "b_K", n_kv)),
                Row(attn + "v_proj.bias", (n_kv * d,), heads_bias(kv_attn + "b_V", n_kv)),
                Row(attn + "o_proj.bias", (m,), same(ours + "attn.b_O")),
            ]
        else:
            rows += [
                zeros(ours + "attn.b_Q", (h, d)),
                zeros(kv_attn + "b_K", (n_kv, d)),
                zeros(kv_attn + "b_V", (n_kv, d)),
                zeros(ours + "attn.b_O", (m,)),
            ]
        rows += [
            Row(hf + "post_attention_layernorm.weight", (m,), same(ours + "ln1_post.w")),
            Row(hf + "post_feedforward_layernorm.weight", (m,), same(ours + "ln2_post.w")),
            Row(hf + "mlp.gate_proj.weight", (mlp, m), transposed(ours + "mlp.W_gate")),
            Row(hf + "mlp.up_proj.weight", (mlp, m), transposed(ours + "mlp.W_in")),
            Row(hf + "mlp.down_proj.weight", (m, mlp), transposed(ours + "mlp.W_out")),
            zeros(ours + "mlp.b_in", (mlp,)),
            zeros(ours + "mlp.b_out", (m,)),
        ]
    rows.append(Row("model.norm.weight", (m,), same("ln_final.w")))
    return rows + unembedding_rows(cfg, tied)


OLMO2 = Family(
    name="OLMo 2",
    architectures=("Olmo2ForCausalLM",),
    model_types=("olmo2",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
