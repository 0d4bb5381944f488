"""GPT-Neo (EleutherAI's, and the TinyStories models): GPT-2's layout with separate q/k/v
projections without biases, unscaled attention scores (``use_attn_scale=False``; in half
precision computed in float32, ``attn_scores_float32``, as Hugging Face's), layers
alternating global and local attention (a window of ``window_size`` positions, from
``attention_types``), learned positions, LayerNorm, tied embeddings."""

from __future__ import annotations

import re
from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import (
    activation,
    flag,
    positive_int,
    positive_number,
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

# GPTNeoConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = dict(
    vocab_size=50257,
    max_position_embeddings=2048,
    hidden_size=2048,
    num_layers=24,
    attention_types=[[["global", "local"], 12]],
    num_heads=16,
    intermediate_size=None,
    window_size=256,
    activation_function="gelu_new",
    layer_norm_epsilon=1e-5,
    tie_word_embeddings=True,
)


def attention_layers(values: dict[str, Any], n_layers: int) -> list[str]:
    """``attention_types`` ([[["global", "local"], 12]]: the pattern, repeated) as one entry
    a layer, which must be ``n_layers`` of "global" or "local"."""
    pattern = values.get("attention_types")
    layers: list = []
    try:
        for kinds, repeats in pattern:
            layers += list(kinds) * repeats
    except (TypeError, ValueError):
        raise ValueError(
            f"field 'attention_types' is {pattern!r}; it must list [kinds, repeats] pairs, "
            'e.g. [[["global", "local"], 12]].'
        ) from None
    unknown = sorted({str(kind) for kind in layers} - {"global", "local"})
    if unknown or len(layers) != n_layers:
        raise ValueError(
            f"field 'attention_types' gives {len(layers)} layers ({layers}); it must give one "
            f"'global' or 'local' for each of the num_layers={n_layers} layers."
        )
    return layers


def config(values: dict[str, Any]) -> dict[str, Any]:
    n_layers = positive_int(values, "num_layers")
    d_model = positive_int(values, "hidden_size")
    heads = positive_int(values, "num_heads")
    if d_model % heads:
        raise ValueError(
            f"field 'hidden_size' ({d_model}) is not divisible by 'num_heads' ({heads})."
        )
    d_mlp = values.get("intermediate_size")
    d_mlp = 4 * d_model if d_mlp is None else positive_int(values, "intermediate_size")
    layers = attention_layers(values, n_layers)
    if "local" in layers:
        positive_int(values, "window_size")
    return dict(
        n_layers=n_layers,
        d_model=d_model,
        n_heads=heads,
        d_head=d_model // heads,
        d_mlp=d_mlp,
        n_ctx=positive_int(values, "max_position_embeddings"),
        d_vocab=positive_int(values, "vocab_size"),
        act_fn=activation(values, "activation_function"),
        eps=positive_number(values, "layer_norm_epsilon", 1e-5),
        normalization_type="LN",
        positional_embedding_type="standard",
        use_attn_scale=False,
        attn_scores_float32=True,  # as Hugging Face's GPT-Neo, in half precision
        tie_word_embeddings=flag(values, "tie_word_embeddings"),
    ) | window_fields(values.get("window_size"), [kind == "local" for kind in layers])


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    tied = cfg.tie_word_embeddings
    rows = [
        Row("transformer.wte.weight", (cfg.d_vocab, m), embedding(cfg, tied)),
        Row("transformer.wpe.weight", (cfg.n_ctx, m), same("pos_embed.W_pos")),
    ]
    for layer in range(cfg.n_layers):
        hf, ours = f"transformer.h.{layer}.", f"blocks.{layer}."
        attn = hf + "attn.attention."
        rows += [
            Row(hf + "ln_1.weight", (m,), same(ours + "ln1.w")),
            Row(hf + "ln_1.bias", (m,), same(ours + "ln1.b")),
            Row(attn + "q_proj.weight", (h * d, m), heads_in(ours + "attn.W_Q", h)),
            Row(attn + "k_proj.weight", (h * d, m), heads_in(ours + "attn.W_K", h)),
            Row(attn + "v_proj.weight", (h * d, m), heads_in(ours + "attn.W_V", h)),
            *(zeros(ours + f"attn.b_{name}", (h, d)) for name in "QKV"),
            Row(attn + "out_proj.weight", (m, h * d), heads_out(ours + "attn.W_O", h)),
            Row(attn + "out_proj.bias", (m,), same(ours + "attn.b_O")),
            Row(hf + "ln_2.weight", (m,), same(ours + "ln2.w")),
            Row(hf + "ln_2.bias", (m,), same(ours + "ln2.b")),
            Row(hf + "mlp.c_fc.weight", (mlp, m), transposed(ours + "mlp.W_in")),
            Row(hf + "mlp.c_fc.bias", (mlp,), same(ours + "mlp.b_in")),
            Row(hf + "mlp.c_proj.weight", (m, mlp), transposed(ours + "mlp.W_out")),
            Row(hf + "mlp.c_proj.bias", (m,), same(ours + "mlp.b_out")),
        ]
    rows += [
        Row("transformer.ln_f.weight", (m,), same("ln_final.w")),
        Row("transformer.ln_f.bias", (m,), same("ln_final.b")),
    ]
    return rows + unembedding_rows(cfg, tied)


GPT_NEO = Family(
    name="GPT-Neo",
    architectures=("GPTNeoForCausalLM",),
    model_types=("gpt_neo",),
    defaults=DEFAULTS,
    config=config,
    table=table,
    # Buffers older checkpoints saved with the weights: the causal masks.
    ignored=re.compile(r"\.attn\.attention\.(bias|masked_bias)$"),
)
