"""Hugging Face module paths (how sparsify and Gemma Scope 2 name their sites) to our hook
names: ``model.layers.3.mlp`` -> ``blocks.3.hook_mlp_out``.

Example:
    >>> hf_module_to_hook("layers.3")
    'blocks.3.hook_resid_post'
"""

from __future__ import annotations

import re
from pathlib import Path

from interp.sae.formats.files import SAEFormatError


def hf_module_to_hook(path: str, side: str = "output") -> str | None:
    """Our hook name for a Hugging Face module path (``model.layers.3.mlp`` ->
    ``blocks.3.hook_mlp_out``); ``side="input"`` names the hook holding the module's input.
    None when the path is not one of the known places."""
    path = re.sub(r"^(model\.|transformer\.|gpt_neox\.|model\.language_model\.)+", "", path)
    if path.endswith((".output", ".input")):
        path, _, side = path.rpartition(".")
    if path in ("embed_tokens", "wte", "embed_in"):
        return "hook_embed"
    match = re.fullmatch(r"(?:layers|h)[._](\d+)(?:\.(.+))?", path)
    if match is None:
        return None
    layer, rest = match.group(1), match.group(2) or ""
    table_out = {
        "": "hook_resid_post",
        "mlp": "hook_mlp_out",
        "self_attn": "hook_attn_out",
        "attn": "hook_attn_out",
        "attention": "hook_attn_out",
        "post_feedforward_layernorm": "hook_mlp_out",
        "pre_feedforward_layernorm": "hook_mlp_in",
    }
    table_in = {
        "": "hook_resid_pre",
        "mlp": "hook_mlp_in",
        "self_attn.o_proj": "attn.hook_z",
        "attn.c_proj": "attn.hook_z",
        "attention.dense": "attn.hook_z",
    }
    hook = (table_in if side == "input" else table_out).get(rest)
    return f"blocks.{layer}.{hook}" if hook else None


def hook_from_hf(module: str, side: str, where: Path) -> str:
    hook = hf_module_to_hook(module, side)
    if hook is None:
        raise SAEFormatError(
            f"{where}: cannot translate the Hugging Face module path {module!r} ({side}) to a "
            "hook name; pass hook_name= (and hook_name_out= for a transcoder)."
        )
    return hook
