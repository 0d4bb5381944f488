"""``TopKSAE``: only the ``k`` largest pre-activations of each input fire (Gao et al. 2024).

With ``rescale_acts_by_decoder_norm`` the ranking (and the features) are scaled by each
decoder row's norm, and ``decode`` divides it back out, as if the decoder were unit-norm.

Example:
    >>> from interp.sae.saes.topk_sae import TopKSAE, TopKSAEConfig
    >>> sae = TopKSAE(TopKSAEConfig(d_in=8, d_sae=32, k=4))
    >>> (sae.encode(torch.randn(3, 8)) > 0).sum(-1).le(4).all().item()
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from interp.sae.activations import TopK
from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.sae import SAE

__all__ = ["TopK", "TopKSAE", "TopKSAEConfig", "act_times_W_dec", "check_k"]


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
