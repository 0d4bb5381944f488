"""``JumpReLUSAE``: features below their ``threshold`` are zero (Gemma Scope's SAEs).

    f = relu(h) * 1[h > threshold],  h = (x - b_dec) @ W_enc + b_enc

``JumpReLUTrainingSAE`` learns ``log_threshold`` (``threshold = exp(log_threshold)``) through
straight-through estimators of the step's gradient with a rectangle kernel of width
``jumprelu_bandwidth`` (Rajamanoharan et al. 2024), and penalises the L0: ``"step"`` counts
the features above threshold (Google DeepMind's), ``"tanh"`` sums
``tanh(jumprelu_tanh_scale * f * ||W_dec row||)`` (Anthropic's); ``pre_act_loss_coefficient``
adds Anthropic's pre-activation loss on dead features,
``sum(relu(threshold - h) * dead * ||W_dec row||)``.

Example:
    >>> from interp.sae.saes.jumprelu_sae import JumpReLUSAE, JumpReLUSAEConfig
    >>> sae = JumpReLUSAE(JumpReLUSAEConfig(d_in=8, d_sae=32))
    >>> sae.threshold.shape
    torch.Size([32])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.sae import SAE
from interp.sae.training_sae import (
    TrainCoefficientConfig,
    TrainingSAE,
    TrainingSAEConfig,
    TrainStepInput,
)


@dataclass
class JumpReLUSAEConfig(SAEConfig):
    """A JumpReLU SAE's config."""

    architecture: str = ArchitectureName("jumprelu")


class JumpReLUSAE(SAE):
    """A JumpReLU SAE: a standard SAE's parameters and ``threshold [d_sae]``;
    ``fold_W_dec_norm`` scales the threshold with ``b_enc``."""


def rectangle(x: Tensor) -> Tensor:
    """1 on (-1/2, 1/2), else 0: the kernel of the threshold's pseudo-gradient."""
    return ((x > -0.5) & (x < 0.5)).to(x)


def _threshold_grad(
    x: Tensor, threshold: Tensor, bandwidth: float, grad_output: Tensor, scale: Tensor | float
) -> Tensor:
    """``sum over the batch of -scale / bandwidth * rectangle((x - t) / bandwidth) * grad``."""
    kernel = rectangle((x - threshold) / bandwidth)
    return torch.sum(-(scale / bandwidth) * kernel * grad_output, dim=0)


