"""``MatchingPursuitSAE`` (SAELens's ``matching_pursuit`` architecture): a tied SAE whose
features are chosen greedily, one a step, by matching pursuit.

Each step picks, for every input, the decoder row with the largest positive dot product
with the residual (``W_enc`` is ``W_dec.T``), adds that (ReLU'd) coefficient to its feature
and removes its contribution from the residual. An input stops when its set of active
features did not change (``stop_on_duplicate_support``) or its residual norm fell below
``residual_threshold`` (if > 0), and all stop after ``max_iterations`` (default ``d_in``).
The parameters are ``W_dec`` and ``b_dec`` only. ``MatchingPursuitTrainingSAE`` trains it on
the reconstruction error alone (its decoder rows start at norm 1).

Example:
    >>> from interp.sae.saes.matching_pursuit_sae import (
    ...     MatchingPursuitSAE, MatchingPursuitSAEConfig)
    >>> sae = MatchingPursuitSAE(MatchingPursuitSAEConfig(d_in=8, d_sae=32, max_iterations=3))
    >>> acts = sae.encode(torch.randn(4, 8))             # [batch, d_sae]
    >>> acts.shape, (acts > 0).sum(-1).le(3).all().item(), sorted(sae.state_dict())
    (torch.Size([4, 32]), True, ['W_dec', 'b_dec'])
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.registry import register_sae_class, register_sae_training_class
from interp.sae.sae import SAE, str_to_dtype
from interp.sae.training_sae import (
    TrainCoefficientConfig,
    TrainingSAE,
    TrainingSAEConfig,
    TrainStepInput,
    TrainStepOutput,
)

__all__ = [
    "MatchingPursuitSAE",
    "MatchingPursuitSAEConfig",
    "MatchingPursuitTrainingSAE",
    "MatchingPursuitTrainingSAEConfig",
    "_encode_matching_pursuit",
]


@dataclass
class MatchingPursuitSAEConfig(SAEConfig):
    """A matching pursuit SAE: stop an input at ``residual_threshold`` (residual norm; 0
    turns it off), after ``max_iterations`` (``None``: ``d_in``), or when its active
    features repeat (``stop_on_duplicate_support``)."""

    architecture: str = ArchitectureName("matching_pursuit")
    residual_threshold: float = 1e-2
    max_iterations: int | None = None
    stop_on_duplicate_support: bool = True


def _encode_matching_pursuit(
    sae_in_centered: Tensor,
    W_dec: Tensor,
    residual_threshold: float,
    max_iterations: int | None,
    stop_on_duplicate_support: bool,
) -> Tensor:
    """Matching pursuit codes [..., d_sae] of ``sae_in_centered`` [..., d_in] (the input
    minus ``b_dec``) on the dictionary ``W_dec`` [d_sae, d_in]."""
    shape = sae_in_centered.shape
    residual = sae_in_centered.reshape(-1, shape[-1]).clone()  # [n, d_in]
    n_inputs = residual.shape[0]
    d_sae, d_in = W_dec.shape
    device = W_dec.device
    acts = torch.zeros(n_inputs, d_sae, device=device, dtype=residual.dtype)
    previous_support = torch.zeros(n_inputs, d_sae, dtype=torch.bool, device=device)
    done = torch.zeros(n_inputs, dtype=torch.bool, device=device)
    for _ in range(d_in if max_iterations is None else max_iterations):
        with torch.no_grad():  # which row: no gradient needed through the full [n, d_sae]
            chosen = (residual @ W_dec.T).relu().max(dim=1, keepdim=True).indices  # [n, 1]
        rows = W_dec[chosen.squeeze(1)]  # [n, d_in]
        values = (residual * rows).sum(dim=-1, keepdim=True).relu()  # [n, 1]
        values = (values * (~done).unsqueeze(1).to(values.dtype)).to(acts.dtype)
        acts.scatter_add_(1, chosen, values)
        residual = residual - values * rows
        if not stop_on_duplicate_support and residual_threshold <= 0:
            continue
        with torch.no_grad():
            support = acts != 0
            if stop_on_duplicate_support:
                done = done | (support == previous_support).all(dim=1)
                previous_support = support
            if residual_threshold > 0:
                done = done | (residual.norm(dim=-1) < residual_threshold)
            if done.all():
                break
    return acts.reshape(*shape[:-1], d_sae)


class _TiedDecoder:
    """Matching pursuit's tie: ``W_enc`` is ``W_dec.T`` and assigning it does nothing."""

    @property
    def W_enc(self) -> Tensor:
        return self.W_dec.T  # [d_in, d_sae]

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "W_enc":  # tied: the decoder is the only dictionary
            return
        super().__setattr__(name, value)

    def _matching_pursuit(self, x: Tensor, hooked: bool = True) -> Tensor:
        cfg = self.cfg
        return _encode_matching_pursuit(
            self.process_sae_in(x, hooked),
            self.W_dec,
            cfg.residual_threshold,
            max_iterations=cfg.max_iterations,
            stop_on_duplicate_support=cfg.stop_on_duplicate_support,
        )

    def _init_decoder(self, row_norm: float | None) -> None:
        """Kaiming-uniform ``W_dec`` [d_sae, d_in] (rows rescaled to ``row_norm`` if given),
        zero ``b_dec``."""
        cfg = self.cfg
        kind = {"dtype": str_to_dtype(cfg.dtype), "device": torch.device(cfg.device)}
        self.b_dec = nn.Parameter(torch.zeros(cfg.d_in, **kind))
        W_dec = nn.init.kaiming_uniform_(torch.empty(cfg.d_sae, cfg.d_in, **kind))
        if row_norm is not None:
            W_dec = W_dec / W_dec.norm(dim=-1, keepdim=True) * row_norm
        self.W_dec = nn.Parameter(W_dec)

    def _tied_decode(self, feature_acts: Tensor, hooked: bool = True) -> Tensor:
        """``feature_acts @ W_dec``, plus ``b_dec`` only if the input had it subtracted."""
        out = feature_acts @ self.W_dec
        if self.cfg.apply_b_dec_to_input:
            out = out + self.b_dec
        out = self._hook("hook_sae_recons", out, hooked)
        return self.reshape_fn_out(self._normalize_out(out), self.d_head)

    def fold_W_dec_norm(self) -> None:
        raise NotImplementedError(
            "Folding W_dec_norm is not safe for MatchingPursuit SAEs, as this may change the "
            "resulting activations"
        )


