"""TransformerLens's ``transformer_lens.loading_from_pretrained`` under its own name, so ported
scripts change one import; the code lives in ``interp.loading`` (``model_names``,
``tl_config``, ``transformer_lens``, ``pretrained``).

Example:
    >>> from interp import loading_from_pretrained as loading
    >>> loading.get_official_model_name("solu-1l")
    'NeelNanda/SoLU_1L512W_C4_Code'
    >>> loading.get_pretrained_model_config("gpt2").n_layers      # from the cached config.json
    12
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.components.tl_buffers import weights_state_dict
from interp.config import HookedTransformerConfig
from interp.loading.model_names import (
    DEFAULT_MODEL_ALIASES,
    MODEL_ALIASES,
    OFFICIAL_MODEL_NAMES,
    get_official_model_name,
    make_model_alias_map,
)
from interp.loading.pretrained import check_model_name, load_pretrained
from interp.loading.tl_config import (
    convert_hf_model_config,
    convert_neel_model_config,
    get_pretrained_model_config,
)
from interp.loading.transformer_lens import convert_neel_solu_old_weights

__all__ = [
    "DEFAULT_MODEL_ALIASES",
    "MODEL_ALIASES",
    "OFFICIAL_MODEL_NAMES",
    "convert_hf_model_config",
    "convert_neel_model_config",
    "convert_neel_solu_old_weights",
    "get_official_model_name",
    "get_pretrained_model_config",
    "get_pretrained_state_dict",
    "make_model_alias_map",
]


def get_pretrained_state_dict(
    official_model_name: str,
    cfg: HookedTransformerConfig,
    hf_model: Any = None,
    dtype: torch.dtype = torch.float32,
    **kwargs: Any,
) -> dict[str, Tensor]:
    """The model's weights with TransformerLens's names and shapes, unprocessed (a TL name,
    hub id or local folder; or the in-memory ``hf_model``), in ``dtype``. ``cfg`` is accepted
    for TL's signature; the checkpoint's own config decides the layout.

    Example:
        >>> state_dict = get_pretrained_state_dict("gelu-1l", cfg)
        >>> state_dict["blocks.0.mlp.W_in"].shape
        torch.Size([512, 2048])
    """
    check_model_name(official_model_name, "get_pretrained_state_dict")
    name = official_model_name
    if not Path(name).exists() and hf_model is None:
        name = get_official_model_name(name)
    model = load_pretrained(name, dtype=kwargs.pop("torch_dtype", dtype), hf_model=hf_model)
    return weights_state_dict(model)  # the weights, as TL converts them (no attention buffers)
