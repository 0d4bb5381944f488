"""BatchTopK (Bussmann et al. 2024): ``k`` features an input on average over a batch.

SAELens trains BatchTopK SAEs and saves them as JumpReLU SAEs (a global threshold), so
there is no BatchTopK SAE class to load: ``SAE.load_from_disk`` of one gives a
``JumpReLUSAE``. Its training class is SAELens's; this module has the activation.

Example:
    >>> from interp.sae.saes.batchtopk_sae import BatchTopK
    >>> acts = BatchTopK(k=1)(torch.tensor([[3.0, 2.0, 0.0], [0.5, 0.0, 0.0]]))
    >>> acts   # 2 inputs x k=1: the 2 largest of the batch, both in the first row
    tensor([[3., 2., 0.],
            [0., 0., 0.]])
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn


class BatchTopK(nn.Module):
    """Keep the ``k * n_inputs`` largest ReLU'd activations of the whole batch."""

    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = k

    def forward(self, x: Float[Tensor, "... d_sae"]) -> Float[Tensor, "... d_sae"]:
        acts = x.relu()
        flat = acts.flatten()
        kept = torch.topk(flat, int(self.k * acts.shape[:-1].numel()), dim=-1)
        return torch.zeros_like(flat).scatter(-1, kept.indices, kept.values).reshape(acts.shape)
