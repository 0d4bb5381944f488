"""GPT-NeoX (Pythia): partial rotary, parallel attention and MLP, LayerNorm with biases, a
fused QKV laid out per head, untied embeddings, exact GELU. TransformerLens sets
``default_prepend_bos=False`` for it."""

from __future__ import annotations

import re
from typing import Any

import einops
from torch import Tensor

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import (
    activation,
    flag,
    fraction,
    head_dim,
    positive_int,
    positive_number,
    rope_parameters,
)
from interp.loading.families.converters import (
    embedding,
    heads_out,
    same,
    transposed,
    unembedding_rows,
    zeros,
)

# GPTNeoXConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = dict(
    vocab_size=50432,
    hidden_size=6144,
    num_hidden_layers=44,
    num_attention_heads=64,
    intermediate_size=24576,
    hidden_act="gelu",
    max_position_embeddings=2048,
    layer_norm_eps=1e-5,
    tie_word_embeddings=False,
    use_parallel_residual=True,
    attention_bias=True,
    rotary_pct=0.25,
    rotary_emb_base=10000,
)


def config(values: dict[str, Any]) -> dict[str, Any]:
    d_head = head_dim(values)
    rope = rope_parameters(values)
    if "partial_rotary_factor" in rope:
        where = "rope_parameters.partial_rotary_factor"
        rotary_fraction = fraction(rope, "partial_rotary_factor", where)
    else:
        rotary_fraction = fraction(values, "rotary_pct")
    flag(values, "attention_bias")  # read by the tensor table; checked here, with the config
    if "rope_parameters" not in values:  # older config.json: rotary_emb_base
        rope["rope_theta"] = values["rotary_emb_base"]
    if rope["rope_type"] != "default":
        raise ValueError(f"rope type {rope['rope_type']!r} is not supported for GPT-NeoX.")
    return dict(
        n_layers=positive_int(values, "num_hidden_layers"),
        d_model=positive_int(values, "hidden_size"),
        n_heads=positive_int(values, "num_attention_heads"),
        d_head=d_head,
        d_mlp=positive_int(values, "intermediate_size"),
        n_ctx=positive_int(values, "max_position_embeddings"),
        d_vocab=positive_int(values, "vocab_size"),
        act_fn=activation(values, "hidden_act"),
        eps=positive_number(values, "layer_norm_eps", 1e-5),
        normalization_type="LN",
        positional_embedding_type="rotary",
        rotary_dim=int(d_head * rotary_fraction),  # as Hugging Face rounds it
        rotary_base=rope["rope_theta"],
        parallel_attn_mlp=flag(values, "use_parallel_residual"),
        tie_word_embeddings=flag(values, "tie_word_embeddings"),
        default_prepend_bos=False,
    )


def _fused_qkv(ours: str, n_heads: int):
    """The fused ``query_key_value`` [n_heads * 3 * d_head, d_model], laid out per head as
    (head, q/k/v, d_head), as W_Q/W_K/W_V [n_heads, d_model, d_head]."""

    def convert(tensor: Tensor) -> dict[str, Tensor]:
        pattern = "(h qkv d) m -> qkv h m d" if tensor.ndim == 2 else "(h qkv d) -> qkv h d"
        q, k, v = einops.rearrange(tensor, pattern, h=n_heads, qkv=3)
        kind = "W" if tensor.ndim == 2 else "b"
        return {f"{ours}{kind}_Q": q, f"{ours}{kind}_K": k, f"{ours}{kind}_V": v}

    return convert


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    rows = [Row("gpt_neox.embed_in.weight", (cfg.d_vocab, m), embedding(cfg, tied=False))]
    for layer in range(cfg.n_layers):
        hf, ours = f"gpt_neox.layers.{layer}.", f"blocks.{layer}."
        qkv = _fused_qkv(ours + "attn.", h)
        rows += [
            Row(hf + "input_layernorm.weight", (m,), same(ours + "ln1.w")),
            Row(hf + "input_layernorm.bias", (m,), same(ours + "ln1.b")),
            Row(hf + "attention.query_key_value.weight", (3 * h * d, m), qkv),
        ]
        if flag(values, "attention_bias"):
            rows += [
                Row(hf + "attention.query_key_value.bias", (3 * h * d,), qkv),
                Row(hf + "attention.dense.bias", (m,), same(ours + "attn.b_O")),
            ]
        else:
            rows += [zeros(ours + f"attn.b_{name}", (h, d)) for name in "QKV"]
            rows.append(zeros(ours + "attn.b_O", (m,)))
        rows += [
            Row(hf + "attention.dense.weight", (m, h * d), heads_out(ours + "attn.W_O", h)),
            Row(hf + "post_attention_layernorm.weight", (m,), same(ours + "ln2.w")),
            Row(hf + "post_attention_layernorm.bias", (m,), same(ours + "ln2.b")),
            Row(hf + "mlp.dense_h_to_4h.weight", (mlp, m), transposed(ours + "mlp.W_in")),
            Row(hf + "mlp.dense_h_to_4h.bias", (mlp,), same(ours + "mlp.b_in")),
            Row(hf + "mlp.dense_4h_to_h.weight", (m, mlp), transposed(ours + "mlp.W_out")),
            Row(hf + "mlp.dense_4h_to_h.bias", (m,), same(ours + "mlp.b_out")),
        ]
    rows += [
        Row("gpt_neox.final_layer_norm.weight", (m,), same("ln_final.w")),
        Row("gpt_neox.final_layer_norm.bias", (m,), same("ln_final.b")),
    ]
    tied = cfg.tie_word_embeddings
    if tied:  # the embedding row also gives W_U
        rows[0] = Row(rows[0].checkpoint, rows[0].shape, embedding(cfg, tied=True))
    return rows + unembedding_rows(cfg, tied, name="embed_out.weight")


NEOX = Family(
    name="GPT-NeoX",
    architectures=("GPTNeoXForCausalLM",),
    model_types=("gpt_neox",),
    defaults=DEFAULTS,
    config=config,
    table=table,
    # Buffers older checkpoints saved with the weights: causal masks and rotary frequencies.
    ignored=re.compile(r"\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)$"),
)
