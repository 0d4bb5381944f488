"""The TopK activation (SAELens's ``TopK`` module): keep the k largest pre-activations, ReLU'd.

Example:
    >>> TopK(k=2)(torch.tensor([[0.5, -1.0, 2.0, 1.0]]))
    tensor([[0., 0., 2., 1.]])
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn


class TopK(nn.Module):
    """Zero all but the ``k`` largest entries of the last axis, then ReLU those; with
    ``use_sparse_activations``, a sparse COO tensor of the same values."""

    def __init__(self, k: int, use_sparse_activations: bool = False) -> None:
        super().__init__()
        self.k = k
        self.use_sparse_activations = use_sparse_activations

    def forward(self, x: Float[Tensor, "... d_sae"]) -> Float[Tensor, "... d_sae"]:
        if self.k > x.shape[-1]:
            raise ValueError(
                f"k={self.k} is larger than d_sae={x.shape[-1]}: a TopK SAE keeps k of its "
                "d_sae features; lower cfg.k."
            )
        values, indices = torch.topk(x, k=self.k, dim=-1, sorted=False)
        values = values.relu()
        if not self.use_sparse_activations:
            return torch.zeros_like(x).scatter_(-1, indices, values)
        rows = torch.arange(x.shape[:-1].numel(), device=x.device).repeat_interleave(self.k)
        batch = torch.unravel_index(rows, x.shape[:-1]) if x.dim() > 1 else ()
        coords = torch.stack([*batch, indices.flatten()])  # [x.dim(), n * k]
        return torch.sparse_coo_tensor(coords, values.flatten(), x.shape, check_invariants=False)
