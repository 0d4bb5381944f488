"""OPT (Meta's): learned positions stored with an offset of 2 (rows 0 and 1 of
``embed_positions`` are never used by a causal model, so ``W_pos`` is rows 2 on), pre-norm
LayerNorm blocks, ReLU, biases everywhere, tied embeddings.

OPT-350m's layout (norms after each sublayer, ``do_layer_norm_before: false``, and the
projections ``project_in``/``project_out`` around a narrower embedding) is refused by name.
"""

from __future__ import annotations

from typing import Any

from interp.config import HookedTransformerConfig
from interp.loading.families.base import Family, Row
from interp.loading.families.config_fields import activation, flag, positive_int
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

POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding's offset

# OPTConfig's defaults (transformers 5), for fields a config.json leaves out.
DEFAULTS = dict(
    vocab_size=50272,
    hidden_size=768,
    num_hidden_layers=12,
    ffn_dim=3072,
    max_position_embeddings=2048,
    do_layer_norm_before=True,
    _remove_final_layer_norm=False,
    word_embed_proj_dim=None,
    num_attention_heads=12,
    activation_function="relu",
    enable_bias=True,
    layer_norm_elementwise_affine=True,
    tie_word_embeddings=True,
)


def config(values: dict[str, Any]) -> dict[str, Any]:
    d_model = positive_int(values, "hidden_size")
    heads = positive_int(values, "num_attention_heads")
    if d_model % heads:
        raise ValueError(
            f"field 'hidden_size' ({d_model}) is not divisible by 'num_attention_heads' ({heads})."
        )
    if not flag(values, "do_layer_norm_before"):
        raise ValueError(
            "field 'do_layer_norm_before' is false (OPT-350m's norms after each sublayer); "
            "interp's OPT blocks normalise before attention and the MLP, so only checkpoints "
            "with do_layer_norm_before: true load."
        )
    projected = values.get("word_embed_proj_dim")
    if projected is not None and projected != d_model:
        raise ValueError(
            f"field 'word_embed_proj_dim' is {projected!r}, not hidden_size ({d_model}): the "
            "checkpoint projects its embeddings in and out (project_in/project_out, as "
            "OPT-350m), which interp's OPT does not have."
        )
    if flag(values, "_remove_final_layer_norm"):
        raise ValueError(
            "field '_remove_final_layer_norm' is true; interp's OPT has a final layer norm."
        )
    if not flag(values, "layer_norm_elementwise_affine"):
        raise ValueError(
            "field 'layer_norm_elementwise_affine' is false; interp's OPT loads layer norms "
            "with weights and biases only."
        )
    flag(values, "enable_bias")  # read by the tensor table; checked here, with the config
    return dict(
        n_layers=positive_int(values, "num_hidden_layers"),
        d_model=d_model,
        n_heads=heads,
        d_head=d_model // heads,
        d_mlp=positive_int(values, "ffn_dim"),
        n_ctx=positive_int(values, "max_position_embeddings"),
        d_vocab=positive_int(values, "vocab_size"),
        act_fn=activation(values, "activation_function"),
        eps=1e-5,  # OPT's nn.LayerNorm default; its config has no eps
        normalization_type="LN",
        positional_embedding_type="standard",
        tie_word_embeddings=flag(values, "tie_word_embeddings"),
    )


def _positions(tensor) -> dict:
    """``embed_positions`` [n_ctx + 2, d_model] without its two offset rows."""
    return {"pos_embed.W_pos": tensor[POSITION_OFFSET:]}


def table(cfg: HookedTransformerConfig, values: dict[str, Any]) -> list[Row]:
    m, h, d, mlp = cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp
    bias = flag(values, "enable_bias")
    tied = cfg.tie_word_embeddings
    prefix = "model.decoder."
    rows = [
        Row(prefix + "embed_tokens.weight", (cfg.d_vocab, m), embedding(cfg, tied)),
        Row(prefix + "embed_positions.weight", (cfg.n_ctx + POSITION_OFFSET, m), _positions),
    ]
    for layer in range(cfg.n_layers):
        hf, ours = f"{prefix}layers.{layer}.", f"blocks.{layer}."
        attn = hf + "self_attn."
        rows += [
            Row(hf + "self_attn_layer_norm.weight", (m,), same(ours + "ln1.w")),
            Row(hf + "self_attn_layer_norm.bias", (m,), same(ours + "ln1.b")),
            Row(attn + "q_proj.weight", (h * d, m), heads_in(ours + "attn.W_Q", h)),
            Row(attn + "k_proj.weight", (h * d, m), heads_in(ours + "attn.W_K", h)),
            Row(attn + "v_proj.weight", (h * d, m), heads_in(ours + "attn.W_V", h)),
            Row(attn + "out_proj.weight", (m, h * d), heads_out(ours + "attn.W_O", h)),
            Row(hf + "final_layer_norm.weight", (m,), same(ours + "ln2.w")),
            Row(hf + "final_layer_norm.bias", (m,), same(ours + "ln2.b")),
            Row(hf + "fc1.weight", (mlp, m), transposed(ours + "mlp.W_in")),
            Row(hf + "fc2.weight", (m, mlp), transposed(ours + "mlp.W_out")),
        ]
        if bias:
            rows += [
                Row(attn + "q_proj.bias", (h * d,), heads_bias(ours + "attn.b_Q", h)),
                Row(attn + "k_proj.bias", (h * d,), heads_bias(ours + "attn.b_K", h)),
                Row(attn + "v_proj.bias", (h * d,), heads_bias(ours + "attn.b_V", h)),
                Row(attn + "out_proj.bias", (m,), same(ours + "attn.b_O")),
                Row(hf + "fc1.bias", (mlp,), same(ours + "mlp.b_in")),
                Row(hf + "fc2.bias", (m,), same(ours + "mlp.b_out")),
            ]
        else:
            rows += [zeros(ours + f"attn.b_{name}", (h, d)) for name in "QKV"]
            rows += [
                zeros(ours + "attn.b_O", (m,)),
                zeros(ours + "mlp.b_in", (mlp,)),
                zeros(ours + "mlp.b_out", (m,)),
            ]
    rows += [
        Row(prefix + "final_layer_norm.weight", (m,), same("ln_final.w")),
        Row(prefix + "final_layer_norm.bias", (m,), same("ln_final.b")),
    ]
    return rows + unembedding_rows(cfg, tied)


OPT = Family(
    name="OPT",
    architectures=("OPTForCausalLM",),
    model_types=("opt",),
    defaults=DEFAULTS,
    config=config,
    table=table,
)
