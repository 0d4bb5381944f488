"""Hook-name shorthand: TransformerLens's `get_act_name`."""

from __future__ import annotations

import re

_ACT_ALIASES = {
    "attn": "pattern",
    "attn_logits": "attn_scores",
    "key": "k",
    "query": "q",
    "value": "v",
    "mlp_pre": "pre",
    "mlp_post": "post",
}
_SUBLAYER_ALIASES = {
    "a": "attn",
    "m": "mlp",
    "b": "",
    "block": "",
    "blocks": "",
    "attention": "attn",
}
_ATTN_ACTS = {"q", "k", "v", "z", "result", "pattern", "attn_scores"}
_MLP_ACTS = {"pre", "post"}
_LN_ACTS = {"scale", "normalized"}
_COMPACT = re.compile(r"^([a-z_]+?)(\d+)([a-z][a-z0-9]*)?$")  # "resid_pre3", "scale4ln1", "z0a"


def get_act_name(name: str, layer: int | None = None, layer_type: str | None = None) -> str:
    """The full hook name for TransformerLens's shorthand.

    Example:
        >>> get_act_name("resid_pre", 3)
        'blocks.3.hook_resid_pre'
        >>> get_act_name("pattern", 0), get_act_name("scale", 2, "ln1"), get_act_name("scale")
        ('blocks.0.attn.hook_pattern', 'blocks.2.ln1.hook_scale', 'ln_final.hook_scale')
    """
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        return name  # already a full name
    compact = _COMPACT.match(name)
    if compact is not None and layer is None:
        name, layer_text, layer_type = compact.groups()
        layer = int(layer_text)
        layer_type = layer_type or None
    name = _ACT_ALIASES.get(name, name)
    if name in _ATTN_ACTS:
        layer_type = "attn"
    elif name in _MLP_ACTS:
        layer_type = "mlp"
    elif layer_type in _SUBLAYER_ALIASES:
        layer_type = _SUBLAYER_ALIASES[layer_type]
    full_name = f"blocks.{layer}." if layer is not None else ""
    if layer_type:
        full_name += f"{layer_type}."
    full_name += f"hook_{name}"
    if name in _LN_ACTS and layer is None:
        full_name = f"ln_final.{full_name}"
    return full_name
