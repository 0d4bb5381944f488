"""``GatedSAE``: a gate path decides which features fire, a magnitude path how much
(Rajamanoharan et al. 2024), sharing ``W_enc``.

    f = 1[x' @ W_enc + b_gate > 0] * relu(x' @ (W_enc * exp(r_mag)) + b_mag),  x' = x - b_dec

``GatedTrainingSAE`` trains one with an L1 penalty on the ReLU'd gate pre-activations scaled
by the decoder norms, and an auxiliary loss: the squared error of reconstructing the input
from those gate activations alone (``relu(pi_gate) @ W_dec + b_dec``).

Example:
    >>> from interp.sae.saes.gated_sae import GatedSAE, GatedSAEConfig
    >>> sae = GatedSAE(GatedSAEConfig(d_in=8, d_sae=32))
    >>> sorted(name for name, _ in sae.named_parameters()), sae.b_enc is None
    (['W_dec', 'W_enc', 'b_dec', 'b_gate', 'b_mag', 'r_mag'], True)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
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
class GatedSAEConfig(SAEConfig):
    """A gated SAE's config."""

    architecture: str = ArchitectureName("gated")


class GatedSAE(SAE):
    """A gated SAE: ``W_enc``, ``b_gate``, ``r_mag``, ``b_mag``, ``W_dec``, ``b_dec`` (no
    ``b_enc``: it is ``None``, as in SAELens)."""


@dataclass
class GatedTrainingSAEConfig(TrainingSAEConfig):
    """A gated SAE's training config: the L1 coefficient and its warm-up."""

    architecture: str = ArchitectureName("gated")
    l1_coefficient: float = 1.0
    l1_warm_up_steps: int = 0


class GatedTrainingSAE(TrainingSAE):
    """A gated SAE with its training losses (see the module's docstring); ``hidden_pre`` is
    the magnitude path's pre-activation."""

    def __init__(self, cfg: GatedTrainingSAEConfig, use_error_term: bool = False) -> None:
        if use_error_term:
            raise ValueError(
                "GatedSAE does not support `use_error_term`. Please set `use_error_term=False`."
            )
        super().__init__(cfg, use_error_term)

    def get_coefficients(self) -> dict[str, float | TrainCoefficientConfig]:
        return {"l1": TrainCoefficientConfig(self.cfg.l1_coefficient, self.cfg.l1_warm_up_steps)}

    def encode_with_hidden_pre(self, x: Tensor) -> tuple[Tensor, Tensor]:
        sae_in = self.process_sae_in(x)  # [..., d_in]
        active = (sae_in @ self.W_enc + self.b_gate > 0).to(self.dtype)  # [..., d_sae]
        magnitude_pre = sae_in @ (self.W_enc * self.r_mag.exp()) + self.b_mag
        magnitude_pre = self.hook_sae_acts_pre(magnitude_pre)
        acts = self.hook_sae_acts_post(active * self.activation_fn(magnitude_pre))
        return acts, magnitude_pre

    def calculate_aux_loss(
        self, step_input: TrainStepInput, feature_acts: Tensor, hidden_pre: Tensor, sae_out: Tensor
    ) -> dict[str, Tensor]:
        centered = step_input.sae_in - self.b_dec * self.cfg.apply_b_dec_to_input
        pi_gate_act = torch.relu(centered @ self.W_enc + self.b_gate)  # [batch, d_sae]
        weighted = (pi_gate_act * self.W_dec.norm(dim=1)).sum(dim=-1)  # [batch]
        l1_loss = step_input.coefficients["l1"] * weighted.mean()
        via_gate = pi_gate_act @ self.W_dec + self.b_dec  # [batch, d_in]
        aux = (via_gate - step_input.sae_in).pow(2).sum(dim=-1).mean()
        return {"l1_loss": l1_loss, "auxiliary_reconstruction_loss": aux}

    def log_histograms(self) -> dict:
        return {
            **super().log_histograms(),
            "weights/b_gate": self.b_gate.detach().float().cpu().numpy(),
            "weights/b_mag": self.b_mag.detach().float().cpu().numpy(),
        }
