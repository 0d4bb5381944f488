"""Helpers with TransformerLens's names, so ``transformer_lens.utils`` ports as ``interp.utils``.

One module a concept: ``names`` (hook-name shorthand), ``slice`` (``Slice``), ``tensors``,
``init`` (weight initialisers), ``tokens`` (masks and dataset packing), ``lm`` (next-token
metrics), ``activations`` (``gelu_new``, ``solu``... and ``ACTIVATION_FN_DICT``) and
``exploration`` (``test_prompt``). ``lm_cross_entropy_loss`` and
``composition_scores`` are the model's and the analysis package's, re-exported here.
"""

from __future__ import annotations

import importlib
from typing import Any

from interp.utils.activations import (
    ACTIVATION_FN_DICT,
    SUPPORTED_ACTIVATIONS,
    XIELU,
    ActivationFunction,
    gelu_fast,
    gelu_new,
    gelu_pytorch_tanh,
    solu,
    xielu,
)
from interp.utils.exploration import test_prompt
from interp.utils.init import (
    calc_fan_in_and_fan_out,
    init_kaiming_normal_,
    init_kaiming_uniform_,
    init_xavier_normal_,
    init_xavier_uniform_,
)
from interp.utils.libraries import is_library_available
from interp.utils.lm import lm_accuracy
from interp.utils.names import get_act_name
from interp.utils.options import USE_DEFAULT_VALUE, override_or_use_default_value
from interp.utils.slice import Slice, SliceInput
from interp.utils.tensors import (
    get_corner,
    get_cumsum_along_dim,
    get_device,
    get_nested_attr,
    get_offset_position_ids,
    is_lower_triangular,
    is_square,
    remove_batch_dim,
    repeat_along_head_dimension,
    set_nested_attr,
    to_numpy,
    transpose,
)
from interp.utils.tokens import (
    TokenDataset,
    get_attention_mask,
    get_tokens_with_bos_removed,
    tokenize_and_concatenate,
)

# Defined in modules that import interp.utils themselves: loaded on first use.
_LAZY = {
    "lm_cross_entropy_loss": "interp.model",
    "composition_scores": "interp.analysis.composition",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'interp.utils' has no attribute {name!r}")


__all__ = [
    "ACTIVATION_FN_DICT",
    "ActivationFunction",
    "SUPPORTED_ACTIVATIONS",
    "USE_DEFAULT_VALUE",
    "Slice",
    "SliceInput",
    "TokenDataset",
    "XIELU",
    "calc_fan_in_and_fan_out",
    "composition_scores",
    "gelu_fast",
    "gelu_new",
    "gelu_pytorch_tanh",
    "get_act_name",
    "get_attention_mask",
    "get_tokens_with_bos_removed",
    "get_corner",
    "get_cumsum_along_dim",
    "get_device",
    "get_nested_attr",
    "get_offset_position_ids",
    "init_kaiming_normal_",
    "init_kaiming_uniform_",
    "init_xavier_normal_",
    "init_xavier_uniform_",
    "is_library_available",
    "is_lower_triangular",
    "is_square",
    "lm_accuracy",
    "lm_cross_entropy_loss",
    "override_or_use_default_value",
    "remove_batch_dim",
    "repeat_along_head_dimension",
    "set_nested_attr",
    "solu",
    "test_prompt",
    "to_numpy",
    "tokenize_and_concatenate",
    "transpose",
    "xielu",
]
