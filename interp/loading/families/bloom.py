"""BLOOM (BigScience's ``BloomForCausalLM``): ALiBi instead of position embeddings (each
head adds ``slope * key position`` to its scores, ``positional_embedding_type="alibi"``),
a layer norm right after the embedding (``post_embedding_ln``: ``embed.ln``), a fused
``query_key_value`` laid out per head, LayerNorm blocks with biases, a 4x GELU MLP (its tanh
approximation, TransformerLens's ``gelu_fast``), tied embeddings. TransformerLens sets
``default_prepend_bos=False`` for it."""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import flag, positive_int, positive_number
from interp.loading.families.converters import (
    embedding,
    heads_out,
    same,
    transposed,
    unembedding_rows,
)
from interp.loading.families.neox import _fused_qkv

# BloomConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = dict(
    vocab_size=250880,
    hidden_size=64,
    n_layer=2,
    n_head=8,
    layer_norm_epsilon=1e-5,
    apply_residual_connection_post_layernorm=False,
    tie_word_embeddings=True,
)
N_CTX = 2048  # BLOOM has no position table; TransformerLens sets its context to 2048


def config(values: dict[str, Any]) -> dict[str, Any]:
    d_model, heads = positive_int(values, "hidden_size"), positive_int(values, "n_head")
    if d_model % heads:
        raise ValueError(f"field 'hidden_size' ({d_model}) is not divisible by 'n_head' ({heads}).")
    if flag(values, "apply_residual_connection_post_layernorm"):
        raise ValueError(
            "field 'apply_residual_connection_post_layernorm' is true: the residual stream "
            "would carry each block's normalised input; interp's BLOOM loads only false."
        )
    return dict(
        n_layers=positive_int(values, "n_layer"),
        d_model=d_model,
        n_heads=heads,
        d_head=d_model // heads,
        d_mlp=4 * d_model,
        n_ctx=N_CTX,
        d_vocab=positive_int(values, "vocab_size"),
        act_fn="gelu_fast",
        eps=positive_number(values, "layer_norm_epsilon", 1e-5),
        normalization_type="LN",
        positional_embedding_type="alibi",
        post_embedding_ln=True,
        attn_scores_float32=True,  # half-precision scores rounded once, as its baddbmm
        tie_word_embeddings=flag(values, "tie_word_embeddings"),
        default_prepend_bos=False,
    )


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    tied = cfg.tie_word_embeddings
    rows = [
        Row("transformer.word_embeddings.weight", (cfg.d_vocab, m), embedding(cfg, tied)),
        Row("transformer.word_embeddings_layernorm.weight", (m,), same("embed.ln.w")),
        Row("transformer.word_embeddings_layernorm.bias", (m,), same("embed.ln.b")),
    ]
    for layer in range(cfg.n_layers):
        hf, ours = f"transformer.h.{layer}.", f"blocks.{layer}."
        qkv = _fused_qkv(ours + "attn.", h)
        attn = hf + "self_attention."
        rows += [
            Row(hf + "input_layernorm.weight", (m,), same(ours + "ln1.w")),
            Row(hf + "input_layernorm.bias", (m,), same(ours + "ln1.b")),
            Row(attn + "query_key_value.weight", (3 * h * d, m), qkv),
            Row(attn + "query_key_value.bias", (3 * h * d,), qkv),
            Row(attn + "dense.weight", (m, h * d), heads_out(ours + "attn.W_O", h)),
            Row(attn + "dense.bias", (m,), same(ours + "attn.b_O")),
            Row(hf + "post_attention_layernorm.weight", (m,), same(ours + "ln2.w")),
            Row(hf + "post_attention_layernorm.bias", (m,), same(ours + "ln2.b")),
            Row(hf + "mlp.dense_h_to_4h.weight", (mlp, m), transposed(ours + "mlp.W_in")),
            Row(hf + "mlp.dense_h_to_4h.bias", (mlp,), same(ours + "mlp.b_in")),
            Row(hf + "mlp.dense_4h_to_h.weight", (m, mlp), transposed(ours + "mlp.W_out")),
            Row(hf + "mlp.dense_4h_to_h.bias", (m,), same(ours + "mlp.b_out")),
        ]
    rows += [
        Row("transformer.ln_f.weight", (m,), same("ln_final.w")),
        Row("transformer.ln_f.bias", (m,), same("ln_final.b")),
    ]
    return rows + unembedding_rows(cfg, tied)


BLOOM = Family(
    name="BLOOM",
    architectures=("BloomForCausalLM",),
    model_types=("bloom",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