class MatchingPursuitSAE(_TiedDecoder, SAE):
    """The matching pursuit SAE (see the module docstring). As SAELens's, ``encode`` runs
    no ``hook_sae_acts_pre``/``hook_sae_acts_post`` hooks, ``W_enc`` is ``W_dec.T`` (setting
    it does nothing) and ``fold_W_dec_norm`` is refused."""

    def initialize_weights(self) -> None:
        """Kaiming-uniform ``W_dec`` [d_sae, d_in], zero ``b_dec``."""
        self._init_decoder(None)

    def encode(self, x: Tensor, hooked: bool = True) -> Tensor:
        """The matching pursuit codes [..., d_sae] of ``x`` [..., d_in]."""
        return self._matching_pursuit(x, hooked)

    def decode(self, feature_acts: Tensor, hooked: bool = True) -> Tensor:
        return self._tied_decode(feature_acts, hooked)


@dataclass
class MatchingPursuitTrainingSAEConfig(TrainingSAEConfig):
    """The training config: the inference config's stopping rules; ``decoder_init_norm``
    is always 1.0 (another value is replaced, with a warning, as SAELens does)."""

    architecture: str = ArchitectureName("matching_pursuit")
    residual_threshold: float = 1e-2
    max_iterations: int | None = None
    stop_on_duplicate_support: bool = True

    def _validate(self) -> None:
        super()._validate()
        if self.decoder_init_norm != 1.0:
            self.decoder_init_norm = 1.0
            warnings.warn(
                "decoder_init_norm must be set to 1.0 for MatchingPursuitTrainingSAE, "
                "setting to 1.0",
                stacklevel=2,
            )


class MatchingPursuitTrainingSAE(_TiedDecoder, TrainingSAE):
    """Trains a matching pursuit SAE on the MSE alone (no sparsity penalty: the pursuit's
    stopping rules bound the codes); ``hidden_pre`` is zeros, as there is none."""

    def initialize_weights(self) -> None:
        self._init_decoder(self.cfg.decoder_init_norm)

    def encode_with_hidden_pre(self, x: Tensor) -> tuple[Tensor, Tensor]:
        acts = self._matching_pursuit(x)
        return acts, torch.zeros_like(acts)

    def decode(self, feature_acts: Tensor, hooked: bool = True) -> Tensor:
        return self._tied_decode(feature_acts, hooked)

    def get_coefficients(self) -> dict[str, float | TrainCoefficientConfig]:
        return {}

    def calculate_aux_loss(
        self, step_input: TrainStepInput, feature_acts: Tensor, hidden_pre: Tensor, sae_out: Tensor
    ) -> dict[str, Tensor]:
        return {}

    def training_forward_pass(self, step_input: TrainStepInput) -> TrainStepOutput:
        """The base step; on logging steps also the L0 range, mean residual norm and the
        share of inputs whose residual fell below ``residual_threshold``."""
        output = super().training_forward_pass(step_input)
        if step_input.is_logging_step:
            l0 = output.feature_acts.bool().float().sum(-1)  # [batch]
            residual_norm = (step_input.sae_in - output.sae_out).norm(dim=-1)  # [batch]
            output.metrics["max_l0"] = l0.max()
            output.metrics["min_l0"] = l0.min()
            output.metrics["residual_norm"] = residual_norm.mean()
            converged = (residual_norm < self.cfg.residual_threshold).float().mean()
            output.metrics["residual_threshold_converged_portion"] = converged
        return output


register_sae_class("matching_pursuit", MatchingPursuitSAE, MatchingPursuitSAEConfig)
register_sae_training_class(
    "matching_pursuit", MatchingPursuitTrainingSAE, MatchingPursuitTrainingSAEConfig
)
