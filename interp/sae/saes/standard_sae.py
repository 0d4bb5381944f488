"""``StandardSAE``: a ReLU sparse autoencoder, ``relu((x - b_dec) @ W_enc + b_enc)``.

Example:
    >>> from interp.sae.saes.standard_sae import StandardSAE, StandardSAEConfig
    >>> sae = StandardSAE(StandardSAEConfig(d_in=8, d_sae=32))
    >>> sae.cfg.architecture(), sorted(name for name, _ in sae.named_parameters())
    ('standard', ['W_dec', 'W_enc', 'b_dec', 'b_enc'])
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.sae import SAE


@dataclass
class StandardSAEConfig(SAEConfig):
    """A standard (ReLU) SAE's config."""

    architecture: str = ArchitectureName("standard")


class StandardSAE(SAE):
    """A ReLU SAE: ``W_enc``, ``b_enc``, ``W_dec``, ``b_dec`` (computed by ``SAE``)."""
