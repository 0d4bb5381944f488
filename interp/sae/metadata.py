"""``SAEMetadata``: how an SAE is used (model, hook, context...), SAELens 6.x's ``cfg.metadata``.

Attribute and dict access alike; a field never set reads as ``None``. An SAE config keeps
its hook, model and every other loader field here (``cfg.hook_name`` reads
``cfg.metadata.hook_name``), so what a SAELens script writes into ``sae.cfg.metadata`` is what
the SAE uses.

Example:
    >>> meta = SAEMetadata(hook_name="blocks.1.hook_resid_post", context_size=128)
    >>> meta.hook_name, meta["context_size"], meta.prepend_bos   # never set: None
    ('blocks.1.hook_resid_post', 128, None)
    >>> meta["prepend_bos"] = False
    >>> "prepend_bos" in meta, meta.get("dataset_path", "unknown")
    (True, 'unknown')
"""

from __future__ import annotations

import copy
from typing import Any

# The SAELens release whose API and cfg.json layout interp.sae follows; SAELens writes its
# own version into every config's metadata, and so do we (its loaders read it to tell the
# 6.x layout from the older flat one).
SAELENS_VERSION = "6.45.3"
VERSION_KEYS = ("sae_lens_version", "sae_lens_training_version")


class SAEMetadata:
    """Metadata of an SAE: any keyword, read as attributes or items; missing ones are ``None``."""

    def __init__(self, **kwargs: Any) -> None:
        self.sae_lens_version = kwargs.pop("sae_lens_version", SAELENS_VERSION)
        self.sae_lens_training_version = kwargs.pop("sae_lens_training_version", SAELENS_VERSION)
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # protocols (copy, pickle, numpy) are not metadata fields
            raise AttributeError(name)
        return None

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self.__dict__[key]

    def __contains__(self, key: object) -> bool:
        """Only fields that were set (a missing one reads as None but is not ``in``)."""
        return key in self.__dict__

    def get(self, key: str, default: Any = None) -> Any:
        return self.__dict__.get(key, default)

    def keys(self):  # noqa: ANN201 - dict views
        return self.__dict__.keys()

    def values(self):  # noqa: ANN201
        return self.__dict__.values()

    def items(self):  # noqa: ANN201
        return self.__dict__.items()

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SAEMetadata:
        return cls(**data)

    def __repr__(self) -> str:
        return f"SAEMetadata({self.__dict__})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SAEMetadata) and self.__dict__ == other.__dict__

    __hash__ = None  # mutable, like a dict

    def __deepcopy__(self, memo: dict[int, Any]) -> SAEMetadata:
        return SAEMetadata(**copy.deepcopy(self.__dict__, memo))

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
