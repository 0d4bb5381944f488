"""What ``add_sae`` checks before it changes the model: where an SAE's hook is, and how wide.

SAELens skips (with a logged warning) an SAE whose hook the model lacks; a width or device
that does not fit is an error here before anything changes (SAELens fails in the forward pass).
"""

from __future__ import annotations

import difflib
import re

from interp.hooks import HookedRootModule

# SAELens's HookedSAETransformer adds ``mlp.hook_in``; a model without it has the block's
# opt-in ``hook_mlp_in`` (the same activation).
MLP_HOOK_IN = re.compile(r"^blocks\.(\d+)\.mlp\.hook_in$")


def closest_hooks(model: HookedRootModule, name: str) -> list[str]:
    """Up to three hook names of ``model`` closest to ``name``."""
    return difflib.get_close_matches(name, list(model.hook_dict), n=3, cutoff=0.6)


def hook_width(model: HookedRootModule, name: str) -> int | None:
    """The last-axis width an SAE reads at hook ``name`` (heads flattened for ``hook_z``);
    None where the hook is not one whose width the config gives."""
    cfg = getattr(model, "cfg", None)
    if cfg is None:
        return None
    last = name.rsplit(".", 1)[-1]
    if last in ("hook_z", "hook_q", "hook_rot_q"):
        return cfg.n_heads * cfg.d_head
    if last in ("hook_k", "hook_v", "hook_rot_k"):
        return (getattr(cfg, "n_key_value_heads", None) or cfg.n_heads) * cfg.d_head
    if last in ("hook_pre", "hook_post", "hook_pre_linear") and ".mlp." in name:
        return cfg.d_mlp
    d_model_hooks = (
        "hook_embed",
        "hook_pos_embed",
        "hook_resid_pre",
        "hook_resid_mid",
        "hook_resid_post",
        "hook_attn_out",
        "hook_mlp_out",
        "hook_mlp_in",
        "hook_attn_in",
        "hook_normalized",
    )
    return cfg.d_model if last in d_model_hooks else None
