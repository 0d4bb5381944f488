"""BatchTopK (Bussmann et al. 2024): ``k`` features an input on average over a batch.

``BatchTopKTrainingSAE`` trains one (a ``TopKTrainingSAE`` with this activation and a
fractional ``k``) and keeps ``topk_threshold``, a running average (rate
``topk_threshold_lr``) of the smallest activation that fired in each batch. It is saved as
a JumpReLU SAE with that threshold for every feature, so there is no BatchTopK SAE class to
load: ``SAE.load_from_disk`` of one gives a ``JumpReLUSAE``.

Example:
    >>> from interp.sae.saes.batchtopk_sae import BatchTopK
    >>> acts = BatchTopK(k=1)(torch.tensor([[3.0, 2.0, 0.0], [0.5, 0.0, 0.0]]))
    >>> acts   # 2 inputs x k=1: the 2 largest of the batch, both in the first row
    tensor([[3., 2., 0.],
            [0., 0., 0.]])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.saes.jumprelu_sae import JumpReLUSAEConfig
from interp.sae.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig
from interp.sae.training_sae import TrainStepInput, TrainStepOutput


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


@dataclass
class BatchTopKTrainingSAEConfig(TopKTrainingSAEConfig):
    """A BatchTopK SAE's training config: ``k`` features an input on average over a batch
    (a float), and the rate of the threshold's running average."""

    architecture: str = ArchitectureName("batchtopk")
    k: float = 100
    topk_threshold_lr: float = 0.01

    def _validate(self) -> None:
        SAEConfig._validate(self)
        if isinstance(self.k, bool) or not isinstance(self.k, int | float) or self.k <= 0:
            raise ValueError(f"A batchtopk SAE needs k, a positive number (got k={self.k!r}).")

    def get_inference_config_class(self) -> type[SAEConfig]:
        return JumpReLUSAEConfig


class BatchTopKTrainingSAE(TopKTrainingSAE):
    """A TopK training SAE whose ``k`` holds on average over the batch (see the module's
    docstring); ``topk_threshold`` is a float64 buffer."""

    def __init__(self, cfg: BatchTopKTrainingSAEConfig, use_error_term: bool = False) -> None:
        super().__init__(cfg, use_error_term)
        self.register_buffer(
            "topk_threshold", torch.tensor(0.0, dtype=torch.double, device=self.W_dec.device)
        )

    def get_activation_fn(self) -> Callable[[Tensor], Tensor]:
        return BatchTopK(self.cfg.k)

    def training_forward_pass(self, step_input: TrainStepInput) -> TrainStepOutput:
        output = super().training_forward_pass(step_input)
        self.update_topk_threshold(output.feature_acts)
        output.metrics["topk_threshold"] = self.topk_threshold
        return output

    @torch.no_grad()
    def update_topk_threshold(self, acts_topk: Tensor) -> None:
        """Move the threshold towards the batch's smallest positive activation."""
        positive = acts_topk > 0
        lr = self.cfg.topk_threshold_lr
        with torch.autocast(self.topk_threshold.device.type, enabled=False):
            if positive.any():
                smallest = acts_topk[positive].min().to(self.topk_threshold.dtype)
                self.topk_threshold = (1 - lr) * self.topk_threshold + lr * smallest

    def process_state_dict_for_saving_inference(self, state_dict: dict[str, Any]) -> None:
        """The TopK folding, then ``topk_threshold`` as every feature's JumpReLU threshold."""
        super().process_state_dict_for_saving_inference(state_dict)
        threshold = state_dict.pop("topk_threshold").item()
        state_dict["threshold"] = torch.ones_like(self.b_enc) * threshold
