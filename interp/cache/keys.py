"""Cache keys: TransformerLens's shorthand (``"pattern"``, ``("resid_pre", -1)``,
``("scale", 2, "ln1")``) resolved to full hook names, and the error for a key a cache lacks.

Example:
    >>> resolve_key(("resid_pre", -1), model)   # attn-only-2l: 2 layers
    'blocks.1.hook_resid_pre'
"""

from __future__ import annotations

import difflib
from typing import Any

from torch import Tensor

from interp.utils import get_act_name
from interp.utils.slice import to_python_int


def resolve_key(key: str | tuple, model: Any) -> str:
    """The full hook name for a key: a name, or ``(name, layer[, layer_type])``; a layer
    counts from the end when negative and must exist in ``model`` (when there is one)."""
    if isinstance(key, str):
        return get_act_name(key)
    if not isinstance(key, tuple) or not 1 <= len(key) <= 3:
        raise KeyError(f"Cache keys are a hook name or (name, layer[, layer_type]); got {key!r}.")
    name, layer, *layer_type = (*key, None)[: max(len(key), 2)]
    if to_python_int(layer) is not None and model is not None:
        layer, n_layers = to_python_int(layer), model.cfg.n_layers
        if not -n_layers <= layer < n_layers:
            raise KeyError(
                f"Layer {layer} in cache key {key!r} is out of range: this model has "
                f"n_layers={n_layers}, so pass 0..{n_layers - 1} (or -{n_layers}..-1 to "
                "count from the end)."
            )
        layer %= n_layers
    return get_act_name(name, layer, *layer_type)


def missing_key_message(
    key: str | tuple, name: str, model: Any, cache_dict: dict[str, Tensor]
) -> str:
    """Why hook ``name`` (from ``key``) is not in ``cache_dict``: ``model`` has no such hook
    (with the closest names), or it has one that the run did not keep."""
    hook_dict = getattr(model, "hook_dict", None)
    hook_name = name.removesuffix("_grad")
    shown = repr(key) if key == name else f"{key!r} (hook {name!r})"
    if hook_dict is not None and hook_name not in hook_dict:
        close = difflib.get_close_matches(hook_name, list(hook_dict), n=5, cutoff=0.5)
        hint = f" Closest valid names: {close}." if close else ""
        if hook_name.endswith("attn.hook_result"):
            hint += " Call cache.compute_head_results() (or model.set_use_attn_result(True))."
        return f"This model has no hook point named {shown}.{hint}"
    what = "gradient of " if name.endswith("_grad") else ""
    fix = "pass incl_bwd=True and " if what else ""
    return (
        f"The {what}{shown} is not in this cache: it holds {len(cache_dict)} "
        f"activations, e.g. {list(cache_dict)[:5]}; {fix}widen run_with_cache's "
        "names_filter to keep it."
    )
