"""GPT-J (EleutherAI's GPT-J-6B): a parallel block whose attention and MLP read one norm
(``ln_1``, loaded as both ``ln1`` and ``ln2``, as TransformerLens does), rotary on the first
``rotary_dim`` dimensions of each head with adjacent pairs (GPT-J's ``rotate_every_two``),
q/k/v/out projections without biases, LayerNorm, an untied unembedding with a bias."""

from __future__ import annotations

import re
from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import activation, flag, positive_int, positive_number
from interp.loading.families.converters import (
    embedding,
    heads_in,
    heads_out,
    same,
    shared_norm,
    transposed,
    unembedding_rows,
    zeros,
)

# GPTJConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = dict(
    vocab_size=50400,
    n_positions=2048,
    n_embd=4096,
    n_layer=28,
    n_head=16,
    rotary_dim=64,
    n_inner=None,
    activation_function="gelu_new",
    layer_norm_epsilon=1e-5,
    tie_word_embeddings=False,
)


def config(values: dict[str, Any]) -> dict[str, Any]:
    d_model, heads = positive_int(values, "n_embd"), positive_int(values, "n_head")
    if d_model % heads:
        raise ValueError(f"field 'n_embd' ({d_model}) is not divisible by 'n_head' ({heads}).")
    d_head = d_model // heads
    rotary_dim = values.get("rotary_dim")
    rotary_dim = d_head if rotary_dim is None else positive_int(values, "rotary_dim")
    if rotary_dim % 2 or rotary_dim > d_head:
        raise ValueError(
            f"field 'rotary_dim' is {rotary_dim}; it must be even and at most the head size "
            f"n_embd / n_head = {d_head}."
        )
    d_mlp = values.get("n_inner")
    return dict(
        n_layers=positive_int(values, "n_layer"),
        d_model=d_model,
        n_heads=heads,
        d_head=d_head,
        d_mlp=4 * d_model if d_mlp is None else positive_int(values, "n_inner"),
        n_ctx=positive_int(values, "n_positions"),
        d_vocab=positive_int(values, "vocab_size"),
        act_fn=activation(values, "activation_function"),
        eps=positive_number(values, "layer_norm_epsilon", 1e-5),
        normalization_type="LN",
        positional_embedding_type="rotary",
        rotary_dim=rotary_dim,
        rotary_adjacent_pairs=True,
        parallel_attn_mlp=True,
        tie_word_embeddings=flag(values, "tie_word_embeddings"),
    )


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    tied = cfg.tie_word_embeddings
    rows = [Row("transformer.wte.weight", (cfg.d_vocab, m), embedding(cfg, tied))]
    for layer in range(cfg.n_layers):
        hf, ours = f"transformer.h.{layer}.", f"blocks.{layer}."
        rows += [
            Row(hf + "ln_1.weight", (m,), shared_norm(ours, "w")),
            Row(hf + "ln_1.bias", (m,), shared_norm(ours, "b")),
            Row(hf + "attn.q_proj.weight", (h * d, m), heads_in(ours + "attn.W_Q", h)),
            Row(hf + "attn.k_proj.weight", (h * d, m), heads_in(ours + "attn.W_K", h)),
            Row(hf + "attn.v_proj.weight", (h * d, m), heads_in(ours + "attn.W_V", h)),
            *(zeros(ours + f"attn.b_{name}", (h, d)) for name in "QKV"),
            Row(hf + "attn.out_proj.weight", (m, h * d), heads_out(ours + "attn.W_O", h)),
            zeros(ours + "attn.b_O", (m,)),
            Row(hf + "mlp.fc_in.weight", (mlp, m), transposed(ours + "mlp.W_in")),
            Row(hf + "mlp.fc_in.bias", (mlp,), same(ours + "mlp.b_in")),
            Row(hf + "mlp.fc_out.weight", (m, mlp), transposed(ours + "mlp.W_out")),
            Row(hf + "mlp.fc_out.bias", (m,), same(ours + "mlp.b_out")),
        ]
    rows += [
        Row("transformer.ln_f.weight", (m,), same("ln_final.w")),
        Row("transformer.ln_f.bias", (m,), same("ln_final.b")),
    ]
    return rows + unembedding_rows(cfg, tied, bias_name="lm_head.bias")


GPTJ = Family(
    name="GPT-J",
    architectures=("GPTJForCausalLM",),
    model_types=("gptj",),
    defaults=DEFAULTS,
    config=config,
    table=table,
    # Buffers older checkpoints saved with the weights: causal masks and rotary tables.
    ignored=re.compile(r"\.attn\.(bias|masked_bias|embed_positions)$"),
)
