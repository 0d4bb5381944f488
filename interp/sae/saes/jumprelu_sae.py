"""``JumpReLUSAE``: features below their ``threshold`` are zero (Gemma Scope's SAEs).

    f = relu(h) * 1[h > threshold],  h = (x - b_dec) @ W_enc + b_enc

Example:
    >>> from interp.sae.saes.jumprelu_sae import JumpReLUSAE, JumpReLUSAEConfig
    >>> sae = JumpReLUSAE(JumpReLUSAEConfig(d_in=8, d_sae=32))
    >>> sae.threshold.shape
    torch.Size([32])
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.sae import SAE


@dataclass
class JumpReLUSAEConfig(SAEConfig):
    """A JumpReLU SAE's config."""

    architecture: str = ArchitectureName("jumprelu")


class JumpReLUSAE(SAE):
    """A JumpReLU SAE: a standard SAE's parameters and ``threshold [d_sae]``;
    ``fold_W_dec_norm`` scales the threshold with ``b_enc``."""
