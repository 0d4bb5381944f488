"""SAELens's ``sae_lens.saes.sae``: the base ``SAE``, ``SAEConfig`` and ``SAEMetadata``, and
the training base ``TrainingSAE``, ``TrainingSAEConfig``, ``TrainStepInput``/``Output``.

Example:
    >>> from interp.sae.saes.sae import SAE, SAEConfig, SAEMetadata
    >>> cfg = SAEConfig.from_dict({"architecture": "jumprelu", "d_in": 8, "d_sae": 16,
    ...                            "metadata": {"hook_name": "blocks.0.hook_resid_post"}})
    >>> type(SAE(cfg)).__name__, isinstance(cfg.metadata, SAEMetadata)
    ('JumpReLUSAE', True)
"""

from interp.sae.config import SAEConfig

# SAE.from_pretrained looks these up here, where SAELens's users (and tests) patch them.
from interp.sae.loading.pretrained_sae_loaders import (
    NAMED_PRETRAINED_SAE_LOADERS,
    get_conversion_loader_name,
)
from interp.sae.loading.pretrained_saes_directory import (
    get_config_overrides,
    get_norm_scaling_factor,
    get_pretrained_saes_directory,
    get_releases_for_repo_id,
    get_repo_id_and_folder_name,
)
from interp.sae.metadata import SAEMetadata
from interp.sae.sae import SAE, _disable_hooks
from interp.sae.training_sae import (
    T_TRAINING_SAE_CONFIG,
    TrainCoefficientConfig,
    TrainingSAE,
    TrainingSAEConfig,
    TrainStepInput,
    TrainStepOutput,
    mse_loss,
)

__all__ = [
    "NAMED_PRETRAINED_SAE_LOADERS",
    "SAE",
    "T_TRAINING_SAE_CONFIG",
    "SAEConfig",
    "SAEMetadata",
    "TrainCoefficientConfig",
    "TrainStepInput",
    "TrainStepOutput",
    "TrainingSAE",
    "TrainingSAEConfig",
    "_disable_hooks",
    "get_config_overrides",
    "get_conversion_loader_name",
    "get_norm_scaling_factor",
    "get_pretrained_saes_directory",
    "get_releases_for_repo_id",
    "get_repo_id_and_folder_name",
    "mse_loss",
]
