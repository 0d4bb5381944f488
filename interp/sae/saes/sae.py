"""SAELens's ``sae_lens.saes.sae``: the base ``SAE``, ``SAEConfig`` and ``SAEMetadata``.

Example:
    >>> from interp.sae.saes.sae import SAE, SAEConfig, SAEMetadata
    >>> cfg = SAEConfig.from_dict({"architecture": "jumprelu", "d_in": 8, "d_sae": 16,
    ...                            "metadata": {"hook_name": "blocks.0.hook_resid_post"}})
    >>> type(SAE(cfg)).__name__, isinstance(cfg.metadata, SAEMetadata)
    ('JumpReLUSAE', True)
"""

from interp.sae.config import SAEConfig
from interp.sae.metadata import SAEMetadata
from interp.sae.sae import SAE, _disable_hooks

__all__ = ["SAE", "SAEConfig", "SAEMetadata", "_disable_hooks"]
