"""TransformerLens's own config.json format, the toy models' (``NeelNanda/...``: attn-only,
gelu and SoLU models): recognising it, and TL 2.18's config dict of it
(``convert_neel_model_config``'s fields).

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> config = {"n_layers": 2, "d_model": 128, "d_mlp": 512, "d_head": 64, "n_heads": 1,
    ...           "n_ctx": 64, "d_vocab": 512, "act_fn": "gelu_new", "attn_only": True,
    ...           "normalization": None}   # a toy model's (attn-only-2l's shape)
    >>> _ = (folder / "config.json").write_text(json.dumps(config))
    >>> from interp.loading.checkpoint import read_config_json
    >>> is_transformer_lens_config(read_config_json(folder / "config.json"))
    True
    >>> is_transformer_lens_config({"model_type": "gpt2", "n_embd": 768})   # Hugging Face's
    False
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
