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

from interp.sae.config import ARCHITECTURES, SAEConfig
from interp.sae.formats import SAEFormatError
from interp.sae.metadata import SAELENS_VERSION, SAEMetadata
from interp.sae.registry import get_sae_class, register_sae_class, register_sae_training_class
from interp.sae.sae import SAE
from interp.sae.saes import (
    BatchTopKTrainingSAE,
    BatchTopKTrainingSAEConfig,
    GatedSAE,
    GatedSAEConfig,
    GatedTrainingSAE,
    GatedTrainingSAEConfig,
    JumpReLUSAE,
    JumpReLUSAEConfig,
    JumpReLUSkipTranscoder,
    JumpReLUSkipTranscoderConfig,
    JumpReLUTrainingSAE,
    JumpReLUTrainingSAEConfig,
    JumpReLUTranscoder,
    JumpReLUTranscoderConfig,
    MatryoshkaBatchTopKTrainingSAE,
    MatryoshkaBatchTopKTrainingSAEConfig,
    SkipTranscoder,
    SkipTranscoderConfig,
    StandardSAE,
    StandardSAEConfig,
    StandardTrainingSAE,
    StandardTrainingSAEConfig,
    TopKSAE,
    TopKSAEConfig,
    TopKSkipTranscoder,
    TopKSkipTranscoderConfig,
    TopKTrainingSAE,
    TopKTrainingSAEConfig,
    TopKTranscoder,
    TopKTranscoderConfig,
    TrainingSAE,
    TrainingSAEConfig,
    Transcoder,
    TranscoderConfig,
)
from interp.sae.saes.temporal_sae import TemporalSAE, TemporalSAEConfig
from interp.sae.shipped import list_saes, load_sae  # shipped names, then any folder
from interp.sae.splice import HookedSAETransformer, SAESplicingMixin
from interp.sae.training_sae import TrainStepInput, TrainStepOutput

# The SAELens release whose API this package follows (``sae_lens.__version__`` in ported
# scripts; written into every saved config's metadata as SAELens does).
__version__ = SAELENS_VERSION

__all__ = [
    "ARCHITECTURES",
    "SAE",
    "BatchTopKTrainingSAE",
    "BatchTopKTrainingSAEConfig",
    "GatedSAE",
    "GatedSAEConfig",
    "GatedTrainingSAE",
    "GatedTrainingSAEConfig",
    "HookedSAETransformer",
    "JumpReLUSAE",
    "JumpReLUSAEConfig",
    "JumpReLUSkipTranscoder",
    "JumpReLUSkipTranscoderConfig",
    "JumpReLUTrainingSAE",
    "JumpReLUTrainingSAEConfig",
    "JumpReLUTranscoder",
    "JumpReLUTranscoderConfig",
    "MatryoshkaBatchTopKTrainingSAE",
    "MatryoshkaBatchTopKTrainingSAEConfig",
    "SAEConfig",
    "SAEFormatError",
    "SAEMetadata",
    "SAESplicingMixin",
    "SkipTranscoder",
    "SkipTranscoderConfig",
    "StandardSAE",
    "StandardSAEConfig",
    "StandardTrainingSAE",
    "StandardTrainingSAEConfig",
    "TemporalSAE",
    "TemporalSAEConfig",
    "TopKSAE",
    "TopKSAEConfig",
    "TopKSkipTranscoder",
    "TopKSkipTranscoderConfig",
    "TopKTrainingSAE",
    "TopKTrainingSAEConfig",
    "TopKTranscoder",
    "TopKTranscoderConfig",
    "TrainStepInput",
    "TrainStepOutput",
    "TrainingSAE",
    "TrainingSAEConfig",
    "Transcoder",
    "TranscoderConfig",
    "get_sae_class",
    "list_saes",
    "load_sae",
    "register_sae_class",
    "register_sae_training_class",
]
