"""TransformerLens's ``transformer_lens.HookedTransformer`` module names, for scripts ported by
import (``from interp.HookedTransformer import HookedTransformer, Loss``).

``interp.HookedTransformer`` itself is the class (as in TransformerLens); this module is
reached by ``from interp.HookedTransformer import ...``.

Example:
    >>> from interp.HookedTransformer import HookedTransformer, Loss
    >>> HookedTransformer is interp.HookedTransformer
    True
"""

from torch import Tensor

from interp.hooks import HookedRootModule
from interp.model import HookedTransformer

SingleLoss = Tensor  # a one-element tensor
LossPerToken = Tensor  # [batch, pos - 1]
Loss = SingleLoss | LossPerToken
Output = Tensor | tuple[Tensor, Loss] | None  # what forward returns, by return_type

__all__ = ["HookedRootModule", "HookedTransformer", "Loss", "LossPerToken", "Output", "SingleLoss"]
