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
# SAELens's training classes (``TrainingSAE`` subclasses, interp.sae.saes.*) register here.
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
    """Make ``architecture`` build ``sae_training_class`` in ``TrainingSAE.from_dict``."""
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
            f"No SAE training class is registered for {architecture!r}; registered: "
            f"{sorted(SAE_TRAINING_CLASS_REGISTRY)}. Register your own with "
            "register_sae_training_class(architecture, sae_class, config_class)."
        ) from None


def _unknown(architecture: str, registry: dict) -> str:
    known = sorted(registry)
    close = difflib.get_close_matches(str(architecture), known, n=3)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (
        f"Unknown SAE architecture {architecture!r}; registered: {known}.{hint} "
        "Register your own with register_sae_class(architecture, sae_class, config_class)."
    )
