"""``GatedSAE``: a gate path decides which features fire, a magnitude path how much
(Rajamanoharan et al. 2024), sharing ``W_enc``.

    f = 1[x' @ W_enc + b_gate > 0] * relu(x' @ (W_enc * exp(r_mag)) + b_mag),  x' = x - b_dec

Example:
    >>> from interp.sae.saes.gated_sae import GatedSAE, GatedSAEConfig
    >>> sae = GatedSAE(GatedSAEConfig(d_in=8, d_sae=32))
    >>> sorted(name for name, _ in sae.named_parameters()), sae.b_enc is None
    (['W_dec', 'W_enc', 'b_dec', 'b_gate', 'b_mag', 'r_mag'], True)
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.sae import SAE


@dataclass
class GatedSAEConfig(SAEConfig):
    """A gated SAE's config."""

    architecture: str = ArchitectureName("gated")


class GatedSAE(SAE):
    """A gated SAE: ``W_enc``, ``b_gate``, ``r_mag``, ``b_mag``, ``W_dec``, ``b_dec`` (no
    ``b_enc``: it is ``None``, as in SAELens)."""
