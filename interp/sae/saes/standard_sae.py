"""``StandardSAE``: a ReLU sparse autoencoder, ``relu((x - b_dec) @ W_enc + b_enc)``.

``StandardTrainingSAE`` trains one with an L1 penalty on the features scaled by their
decoder norms: ``l1_loss = mean(l1 * ||f * ||W_dec rows|| ||_p)`` (``p = cfg.lp_norm``).

Example:
    >>> from interp.sae.saes.standard_sae import StandardSAE, StandardSAEConfig
    >>> sae = StandardSAE(StandardSAEConfig(d_in=8, d_sae=32))
    >>> sae.cfg.architecture(), sorted(name for name, _ in sae.named_parameters())
    ('standard', ['W_dec', 'W_enc', 'b_dec', 'b_enc'])
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.sae import SAE
from interp.sae.training_sae import (
    TrainCoefficientConfig,
    TrainingSAE,
    TrainingSAEConfig,
    TrainStepInput,
)


@dataclass
class StandardSAEConfig(SAEConfig):
    """A standard (ReLU) SAE's config."""

    architecture: str = ArchitectureName("standard")


class StandardSAE(SAE):
    """A ReLU SAE: ``W_enc``, ``b_enc``, ``W_dec``, ``b_dec`` (computed by ``SAE``)."""


@dataclass
class StandardTrainingSAEConfig(TrainingSAEConfig):
    """A standard SAE's training config: the L1 coefficient (warmed up over
    ``l1_warm_up_steps``) and the norm ``lp_norm`` of the sparsity penalty."""

    architecture: str = ArchitectureName("standard")
    l1_coefficient: float = 1.0
    lp_norm: float = 1.0
    l1_warm_up_steps: int = 0


class StandardTrainingSAE(TrainingSAE):
    """A standard SAE with its MSE + L1 training loss (see the module's docstring)."""

    def get_coefficients(self) -> dict[str, float | TrainCoefficientConfig]:
        return {"l1": TrainCoefficientConfig(self.cfg.l1_coefficient, self.cfg.l1_warm_up_steps)}

    def encode_with_hidden_pre(self, x: Tensor) -> tuple[Tensor, Tensor]:
        sae_in = self.process_sae_in(x)  # [..., d_in]
        hidden_pre = self.hook_sae_acts_pre(sae_in @ self.W_enc + self.b_enc)  # [..., d_sae]
        return self.hook_sae_acts_post(self.activation_fn(hidden_pre)), hidden_pre

    def calculate_aux_loss(
        self, step_input: TrainStepInput, feature_acts: Tensor, hidden_pre: Tensor, sae_out: Tensor
    ) -> dict[str, Tensor]:
        weighted = feature_acts * self.W_dec.norm(dim=1)  # [batch, d_sae]
        sparsity = weighted.norm(p=self.cfg.lp_norm, dim=-1)  # [batch]
        return {"l1_loss": (step_input.coefficients["l1"] * sparsity).mean()}

    def log_histograms(self) -> dict:
        b_enc = self.b_enc.detach().float().cpu().numpy()
        return {**super().log_histograms(), "weights/b_e": b_enc}
