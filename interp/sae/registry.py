"""The architecture registry, as SAELens has it: ``architecture -> (SAE class, config class)``.

``SAE.from_dict``, ``SAEConfig.from_dict``, ``SAE(cfg)`` and the loaders pick the class of a
config's ``architecture`` here; ``register_sae_class`` adds one of your own.

Example:
    >>> from interp.sae.registry import get_sae_class
    >>> sae_class, config_class = get_sae_class("jumprelu")
    >>> sae_class.__name__, config_class.__name__
    ('JumpReLUSAE', 'JumpReLUSAEConfig')
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from interp.sae.config import SAEConfig
    from interp.sae.sae import SAE

SAE_CLASS_REGISTRY: dict[str, tuple[type[SAE], type[SAEConfig]]] = {}
# SAELens's training classes (``TrainingSAE`` subclasses) register here; interp trains its
# SAEs with interp.sae.train instead, so none of its own are registered.
SAE_TRAINING_CLASS_REGISTRY: dict[str, tuple[type, type]] = {}


def register_sae_class(
    architecture: str, sae_class: type[SAE], sae_config_class: type[SAEConfig]
) -> None:
    """Make ``architecture`` (a config's ``architecture()``) build ``sae_class``."""
    if architecture in SAE_CLASS_REGISTRY:
        raise ValueError(f"SAE class for architecture {architecture} already registered.")
    SAE_CLASS_REGISTRY[architecture] = (sae_class, sae_config_class)


def register_sae_training_class(
    architecture: str, sae_training_class: type, sae_training_config_class: type
) -> None:
    """Record a training SAE class (SAELens's name; interp's trainer does not read these)."""
    if architecture in SAE_TRAINING_CLASS_REGISTRY:
        raise ValueError(f"SAE training class for architecture {architecture} already registered.")
    SAE_TRAINING_CLASS_REGISTRY[architecture] = (sae_training_class, sae_training_config_class)


def get_sae_class(architecture: str) -> tuple[type[SAE], type[SAEConfig]]:
    """The (SAE class, config class) of ``architecture``; a ``KeyError`` naming the known ones."""
    try:
        return SAE_CLASS_REGISTRY[architecture]
    except KeyError:
        raise KeyError(_unknown(architecture, SAE_CLASS_REGISTRY)) from None


def get_sae_training_class(architecture: str) -> tuple[type, type]:
    try:
        return SAE_TRAINING_CLASS_REGISTRY[architecture]
    except KeyError:
        raise KeyError(
            f"No SAE training class is registered for {architecture!r} (interp trains SAEs "
            "with interp.sae.train, not SAELens's training classes); "
            f"registered: {sorted(SAE_TRAINING_CLASS_REGISTRY)}."
        ) from None


def _unknown(architecture: str, registry: dict) -> str:
    known = sorted(registry)
    close = difflib.get_close_matches(str(architecture), known, n=3)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (
        f"Unknown SAE architecture {architecture!r}; registered: {known}.{hint} "
        "Register your own with register_sae_class(architecture, sae_class, config_class)."
    )
