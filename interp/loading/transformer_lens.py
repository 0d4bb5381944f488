"""TransformerLens 2.x ``HookedTransformer`` state dicts: the same names and shapes as ours.

Such a state dict loads with ``model.load_state_dict`` as it is; this loader also accepts a
file saved with ``torch.save``, drops the causal-mask buffers TransformerLens stores with the
weights (``attn.mask``, ``attn.IGNORE``), checks names and shapes, and builds the model
without a second copy of the weights.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import CheckpointError, build_model, load_torch_file, resolve_dtype

_TL_BUFFER = re.compile(r"^blocks\.\d+\.attn\.(mask|IGNORE)$")


def load_transformer_lens_state_dict(
    state_dict: dict[str, Tensor] | str | Path,
    cfg: HookedTransformerConfig | dict[str, Any],
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    tokenizer: Any = None,
) -> Any:
    """A HookedTransformer of shape ``cfg`` with a TransformerLens state dict (or its file).

    A state dict saved after ``fold_ln`` has no layer-norm weights: give ``cfg``
    ``normalization_type="LNPre"``.

    Example:
        >>> model = load_transformer_lens_state_dict("tl_gpt2.pt", cfg, device="cuda")
    """
    cfg = HookedTransformerConfig.unwrap(cfg)
    name = "The TransformerLens state dict"
    if not isinstance(state_dict, dict):
        name, state_dict = str(state_dict), load_torch_file(state_dict)
        if not isinstance(state_dict, dict):
            raise CheckpointError(f"{name} holds a {type(state_dict).__name__}, not a state dict.")
    tensors = {key: value for key, value in state_dict.items() if not _TL_BUFFER.match(key)}
    if cfg.normalization_type == "LN" and "ln_final.w" not in tensors and "embed.W_E" in tensors:
        raise CheckpointError(
            f"{name} has no layer-norm weights (it was saved after fold_ln); pass a cfg with "
            "normalization_type='LNPre'."
        )
    cfg.dtype = resolve_dtype(dtype, cfg.dtype)
    return build_model(cfg, tensors.items(), tokenizer, device, name)