class Step(torch.autograd.Function):
    """``1[x > threshold]``; the threshold gets the rectangle-kernel pseudo-gradient."""

    @staticmethod
    def forward(x: Tensor, threshold: Tensor, bandwidth: float) -> Tensor:  # noqa: ARG004
        return (x > threshold).to(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:  # noqa: ARG004
        x, threshold, bandwidth = inputs
        ctx.save_for_backward(x, threshold)
        ctx.bandwidth = bandwidth

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[None, Tensor, None]:
        x, threshold = ctx.saved_tensors
        return None, _threshold_grad(x, threshold, ctx.bandwidth, grad_output, 1.0), None


class JumpReLU(torch.autograd.Function):
    """``x * 1[x > threshold]``; ``x`` gets the plain gradient through the mask, the
    threshold the rectangle-kernel pseudo-gradient scaled by the threshold."""

    @staticmethod
    def forward(x: Tensor, threshold: Tensor, bandwidth: float) -> Tensor:  # noqa: ARG004
        return (x * (x > threshold)).to(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:  # noqa: ARG004
        x, threshold, bandwidth = inputs
        ctx.save_for_backward(x, threshold)
        ctx.bandwidth = bandwidth

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor, Tensor, None]:
        x, threshold = ctx.saved_tensors
        x_grad = (x > threshold) * grad_output
        t_grad = _threshold_grad(x, threshold, ctx.bandwidth, grad_output, threshold)
        return x_grad, t_grad, None


@dataclass
class JumpReLUTrainingSAEConfig(TrainingSAEConfig):
    """A JumpReLU SAE's training config (see the module's docstring for the losses)."""

    architecture: str = ArchitectureName("jumprelu")
    jumprelu_init_threshold: float = 0.01
    jumprelu_bandwidth: float = 0.05
    jumprelu_sparsity_loss_mode: str = "step"  # "step" (DeepMind) or "tanh" (Anthropic)
    l0_coefficient: float = 1.0
    l0_warm_up_steps: int = 0
    pre_act_loss_coefficient: float | None = None  # Anthropic's 3e-6; None: off
    jumprelu_tanh_scale: float = 4.0


class JumpReLUTrainingSAE(TrainingSAE):
    """A JumpReLU SAE training ``log_threshold [d_sae]``; ``threshold`` is its exp, and saved
    under that name."""

    def __init__(self, cfg: JumpReLUTrainingSAEConfig, use_error_term: bool = False) -> None:
        super().__init__(cfg, use_error_term)
        self.bandwidth = self.cfg.jumprelu_bandwidth

    def initialize_weights(self) -> None:
        super().initialize_weights()
        # The inference SAE's ``threshold`` parameter becomes exp(log_threshold).
        del self._parameters["threshold"]
        log_t = math.log(self.cfg.jumprelu_init_threshold)
        self.log_threshold = nn.Parameter(
            torch.full((self.cfg.d_sae,), log_t, dtype=self.dtype, device=self.device)
        )

    @property
    def threshold(self) -> Tensor:
        """``exp(log_threshold)`` ``[d_sae]``."""
        return torch.exp(self.log_threshold)

    def get_coefficients(self) -> dict[str, float | TrainCoefficientConfig]:
        return {"l0": TrainCoefficientConfig(self.cfg.l0_coefficient, self.cfg.l0_warm_up_steps)}

    def encode_with_hidden_pre(self, x: Tensor) -> tuple[Tensor, Tensor]:
        sae_in = self.process_sae_in(x)  # [..., d_in]
        hidden_pre = self.hook_sae_acts_pre(sae_in @ self.W_enc + self.b_enc)  # [..., d_sae]
        acts = JumpReLU.apply(hidden_pre, self.threshold, self.bandwidth)
        return self.hook_sae_acts_post(acts), hidden_pre

    def calculate_aux_loss(
        self, step_input: TrainStepInput, feature_acts: Tensor, hidden_pre: Tensor, sae_out: Tensor
    ) -> dict[str, Tensor]:
        threshold = self.threshold
        W_dec_norm = self.W_dec.norm(dim=1)  # [d_sae]
        mode = self.cfg.jumprelu_sparsity_loss_mode
        if mode == "step":
            per_item = Step.apply(hidden_pre, threshold, self.bandwidth).sum(dim=-1)
        elif mode == "tanh":
            scaled = self.cfg.jumprelu_tanh_scale * feature_acts * W_dec_norm
            per_item = torch.tanh(scaled).sum(dim=-1)
        else:
            raise ValueError(f"Invalid sparsity loss mode: {mode!r}; use 'step' or 'tanh'.")
        losses = {"l0_loss": (step_input.coefficients["l0"] * per_item).mean()}
        if self.cfg.pre_act_loss_coefficient is not None:
            losses["pre_act_loss"] = calculate_pre_act_loss(
                self.cfg.pre_act_loss_coefficient,
                threshold,
                hidden_pre,
                step_input.dead_neuron_mask,
                W_dec_norm,
            )
        return losses

    @torch.no_grad()
    def fold_W_dec_norm(self) -> None:
        """Unit decoder rows; the encoder, ``b_enc`` and the threshold scaled to match."""
        threshold = self.threshold.clone()
        norms = self.fold_and_get_W_dec_norm()
        self.log_threshold.data = torch.log(threshold * norms)

    def process_state_dict_for_saving(self, state_dict: dict[str, Any]) -> None:
        if "log_threshold" in state_dict:
            log_t = state_dict.pop("log_threshold")
            state_dict["threshold"] = torch.exp(log_t).detach().contiguous()

    def process_state_dict_for_loading(self, state_dict: dict[str, Any]) -> None:
        if "threshold" in state_dict:
            threshold = state_dict.pop("threshold")
            state_dict["log_threshold"] = torch.log(threshold).detach().contiguous()


def calculate_pre_act_loss(
    pre_act_loss_coefficient: float,
    threshold: Tensor,
    hidden_pre: Tensor,
    dead_neuron_mask: Tensor | None,
    W_dec_norm: Tensor,
) -> Tensor:
    """Anthropic's pre-activation loss on the dead features (0 when none are dead)."""
    if dead_neuron_mask is None or not dead_neuron_mask.any():
        return hidden_pre.new_tensor(0.0)
    gap = (threshold - hidden_pre).relu() * dead_neuron_mask * W_dec_norm  # [batch, d_sae]
    return pre_act_loss_coefficient * gap.sum(dim=-1).mean()
