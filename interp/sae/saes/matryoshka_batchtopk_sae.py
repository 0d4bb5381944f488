"""Matryoshka BatchTopK SAEs (Bussmann et al. 2025): nested prefixes of the features must
each reconstruct the input on their own, which keeps general features in the first ones.

With widths ``w_1 < ... < w_n = d_sae``, the loss adds to a BatchTopK SAE's the inner MSEs
of the prefix reconstructions ``f[:, :w_i] @ W_dec[:w_i] + b_dec`` for ``i < n`` (the full
width is the ordinary MSE). ``use_matryoshka_aux_loss`` gives each level's dead features
their own aux-k loss against that level's residual. Trained SAEs save as JumpReLU SAEs.

Example:
    >>> from interp.sae.saes.matryoshka_batchtopk_sae import (
    ...     MatryoshkaBatchTopKTrainingSAE, MatryoshkaBatchTopKTrainingSAEConfig)
    >>> from interp.sae.training_sae import TrainStepInput
    >>> cfg = MatryoshkaBatchTopKTrainingSAEConfig(d_in=8, d_sae=32, k=4,
    ...                                            matryoshka_widths=[8, 16, 32])
    >>> sae = MatryoshkaBatchTopKTrainingSAE(cfg)
    >>> step = TrainStepInput(torch.randn(4, 8), {}, None, 0, False)
    >>> sorted(sae.training_forward_pass(step).losses)
    ['auxiliary_reconstruction_loss', 'inner_mse_loss_16', 'inner_mse_loss_8', 'mse_loss']
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import Tensor

from interp.sae.config import ArchitectureName
from interp.sae.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
from interp.sae.saes.topk_sae import calculate_topk_aux_acts
from interp.sae.training_sae import TrainStepInput, TrainStepOutput

__all__ = [
    "MatryoshkaBatchTopKTrainingSAE",
    "MatryoshkaBatchTopKTrainingSAEConfig",
    "_validate_matryoshka_config",
]


@dataclass
class MatryoshkaBatchTopKTrainingSAEConfig(BatchTopKTrainingSAEConfig):
    """A BatchTopK training config with the nested ``matryoshka_widths`` (strictly
    increasing; ``d_sae`` is appended if missing) and the per-level aux loss switch."""

    architecture: str = ArchitectureName("matryoshka_batchtopk")
    matryoshka_widths: list[int] = field(default_factory=list)
    use_matryoshka_aux_loss: bool = False


def _validate_matryoshka_config(cfg: MatryoshkaBatchTopKTrainingSAEConfig) -> None:
    """Append ``d_sae`` as the last width if missing (warning), check the widths increase,
    and warn that a single level is a plain BatchTopK SAE."""
    if not cfg.matryoshka_widths or cfg.matryoshka_widths[-1] != cfg.d_sae:
        warnings.warn(
            "WARNING: The final matryoshka level width is not set to cfg.d_sae. "
            "A final matryoshka level of width=cfg.d_sae will be added.",
            stacklevel=2,
        )
        cfg.matryoshka_widths.append(cfg.d_sae)
    widths = cfg.matryoshka_widths
    if any(prev >= cur for prev, cur in zip(widths[:-1], widths[1:], strict=True)):
        raise ValueError(
            f"cfg.matryoshka_widths must be strictly increasing (got {widths}); sort them."
        )
    if len(widths) == 1:
        warnings.warn(
            "WARNING: You have only set one matryoshka level. This is equivalent to using a "
            "standard BatchTopK SAE and is likely not what you want.",
            stacklevel=2,
        )


class MatryoshkaBatchTopKTrainingSAE(BatchTopKTrainingSAE):
    """A BatchTopK training SAE with the nested reconstruction losses (see the module's
    docstring)."""

    def __init__(
        self, cfg: MatryoshkaBatchTopKTrainingSAEConfig, use_error_term: bool = False
    ) -> None:
        super().__init__(cfg, use_error_term)
        _validate_matryoshka_config(cfg)

    def _iterable_decode(
        self, feature_acts: Tensor, include_outer_loss: bool = False
    ) -> Iterator[tuple[int, Tensor]]:
        """``(width, reconstruction from the first width features)`` for each level (the
        last, full one only with ``include_outer_loss``); denormalised."""
        if self.cfg.rescale_acts_by_decoder_norm:
            feature_acts = feature_acts * (1 / self.W_dec.norm(dim=-1))
        if feature_acts.is_sparse:
            feature_acts = feature_acts.to_dense()
        widths = self.cfg.matryoshka_widths
        if not include_outer_loss:
            widths = widths[:-1]
        decoded, start = self.b_dec, 0
        for width in widths:
            decoded = feature_acts[:, start:width] @ self.W_dec[start:width] + decoded
            start = width
            yield width, self.run_time_activation_norm_fn_out(decoded)

    def training_forward_pass(self, step_input: TrainStepInput) -> TrainStepOutput:
        output = super().training_forward_pass(step_input)
        for width, inner in self._iterable_decode(output.feature_acts):
            inner_mse = self.mse_loss_fn(inner, step_input.sae_in).sum(dim=-1).mean()
            output.losses[f"inner_mse_loss_{width}"] = inner_mse
            output.loss = output.loss + inner_mse
        return output

    def calculate_aux_loss(
        self, step_input: TrainStepInput, feature_acts: Tensor, hidden_pre: Tensor, sae_out: Tensor
    ) -> dict[str, Tensor]:
        dead = step_input.dead_neuron_mask
        if self.cfg.use_matryoshka_aux_loss:
            loss = self.calculate_matryoshka_aux_loss(
                step_input.sae_in, sae_out, feature_acts, hidden_pre, dead
            )
        else:
            loss = self.calculate_topk_aux_loss(step_input.sae_in, sae_out, hidden_pre, dead)
        return {"auxiliary_reconstruction_loss": loss}

    def calculate_matryoshka_aux_loss(
        self,
        sae_in: Tensor,
        sae_out: Tensor,
        feature_acts: Tensor,
        hidden_pre: Tensor,
        dead_neuron_mask: Tensor | None,
    ) -> Tensor:
        """An aux-k loss per level: its dead features reconstruct the residual of the
        reconstruction up to that level."""
        if dead_neuron_mask is None or int(dead_neuron_mask.sum()) == 0:
            return sae_out.new_tensor(0.0)
        k_aux = sae_in.shape[-1] // 2
        W_dec = self.W_dec  # [d_sae, d_in]
        if self.cfg.rescale_acts_by_decoder_norm:
            W_dec = W_dec / W_dec.norm(dim=-1, keepdim=True)
        losses, start = [], 0
        for width, partial_out in self._iterable_decode(feature_acts, include_outer_loss=True):
            dead = dead_neuron_mask[start:width]
            n_dead = int(dead.sum())
            if n_dead > 0:
                residual = (sae_in - partial_out).detach()
                acts = calculate_topk_aux_acts(min(k_aux, n_dead), hidden_pre[:, start:width], dead)
                error = (acts @ W_dec[start:width] - residual).pow(2).sum(dim=-1).mean()
                losses.append(min(n_dead / k_aux, 1.0) * error)
            start = width
        return self.cfg.aux_loss_coefficient * torch.stack(losses).sum()
