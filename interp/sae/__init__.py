"""Sparse autoencoders: the ``SAE`` module, its format readers, and splicing into models.

Example:
    >>> from interp.sae import SAE, HookedSAETransformer
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")   # shipped; or SAE.load(folder):
    >>> # SAELens, Gemma Scope, sparsify, Llama Scope
    >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
    >>> tokens = model.to_tokens("ROMEO:")
    >>> logits, cache = model.run_with_cache_with_saes(tokens, saes=[sae])
    >>> cache[f"{sae.cfg.hook_name}.hook_sae_acts_post"].shape   # [batch, pos, d_sae]
    torch.Size([1, 6, 1024])
"""

from interp.sae.formats import SAEFormatError
from interp.sae.sae import ARCHITECTURES, SAE, SAEConfig
from interp.sae.shipped import list_saes, load_sae  # shipped names, then any folder
from interp.sae.splice import HookedSAETransformer, SAESplicingMixin

__all__ = [
    "ARCHITECTURES",
    "SAE",
    "HookedSAETransformer",
    "SAEConfig",
    "SAEFormatError",
    "SAESplicingMixin",
    "list_saes",
    "load_sae",
]
