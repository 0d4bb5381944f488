"""Llama 3.x and Mistral: RMSNorm, rotate-half rotary (Llama 3's NTK-by-parts or linear
scaling), grouped-query attention, a SwiGLU MLP, no biases; Mistral adds a sliding window.

``llama_like_table`` is the tensor table of every family built on Llama's layout (Qwen 2/3
and Gemma 2/3 reuse it with their extras: q/k/v biases, QK norms, sandwich norms).
"""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import (
    activation,
    flag,
    head_dim,
    kv_heads,
    positive_int,
    positive_number,
    rope_fields,
    window_fields,
)
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

# LlamaConfig's defaults (transformers 5), for fields a config.json leaves out.
LLAMA_DEFAULTS = dict(
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=11008,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=None,
    hidden_act="silu",
    max_position_embeddings=2048,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    rope_theta=10000.0,
    attention_bias=False,
    mlp_bias=False,
)
MISTRAL_DEFAULTS = LLAMA_DEFAULTS | dict(
    intermediate_size=14336,
    num_key_value_heads=8,
    max_position_embeddings=4096 * 32,
    sliding_window=4096,
)


def llama_like_config(values: dict[str, Any]) -> dict[str, Any]:
    """The fields every Llama-like family shares: shapes, RMS norms, gated MLP, rotary."""
    flag(values, "attention_bias")  # read by the tensor table; checked here, with the config
    if flag(values, "mlp_bias"):
        raise ValueError(
            "field 'mlp_bias' is true: interp's gated MLP has no bias on its gate; only "
            "checkpoints without MLP biases load."
        )
    n_ctx = positive_int(values, "max_position_embeddings")
    return dict(
        n_layers=positive_int(values, "num_hidden_layers"),
        d_model=positive_int(values, "hidden_size"),
        n_heads=positive_int(values, "num_attention_heads"),
        d_head=head_dim(values),
        n_key_value_heads=kv_heads(values),
        d_mlp=positive_int(values, "intermediate_size"),
        n_ctx=n_ctx,
        d_vocab=positive_int(values, "vocab_size"),
        act_fn=activation(values, "hidden_act"),
        eps=positive_number(values, "rms_norm_eps", 1e-6),
        normalization_type="RMS",
        gated_mlp=True,
        positional_embedding_type="rotary",
        rotary_adjacent_pairs=False,
        tie_word_embeddings=flag(values, "tie_word_embeddings"),
    ) | rope_fields(values, n_ctx)


def llama_config(values: dict[str, Any]) -> dict[str, Any]:
    return llama_like_config(values)


def mistral_config(values: dict[str, Any]) -> dict[str, Any]:
    n_layers = positive_int(values, "num_hidden_layers")
    window = values.get("sliding_window")
    return llama_like_config(values) | window_fields(window, [True] * n_layers)


def llama_like_table(
    cfg: HookedTransformerConfig,
    qkv_bias: bool = False,
    o_bias: bool = False,
    gemma: bool = False,
) -> list[Row]:
    """The tensors of a ``*ForCausalLM`` with Llama's layout (``model.layers.N.self_attn...``).

    ``qkv_bias``/``o_bias``: the checkpoint has those biases (else ours are zeros). QK norms
    and sandwich norms follow ``cfg``. ``gemma``: the embedding is scaled by ``sqrt(d_model)``,
    folded into ``W_E``; its norm weights load as they are (``cfg.rmsnorm_uses_offset`` makes
    the norms scale by ``1 + w``).
    """
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    n_kv = cfg.n_key_value_heads or h
    grouped = "_" if n_kv != h else ""  # GQA keeps the n_kv heads as _W_K/_W_V
    tied = cfg.tie_word_embeddings
    rows = [Row("model.embed_tokens.weight", (cfg.d_vocab, m), embedding(cfg, tied, scale=gemma))]
    for layer in range(cfg.n_layers):
        hf, ours = f"model.layers.{layer}.", f"blocks.{layer}."
        attn, kv_attn = ours + "attn.", f"{ours}attn.{grouped}"
        rows += [
            Row(hf + "input_layernorm.weight", (m,), same(ours + "ln1.w")),
            Row(hf + "self_attn.q_proj.weight", (h * d, m), heads_in(attn + "W_Q", h)),
            Row(hf + "self_attn.k_proj.weight", (n_kv * d, m), heads_in(kv_attn + "W_K", n_kv)),
            Row(hf + "self_attn.v_proj.weight", (n_kv * d, m), heads_in(kv_attn + "W_V", n_kv)),
            Row(hf + "self_attn.o_proj.weight", (m, h * d), heads_out(attn + "W_O", h)),
        ]
        if qkv_bias:
            rows += [
                Row(hf + "self_attn.q_proj.bias", (h * d,), heads_bias(attn + "b_Q", h)),
                Row(hf + "self_attn.k_proj.bias", (n_kv * d,), heads_bias(kv_attn + "b_K", n_kv)),
                Row(hf + "self_attn.v_proj.bias", (n_kv * d,), heads_bias(kv_attn + "b_V", n_kv)),
            ]
        else:
            rows += [
                zeros(attn + "b_Q", (h, d)),
                zeros(kv_attn + "b_K", (n_kv, d)),
                zeros(kv_attn + "b_V", (n_kv, d)),
            ]
        if o_bias:
            rows.append(Row(hf + "self_attn.o_proj.bias", (m,), same(attn + "b_O")))
        else:
            rows.append(zeros(attn + "b_O", (m,)))
        if cfg.use_qk_norm:
            rows += [
                Row(hf + "self_attn.q_norm.weight", (d,), same(attn + "q_norm.w")),
                Row(hf + "self_attn.k_norm.weight", (d,), same(attn + "k_norm.w")),
            ]
        if cfg.use_normalization_before_and_after:  # Gemma's names for its four norms
            rows += [
                Row(hf + "post_attention_layernorm.weight", (m,), same(ours + "ln1_post.w")),
                Row(hf + "pre_feedforward_layernorm.weight", (m,), same(ours + "ln2.w")),
                Row(hf + "post_feedforward_layernorm.weight", (m,), same(ours + "ln2_post.w")),
            ]
        else:
            rows.append(Row(hf + "post_attention_layernorm.weight", (m,), same(ours + "ln2.w")))
        rows += [
            Row(hf + "mlp.gate_proj.weight", (mlp, m), transposed(ours + "mlp.W_gate")),
            Row(hf + "mlp.up_proj.weight", (mlp, m), transposed(ours + "mlp.W_in")),
            Row(hf + "mlp.down_proj.weight", (m, mlp), transposed(ours + "mlp.W_out")),
            zeros(ours + "mlp.b_in", (mlp,)),
            zeros(ours + "mlp.b_out", (m,)),
        ]
    rows.append(Row("model.norm.weight", (m,), same("ln_final.w")))
    return rows + unembedding_rows(cfg, tied)


def llama_table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    bias = flag(values, "attention_bias")
    return llama_like_table(cfg, qkv_bias=bias, o_bias=bias)


LLAMA = Family(
    name="Llama",
    architectures=("LlamaForCausalLM",),
    model_types=("llama",),
    defaults=LLAMA_DEFAULTS,
    config=llama_config,
    table=llama_table,
)
MISTRAL = Family(
    name="Mistral",
    architectures=("MistralForCausalLM",),
    model_types=("mistral",),
    defaults=MISTRAL_DEFAULTS,
    config=mistral_config,
    table=llama_table,
)
