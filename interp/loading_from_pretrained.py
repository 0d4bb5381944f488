"""TransformerLens's ``transformer_lens.loading_from_pretrained`` under its own name, so ported
scripts change one import; the code lives in ``interp.loading.transformer_lens`` (``model_names``,
``config``, ``state_dict``) and ``interp.loading.pretrained``.

Example:
    >>> from interp import loading_from_pretrained as loading
    >>> loading.get_official_model_name("solu-1l")
    'NeelNanda/SoLU_1L512W_C4_Code'
    >>> import tempfile, transformers
    >>> folder = tempfile.mkdtemp()   # or a name: "gpt2" (read from the Hugging Face cache)
    >>> transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2,
    ...                         architectures=["GPT2LMHeadModel"]).save_pretrained(folder)
    >>> loading.get_pretrained_model_config(folder).n_layers
    3
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.components.tl_buffers import weights_state_dict
from interp.config import HookedTransformerConfig
from interp.loading.pretrained import check_model_name, load_pretrained
from interp.loading.transformer_lens import convert_neel_solu_old_weights
from interp.loading.transformer_lens.config import (
    convert_hf_model_config,
    convert_neel_model_config,
    get_pretrained_model_config,
)
from interp.loading.transformer_lens.model_names import (
    DEFAULT_MODEL_ALIASES,
    MODEL_ALIASES,
    OFFICIAL_MODEL_NAMES,
    get_official_model_name,
    make_model_alias_map,
)
from interp.model import HookedTransformer

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

    Args:
        official_model_name: a TransformerLens name, hub id or local checkpoint folder.
        cfg: unused (TransformerLens's signature); the checkpoint's config decides the layout.
        hf_model: an already loaded Hugging Face model to convert instead of reading files.
        dtype: the weights' dtype (``torch_dtype=`` in ``kwargs`` is read too).

    Example:
        >>> import tempfile, transformers
        >>> folder = tempfile.mkdtemp()   # or a name: "gelu-1l" (read from the hub's cache)
        >>> transformers.GPT2LMHeadModel(transformers.GPT2Config(
        ...     n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16,
        ... )).save_pretrained(folder)
        >>> cfg = get_pretrained_model_config(folder)
        >>> state_dict = get_pretrained_state_dict(folder, cfg)
        >>> state_dict["blocks.0.mlp.W_in"].shape   # [d_model, d_mlp]
        torch.Size([32, 128])
        >>> state_dict["blocks.0.attn.W_Q"].shape   # [n_heads, d_model, d_head]
        torch.Size([2, 32, 16])
    """
    check_model_name(official_model_name, "get_pretrained_state_dict")
    name = official_model_name
    if not Path(name).exists() and hf_model is None:
        name = get_official_model_name(name)
    model = load_pretrained(
        name,
        dtype=kwargs.pop("torch_dtype", dtype),
        hf_model=hf_model,
        model_class=HookedTransformer,
    )
    return weights_state_dict(model)  # the weights, as TL converts them (no attention buffers)
