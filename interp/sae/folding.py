"""Folding scales into an SAE's weights (SAELens's ``fold_W_dec_norm`` and
``fold_activation_norm_scaling_factor``), leaving what the SAE computes unchanged.

``fold_W_dec_norm`` makes every decoder row unit-norm and scales the encoder (and the
biases and thresholds that compare with its output) by the same norms, so each feature's
activation is multiplied by its decoder norm and the reconstruction is the same. TopK SAEs
refuse unless they rank by decoder-norm-scaled activations
(``rescale_acts_by_decoder_norm``): otherwise folding could change which k win.

Example:
    >>> from interp.sae import SAE, SAEConfig
    >>> sae = SAE(SAEConfig(d_in=8, d_sae=16))
    >>> with torch.no_grad():
    ...     _ = sae.W_dec.mul_(3.0)
    >>> x = torch.randn(4, 8)
    >>> before = sae(x)
    >>> sae.fold_W_dec_norm()
    >>> unit_rows = torch.allclose(sae.W_dec.norm(dim=-1), torch.ones(16))
    >>> unit_rows, torch.allclose(sae(x), before, atol=1e-5)
    (True, True)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class FoldingMixin:
    """``fold_W_dec_norm`` and friends for ``SAE`` (which supplies the parameters and cfg)."""

    @torch.no_grad()
    def get_W_dec_norm(self) -> Tensor:
        """Each decoder row's norm (at least 1e-8, so dead rows do not divide by zero)."""
        return self.W_dec.norm(dim=-1).clamp(min=1e-8)

    @torch.no_grad()
    def fold_and_get_W_dec_norm(self) -> Tensor:
        """Unit-norm decoder rows, the encoder (and ``b_enc``) scaled by the norms; returns
        the norms ``[d_sae]``."""
        norms = self.get_W_dec_norm()
        self.W_dec.data = self.W_dec.data / norms.unsqueeze(1)
        self.W_enc.data = self.W_enc.data * norms.unsqueeze(0)
        if isinstance(getattr(self, "b_enc", None), nn.Parameter):
            self.b_enc.data = self.b_enc.data * norms
        return norms

    @torch.no_grad()
    def fold_W_dec_norm(self) -> None:
        """Fold the decoder norms into the encoder (see the module's docstring)."""
        cfg = self.cfg
        if cfg.activation == "topk" and not cfg.rescale_acts_by_decoder_norm:
            raise NotImplementedError(
                "Folding W_dec_norm is not safe for TopKSAEs when rescale_acts_by_decoder_norm "
                "is False, as this may change the topk activations."
            )
        norms = self.fold_and_get_W_dec_norm()
        if cfg.activation == "jumprelu":
            self.threshold.data = self.threshold.data * norms
        if cfg.activation == "gated":  # r_mag needs nothing: W_enc carries the scale
            self.b_gate.data = self.b_gate.data * norms
            self.b_mag.data = self.b_mag.data * norms

    @torch.no_grad()
    def fold_activation_norm_scaling_factor(self, scaling_factor: float) -> None:
        """Take inputs unscaled where the SAE was trained on ``x * scaling_factor``
        (``normalize_activations="expected_average_only_in"``): the factor moves into
        ``W_enc``, and out of ``W_dec`` and ``b_dec``."""
        self.W_enc.data *= scaling_factor
        self.W_dec.data /= scaling_factor
        self.b_dec.data /= scaling_factor
        self.cfg.normalize_activations = "none"
