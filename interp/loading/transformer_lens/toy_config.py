"""TransformerLens's own config.json format, the toy models' (``NeelNanda/...``: attn-only,
gelu and SoLU models): recognising it, and TL 2.18's config dict of it
(``convert_neel_model_config``'s fields).

Example:
    >>> is_transformer_lens_config(read_config_json(folder / "config.json"))
    True
"""

from __future__ import annotations

from typing import Any

from interp.loading.checkpoint import printable


def is_transformer_lens_config(values: dict[str, Any]) -> bool:
    """Whether config.json is TransformerLens's own format (the toy models'), not HF's."""
    return "model_type" not in values and {"d_model", "n_layers", "act_fn"} <= set(values)


def neel_config_dict(values: dict[str, Any], official_name: str) -> dict[str, Any]:
    """TL's config dict of a toy model's config.json values (TL's format); a missing field
    is a ValueError naming it."""
    architecture = values.get(
        "architecture", "neel" if "_old" not in official_name else "neel-solu-old"
    )
    normalization = "normalization" if "normalization" in values else "normalization_type"
    try:
        return dict(
            d_model=values["d_model"], n_layers=values["n_layers"], d_mlp=values["d_mlp"],
            d_head=values["d_head"], n_heads=values["n_heads"], n_ctx=values["n_ctx"],
            d_vocab=values["d_vocab"], tokenizer_name=values.get("tokenizer_name"),
            act_fn=values["act_fn"], attn_only=values["attn_only"],
            final_rms=values.get("final_rms", False), original_architecture=architecture,
            normalization_type=values[normalization],
            positional_embedding_type=(
                "shortformer" if values.get("shortformer_pos") else "standard"
            ),
        )  # fmt: skip
    except KeyError as error:
        raise ValueError(
            f"The config.json of {printable(official_name)} has no field {error}; a "
            "TransformerLens toy model's config names d_model, n_layers, d_mlp, d_head, "
            "n_heads, n_ctx, d_vocab, act_fn, attn_only and normalization."
        ) from None
