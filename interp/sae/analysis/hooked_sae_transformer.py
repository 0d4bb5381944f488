"""SAELens's module path ``sae_lens.analysis.hooked_sae_transformer``: ``HookedSAETransformer``,
its ``_SAEWrapper`` and helpers, as ``from interp.sae.analysis.hooked_sae_transformer import
HookedSAETransformer`` (the implementation is ``interp.sae.splice`` and ``interp.sae.sae_wrapper``).

Example:
    >>> from interp.sae.analysis.hooked_sae_transformer import HookedSAETransformer
    >>> from interp.sae import HookedSAETransformer as Same
    >>> HookedSAETransformer is Same
    True
"""

from torch import Tensor

from interp.sae.sae_wrapper import (
    _SAEWrapper,
    add_hook_in_to_mlp,
    get_deep_attr,
    set_deep_attr,
)
from interp.sae.splice import HookedSAETransformer

SingleLoss = Tensor  # a one-element tensor
LossPerToken = Tensor
Loss = SingleLoss | LossPerToken

__all__ = [
    "HookedSAETransformer",
    "Loss",
    "LossPerToken",
    "SingleLoss",
    "_SAEWrapper",
    "add_hook_in_to_mlp",
    "get_deep_attr",
    "set_deep_attr",
]
