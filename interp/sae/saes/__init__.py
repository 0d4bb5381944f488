"""SAELens's SAE classes under their module paths (``sae_lens.saes`` -> ``interp.sae.saes``),
registered by architecture: one implementation (``interp.sae.sae.SAE``) computes them all,
the classes give SAELens's names, configs and ``isinstance`` checks.

Example:
    >>> from interp.sae.saes import SAE, TopKSAE, TopKSAEConfig
    >>> meta = {"hook_name": "blocks.0.hook_resid_post"}
    >>> cfg = TopKSAEConfig(d_in=8, d_sae=32, k=4, metadata=meta)
    >>> sae = SAE.from_dict(cfg.to_dict())
    >>> isinstance(sae, TopKSAE), sae.cfg.metadata.hook_name
    (True, 'blocks.0.hook_resid_post')
"""

from interp.sae.registry import register_sae_class, register_sae_training_class
from interp.sae.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
from interp.sae.saes.gated_sae import (
    GatedSAE,
    GatedSAEConfig,
    GatedTrainingSAE,
    GatedTrainingSAEConfig,
)
from interp.sae.saes.jumprelu_sae import (
    JumpReLUSAE,
    JumpReLUSAEConfig,
    JumpReLUTrainingSAE,
    JumpReLUTrainingSAEConfig,
)
from interp.sae.saes.matryoshka_batchtopk_sae import (
    MatryoshkaBatchTopKTrainingSAE,
    MatryoshkaBatchTopKTrainingSAEConfig,
)
from interp.sae.saes.sae import SAE, SAEConfig, SAEMetadata, TrainingSAE, TrainingSAEConfig
from interp.sae.saes.standard_sae import (
    StandardSAE,
    StandardSAEConfig,
    StandardTrainingSAE,
    StandardTrainingSAEConfig,
)
from interp.sae.saes.topk_sae import (
    TopKSAE,
    TopKSAEConfig,
    TopKTrainingSAE,
    TopKTrainingSAEConfig,
)
from interp.sae.saes.transcoder import (
    JumpReLUSkipTranscoder,
    JumpReLUSkipTranscoderConfig,
    JumpReLUTranscoder,
    JumpReLUTranscoderConfig,
    SkipTranscoder,
    SkipTranscoderConfig,
    TopKSkipTranscoder,
    TopKSkipTranscoderConfig,
    TopKTranscoder,
    TopKTranscoderConfig,
    Transcoder,
    TranscoderConfig,
)

# SAELens registers its classes where the package is imported; so do we.
for _sae_class, _config_class in (
    (StandardSAE, StandardSAEConfig),
    (GatedSAE, GatedSAEConfig),
    (TopKSAE, TopKSAEConfig),
    (JumpReLUSAE, JumpReLUSAEConfig),
    (Transcoder, TranscoderConfig),
    (SkipTranscoder, SkipTranscoderConfig),
    (JumpReLUTranscoder, JumpReLUTranscoderConfig),
    (JumpReLUSkipTranscoder, JumpReLUSkipTranscoderConfig),
    (TopKTranscoder, TopKTranscoderConfig),
    (TopKSkipTranscoder, TopKSkipTranscoderConfig),
):
    register_sae_class(_config_class.architecture(), _sae_class, _config_class)
for _sae_class, _config_class in (
    (StandardTrainingSAE, StandardTrainingSAEConfig),
    (GatedTrainingSAE, GatedTrainingSAEConfig),
    (JumpReLUTrainingSAE, JumpReLUTrainingSAEConfig),
    (TopKTrainingSAE, TopKTrainingSAEConfig),
    (BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig),
    (MatryoshkaBatchTopKTrainingSAE, MatryoshkaBatchTopKTrainingSAEConfig),
):
    register_sae_training_class(_config_class.architecture(), _sae_class, _config_class)

# These register themselves ("temporal", "matching_pursuit"): their own classes, beside
# the one implementation.
from interp.sae.saes import matching_pursuit_sae, temporal_sae  # noqa: E402,F401

__all__ = [
    "SAE",
    "BatchTopKTrainingSAE",
    "BatchTopKTrainingSAEConfig",
    "GatedSAE",
    "GatedSAEConfig",
    "GatedTrainingSAE",
    "GatedTrainingSAEConfig",
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
    "SAEMetadata",
    "SkipTranscoder",
    "SkipTranscoderConfig",
    "StandardSAE",
    "StandardSAEConfig",
    "StandardTrainingSAE",
    "StandardTrainingSAEConfig",
    "TopKSAE",
    "TopKSAEConfig",
    "TopKSkipTranscoder",
    "TopKSkipTranscoderConfig",
    "TopKTrainingSAE",
    "TopKTrainingSAEConfig",
    "TopKTranscoder",
    "TopKTranscoderConfig",
    "TrainingSAE",
    "TrainingSAEConfig",
    "Transcoder",
    "TranscoderConfig",
]
