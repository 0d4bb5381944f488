"""Phi 1, 1.5 and 2 (Microsoft's ``PhiForCausalLM``): a parallel block whose attention and
MLP read one norm (``input_layernorm``, loaded as both ``ln1`` and ``ln2``), partial
rotate-half rotary (``partial_rotary_factor`` of each head), biases on every dense layer
(q/k/v, ``dense``, the MLP and the unembedding), LayerNorm, a GELU MLP, untied embeddings."""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import (
    activation,
    flag,
    fraction,
    head_dim,
    kv_heads,
    positive_int,
    positive_number,
    rope_fields,
    rope_parameters,
)
from interp.loading.families.converters import (
    embedding,
    heads_bias,
    heads_in,
    heads_out,
    same,
    shared_norm,
    transposed,
    unembedding_rows,
)

# PhiConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = dict(
    vocab_size=51200,
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=24,
    num_attention_heads=32,
    num_key_value_heads=None,
    hidden_act="gelu_new",
    max_position_embeddings=2048,
    layer_norm_eps=1e-5,
    tie_word_embeddings=False,
    rope_theta=10000.0,
    qk_layernorm=False,
)


def config(values: dict[str, Any]) -> dict[str, Any]:
    if flag(values, "qk_layernorm"):
        raise ValueError(
            "field 'qk_layernorm' is true: Phi's per-head LayerNorms on queries and keys are "
            "not in interp's Phi (its QK norms are RMS norms); only qk_layernorm: false loads."
        )
    d_head = head_dim(values)
    rope = rope_parameters(values)
    if "partial_rotary_factor" in rope:
        factor = fraction(rope, "partial_rotary_factor", "rope_parameters.partial_rotary_factor")
    elif "partial_rotary_factor" in values:
        factor = fraction(values, "partial_rotary_factor")
    else:
        factor = 0.5  # PhiConfig's default
    n_ctx = positive_int(values, "max_position_embeddings")
    return dict(
        n_layers=positive_int(values, "num_hidden_layers"),
        d_model=positive_int(values, "hidden_size"),
        n_heads=positive_int(values, "num_attention_heads"),
        d_head=d_head,
        n_key_value_heads=kv_heads(values),
        d_mlp=positive_int(values, "intermediate_size"),
        n_ctx=n_ctx,
        d_vocab=positive_int(values, "vocab_size"),
        act_fn=activation(values, "hidden_act"),
        eps=positive_number(values, "layer_norm_eps", 1e-5),
        normalization_type="LN",
        positional_embedding_type="rotary",
        rotary_dim=int(d_head * factor),  # as Hugging Face rounds it
        rotary_adjacent_pairs=False,
        parallel_attn_mlp=True,
        tie_word_embeddings=flag(values, "tie_word_embeddings"),
    ) | rope_fields(values, n_ctx)


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    n_kv = cfg.n_key_value_heads or h
    kv = "_" if n_kv != h else ""
    tied = cfg.tie_word_embeddings
    rows = [Row("model.embed_tokens.weight", (cfg.d_vocab, m), embedding(cfg, tied))]
    for layer in range(cfg.n_layers):
        hf, ours = f"model.layers.{layer}.", f"blocks.{layer}."
        attn, kv_attn = hf + "self_attn.", f"{ours}attn.{kv}"
        rows += [
            Row(hf + "input_layernorm.weight", (m,), shared_norm(ours, "w")),
            Row(hf + "input_layernorm.bias", (m,), shared_norm(ours, "b")),
            Row(attn + "q_proj.weight", (h * d, m), heads_in(ours + "attn.W_Q", h)),
            Row(attn + "q_proj.bias", (h * d,), heads_bias(ours + "attn.b_Q", h)),
            Row(attn + "k_proj.weight", (n_kv * d, m), heads_in(kv_attn + "W_K", n_kv)),
            Row(attn + "k_proj.bias", (n_kv * d,), heads_bias(kv_attn + "b_K", n_kv)),
            Row(attn + "v_proj.weight", (n_kv * d, m), heads_in(kv_attn + "W_V", n_kv)),
            Row(attn + "v_proj.bias", (n_kv * d,), heads_bias(kv_attn + "b_V", n_kv)),
            Row(attn + "dense.weight", (m, h * d), heads_out(ours + "attn.W_O", h)),
            Row(attn + "dense.bias", (m,), same(ours + "attn.b_O")),
            Row(hf + "mlp.fc1.weight", (mlp, m), transposed(ours + "mlp.W_in")),
            Row(hf + "mlp.fc1.bias", (mlp,), same(ours + "mlp.b_in")),
            Row(hf + "mlp.fc2.weight", (m, mlp), transposed(ours + "mlp.W_out")),
            Row(hf + "mlp.fc2.bias", (m,), same(ours + "mlp.b_out")),
        ]
    rows += [
        Row("model.final_layernorm.weight", (m,), same("ln_final.w")),
        Row("model.final_layernorm.bias", (m,), same("ln_final.b")),
    ]
    return rows + unembedding_rows(cfg, tied, bias_name="lm_head.bias")


PHI = Family(
    name="Phi",
    architectures=("PhiForCausalLM",),
    model_types=("phi",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
