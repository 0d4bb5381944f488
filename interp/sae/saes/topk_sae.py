"""``TopKSAE``: only the ``k`` largest pre-activations of each input fire (Gao et al. 2024).

With ``rescale_acts_by_decoder_norm`` the ranking (and the features) are scaled by each
decoder row's norm, and ``decode`` divides it back out, as if the decoder were unit-norm.

``TopKTrainingSAE`` trains one (``rescale_acts_by_decoder_norm`` on by default) with the MSE and
an auxiliary loss that revives dead features (Gao et al. 2024, App. B.1): the ``d_in // 2``
largest pre-activations among the dead ones (``k_aux``, at most their number) reconstruct
the detached residual ``x - sae_out`` through ``W_dec`` (no ``b_dec``), scaled by
``aux_loss_coefficient * min(n_dead / k_aux, 1)``.

Example:
    >>> from interp.sae.saes.topk_sae import TopKSAE, TopKSAEConfig
    >>> sae = TopKSAE(TopKSAEConfig(d_in=8, d_sae=32, k=4))
    >>> (sae.encode(torch.randn(3, 8)) > 0).sum(-1).le(4).all().item()
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from interp.hooks import HookPoint
from interp.sae.activations import TopK
from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.sae import SAE
from interp.sae.training_sae import (
    TrainCoefficientConfig,
    TrainingSAE,
    TrainingSAEConfig,
    TrainStepInput,
)

__all__ = [
    "SparseHookPoint",
    "TopK",
    "TopKSAE",
    "TopKSAEConfig",
    "TopKTrainingSAE",
    "TopKTrainingSAEConfig",
    "act_times_W_dec",
    "calculate_topk_aux_acts",
    "check_k",
]


def check_k(cfg: SAEConfig) -> None:
    """A topk config's ``k``: a positive int (``encode`` checks it is at most ``d_sae``,
    as SAELens builds such configs)."""
    k = cfg.k
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
        raise ValueError(f"A topk SAE needs k, a positive int (got k={k!r}); set cfg k.")


@dataclass
class TopKSAEConfig(SAEConfig):
    """A TopK SAE's config: ``k`` features an input; ``rescale_acts_by_decoder_norm``
    ranks by ``h * ||W_dec row||``."""

    architecture: str = ArchitectureName("topk")
    k: int = 100
    rescale_acts_by_decoder_norm: bool = False

    def _validate(self) -> None:
        super()._validate()
        check_k(self)


def act_times_W_dec(
    feature_acts: Tensor, W_dec: Tensor, rescale_acts_by_decoder_norm: bool
) -> Tensor:
    """``feature_acts @ W_dec`` (divided by the decoder norms first when rescaling); no
    ``b_dec``."""
    if rescale_acts_by_decoder_norm:
        feature_acts = feature_acts * (1 / W_dec.norm(dim=-1))
    if feature_acts.is_sparse:
        feature_acts = feature_acts.to_dense()
    return feature_acts @ W_dec


class TopKSAE(SAE):
    """A TopK SAE: a standard SAE's parameters, ``cfg.k`` features an input.
    ``fold_W_dec_norm`` needs ``rescale_acts_by_decoder_norm`` (else it would change which
    features win) and raises ``NotImplementedError`` without it."""


class SparseHookPoint(HookPoint):
    """A hook point that hands its hooks a dense copy of a sparse input (and passes a
    sparse input through untouched when no hook is attached)."""

    def __init__(self, d_sae: int) -> None:
        super().__init__()
        self.d_sae = d_sae

    def forward(self, x: Tensor) -> Tensor:
        if x.is_sparse and self.has_hooks:
            x = x.to_dense()
        return super().forward(x)


@dataclass
class TopKTrainingSAEConfig(TrainingSAEConfig):
    """A TopK SAE's training config: ``k``, sparse activations (COO) or not, the aux-k loss
    coefficient, and ranking by decoder-norm-scaled pre-activations."""

    architecture: str = ArchitectureName("topk")
    k: int = 100
    use_sparse_activations: bool = False
    aux_loss_coefficient: float = 1.0
    rescale_acts_by_decoder_norm: bool = True

    def _validate(self) -> None:
        super()._validate()
        check_k(self)


def calculate_topk_aux_acts(k_aux: int, hidden_pre: Tensor, dead_neuron_mask: Tensor) -> Tensor:
    """``hidden_pre`` kept at the ``k_aux`` largest dead features of each row, 0 elsewhere."""
    dead_only = torch.where(dead_neuron_mask[None], hidden_pre, -torch.inf)  # [batch, d_sae]
    top = dead_only.topk(k_aux, sorted=False)
    return torch.zeros_like(hidden_pre).scatter_(-1, top.indices, top.values)


class TopKTrainingSAE(TrainingSAE):
    """A TopK SAE with its MSE + aux-k training loss (see the module's docstring);
    ``hidden_pre`` is scaled by the decoder norms with ``rescale_acts_by_decoder_norm``."""

    def __init__(self, cfg: TopKTrainingSAEConfig, use_error_term: bool = False) -> None:
        super().__init__(cfg, use_error_term)
        self.hook_sae_acts_post = SparseHookPoint(self.cfg.d_sae)
        self.setup()

    def get_activation_fn(self) -> Callable[[Tensor], Tensor]:
        return TopK(self.cfg.k, use_sparse_activations=self.cfg.use_sparse_activations)

    def get_coefficients(self) -> dict[str, float | TrainCoefficientConfig]:
        return {}

    def encode_with_hidden_pre(self, x: Tensor) -> tuple[Tensor, Tensor]:
        sae_in = self.process_sae_in(x)  # [..., d_in]
        hidden_pre = self.hook_sae_acts_pre(sae_in @ self.W_enc + self.b_enc)  # [..., d_sae]
        if self.cfg.rescale_acts_by_decoder_norm:
            hidden_pre = hidden_pre * self.W_dec.norm(dim=-1)
        return self.hook_sae_acts_post(self.activation_fn(hidden_pre)), hidden_pre

    def _times_W_dec(self, feature_acts: Tensor) -> Tensor:
        return act_times_W_dec(feature_acts, self.W_dec, self.cfg.rescale_acts_by_decoder_norm)

    def calculate_aux_loss(
        self, step_input: TrainStepInput, feature_acts: Tensor, hidden_pre: Tensor, sae_out: Tensor
    ) -> dict[str, Tensor]:
        loss = self.calculate_topk_aux_loss(
            step_input.sae_in, sae_out, hidden_pre, step_input.dead_neuron_mask
        )
        return {"auxiliary_reconstruction_loss": loss}

    def calculate_topk_aux_loss(
        self, sae_in: Tensor, sae_out: Tensor, hidden_pre: Tensor, dead_neuron_mask: Tensor | None
    ) -> Tensor:
        """The aux-k loss (see the module's docstring); 0 without dead features."""
        if dead_neuron_mask is None or (n_dead := int(dead_neuron_mask.sum())) == 0:
            return sae_out.new_tensor(0.0)
        if self.cfg.normalize_activations in ("constant_norm_rescale", "layer_norm"):
            raise ValueError(
                "TopK auxiliary loss does not support activation normalization "
                f"(normalize_activations={self.cfg.normalize_activations!r}): its "
                "reconstruction would be normalised while the residual is not; use 'none' or "
                "'expected_average_only_in'."
            )
        residual = (sae_in - sae_out).detach()  # [batch, d_in]
        k_aux = sae_in.shape[-1] // 2
        scale = min(n_dead / k_aux, 1.0)
        k_aux = min(k_aux, n_dead)
        aux_acts = calculate_topk_aux_acts(k_aux, hidden_pre, dead_neuron_mask)
        recons = act_times_W_dec(aux_acts, self.W_dec, self.cfg.rescale_acts_by_decoder_norm)
        recons = self.reshape_fn_out(recons, self.d_head)
        aux_loss = (recons - residual).pow(2).sum(dim=-1).mean()
        return self.cfg.aux_loss_coefficient * scale * aux_loss

    @torch.no_grad()
    def fold_W_dec_norm(self) -> None:
        if not self.cfg.rescale_acts_by_decoder_norm:
            raise NotImplementedError(
                "Folding W_dec_norm is not safe for TopKSAEs when rescale_acts_by_decoder_norm "
                "is False, as this may change the topk activations."
            )
        self.fold_and_get_W_dec_norm()

    def process_state_dict_for_saving_inference(self, state_dict: dict[str, Any]) -> None:
        """With ``rescale_acts_by_decoder_norm``, fold the decoder norms into the saved
        weights (unit decoder rows, ``W_enc`` and ``b_enc`` scaled)."""
        super().process_state_dict_for_saving_inference(state_dict)
        if self.cfg.rescale_acts_by_decoder_norm:
            norms = self.get_W_dec_norm()  # [d_sae]
            state_dict["b_enc"] = state_dict["b_enc"] * norms
            state_dict["W_dec"] = state_dict["W_dec"] / norms.unsqueeze(1)
            state_dict["W_enc"] = state_dict["W_enc"] * norms.unsqueeze(0)
