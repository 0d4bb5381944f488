"""``SAEConfig``: what an SAE is (SAELens 6.x's fields) and where it reads (its ``metadata``).

SAELens has one config class an architecture (``StandardSAEConfig``, ``TopKSAEConfig``...,
in ``interp.sae.saes``), each naming itself with ``architecture()``. Here ``SAEConfig`` is their
base and also builds them: ``SAEConfig(d_in=.., d_sae=.., architecture="topk", k=16)`` returns
a ``TopKSAEConfig``. ``cfg.architecture`` is the name and, called, returns it (SAELens's
``cfg.architecture()``).

The hook, model and every other loader field live in ``cfg.metadata`` (an ``SAEMetadata``,
as in SAELens); ``cfg.hook_name``, ``cfg.hook_name_out``, ``cfg.hook_head_index``,
``cfg.model_name`` and ``cfg.extra`` (the rest) read and write it, and are accepted as
keywords.

Example:
    >>> cfg = SAEConfig(d_in=8, d_sae=32, architecture="topk", k=4,
    ...                 hook_name="blocks.1.hook_resid_post", extra={"context_size": 64})
    >>> type(cfg).__name__, cfg.architecture(), cfg.architecture == "topk"
    ('TopKSAEConfig', 'topk', True)
    >>> cfg.metadata.hook_name, cfg.metadata.context_size, cfg.hook_layer
    ('blocks.1.hook_resid_post', 64, 1)
    >>> SAEConfig.from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, MutableMapping
from dataclasses import InitVar, dataclass, field
from typing import Any

# SAELens's ``sae_lens.config`` also holds its run configs and re-exports DTYPE_MAP.
from interp.sae.cache_config import CacheActivationsRunnerConfig, PretokenizeRunnerConfig  # noqa: F401
from interp.sae.constants import DTYPE_MAP  # noqa: F401
from interp.sae.metadata import VERSION_KEYS, SAEMetadata
from interp.sae.registry import SAE_CLASS_REGISTRY, get_sae_class
from interp.sae.runner_config import (  # noqa: F401
    T_TRAINING_SAE_CONFIG,
    LanguageModelSAERunnerConfig,
    LoggingConfig,
    SAETrainerConfig,
    default_cached_activations_path,
    json_dict,
    special_token,
    validate_seqpos,
)

# architecture -> (activation, is_transcoder, has_skip): the forms interp's one implementation
# computes (SAELens's names; the topk transcoders are sparsify's).
ARCHITECTURES: dict[str, tuple[str, bool, bool]] = {
    "standard": ("relu", False, False),
    "jumprelu": ("jumprelu", False, False),
    "topk": ("topk", False, False),
    "gated": ("gated", False, False),
    "transcoder": ("relu", True, False),
    "skip_transcoder": ("relu", True, True),
    "jumprelu_transcoder": ("jumprelu", True, False),
    "jumprelu_skip_transcoder": ("jumprelu", True, True),
    "topk_transcoder": ("topk", True, False),
    "topk_skip_transcoder": ("topk", True, True),
}
NORMALIZATIONS = ("none", "expected_average_only_in", "constant_norm_rescale", "layer_norm")
# SAELens's private names for these two (its tests import them).
_default_cached_activations_path = default_cached_activations_path
_validate_seqpos = validate_seqpos
_LAYER = re.compile(r"^blocks\.(\d+)\.")
# The metadata fields with their own attribute on the config; the rest is ``cfg.extra``.
CORE_METADATA = ("hook_name", "hook_name_out", "hook_head_index", "model_name")


class ArchitectureName(str):
    """An architecture's name that is also SAELens's ``cfg.architecture()`` (call it)."""

    def __call__(self) -> str:
        return str(self)


class ExtraMetadata(MutableMapping):
    """``cfg.extra``: the metadata fields other than the hook, the model and the versions."""

    def __init__(self, metadata: SAEMetadata) -> None:
        self._metadata = metadata

    def _keys(self) -> list[str]:
        hidden = set(CORE_METADATA) | set(VERSION_KEYS)
        return [key for key in self._metadata.keys() if key not in hidden]

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys():
            raise KeyError(key)
        return self._metadata[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._metadata[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self._keys():
            raise KeyError(key)
        del self._metadata[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass
class SAEConfig:
    """An SAE's shape, input handling and metadata; ``SAEConfig(architecture=...)`` builds the
    architecture's own config class (see the module's docstring)."""

    d_in: int
    d_sae: int
    dtype: str = "float32"
    device: str = "cpu"
    apply_b_dec_to_input: bool = True
    normalize_activations: str = "none"
    reshape_activations: str = "none"  # "hook_z": flatten [.., n_heads, d_head]
    metadata: SAEMetadata = field(default_factory=SAEMetadata)
    architecture: str = ArchitectureName("standard")
    # Metadata as keywords (``SAEConfig(hook_name=...)``), then views of cfg.metadata.
    hook_name: InitVar[str | None] = None
    hook_name_out: InitVar[str | None] = None  # transcoders: the hook their output replaces
    hook_head_index: InitVar[int | None] = None
    model_name: InitVar[str | None] = None
    extra: InitVar[dict[str, Any] | None] = None  # prepend_bos, context_size, ...

    def __new__(cls, *args: Any, **kwargs: Any) -> SAEConfig:
        if cls is SAEConfig and (args or kwargs):  # the base builds the architecture's class
            cls = config_class(kwargs.get("architecture", "standard"))
        return super().__new__(cls)

    def __post_init__(
        self,
        hook_name: str | None,
        hook_name_out: str | None,
        hook_head_index: int | None,
        model_name: str | None,
        extra: dict[str, Any] | None,
    ) -> None:
        own = type(self).__dataclass_fields__["architecture"].default
        if self.architecture != own and type(self) is not SAEConfig:
            raise ValueError(
                f"{type(self).__name__} is architecture {own!r}, not {self.architecture!r}; "
                f"use {config_class(self.architecture).__name__} (or SAEConfig(architecture=...))."
            )
        self.architecture = ArchitectureName(own)
        if isinstance(self.metadata, dict):
            self.metadata = SAEMetadata(**self.metadata)
        given = dict(extra or {})
        given.update(hook_name_out=hook_name_out, hook_head_index=hook_head_index)
        given.update(hook_name=hook_name or None, model_name=model_name)
        for key, value in given.items():
            if value is not None:
                self.metadata[key] = value
        self._validate()

    def _validate(self) -> None:
        if self.normalize_activations not in NORMALIZATIONS:
            raise ValueError(
                f"normalize_activations must be none, expected_average_only_in, layer_norm, or "
                f"constant_norm_rescale. Got normalize_activations="
                f"{self.normalize_activations!r}; use one of {list(NORMALIZATIONS)}."
            )
        if self.reshape_activations not in ("none", "hook_z"):
            raise ValueError(
                f"reshape_activations={self.reshape_activations!r}; use 'none' or 'hook_z'."
            )
        for name in ("d_in", "d_sae"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"SAE config {name}={value!r}; it must be a positive int.")

    # ------------------------------------------------------------- the architecture
    @property
    def _form(self) -> tuple[str, bool, bool]:
        return ARCHITECTURES.get(str(self.architecture), ("relu", False, False))

    @property
    def activation(self) -> str:
        """``relu``, ``jumprelu``, ``topk`` or ``gated``."""
        return self._form[0]

    @property
    def is_transcoder(self) -> bool:
        return self._form[1]

    @property
    def has_skip(self) -> bool:
        return self._form[2]

    @property
    def output_width(self) -> int:
        """``d_out`` for transcoders, else ``d_in``."""
        return getattr(self, "d_out", None) or self.d_in

    @property
    def output_hook(self) -> str:
        """The hook whose activation the SAE's output replaces when spliced."""
        return self.hook_name_out or self.hook_name

    @property
    def hook_layer(self) -> int | None:
        """The block index in ``hook_name`` (``blocks.3.hook_resid_post`` -> 3)."""
        match = _LAYER.match(self.hook_name)
        return int(match.group(1)) if match else None

    def metadata_dict(self) -> dict[str, Any]:
        """The metadata without SAELens's version fields."""
        return {k: v for k, v in self.metadata.items() if k not in VERSION_KEYS}

    # ------------------------------------------------------------------ dicts
    def to_dict(self) -> dict[str, Any]:
        """SAELens 6.x's ``cfg.json``: the fields, ``architecture`` and ``metadata``."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["architecture"] = str(self.architecture)
        out["metadata"] = self.metadata.to_dict()
        return out

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> SAEConfig:
        """A config from ``to_dict``'s form (or a flat one with ``hook_name``...): the class
        of its ``architecture``, which must be ``cls`` or a subclass; unknown keys ignored."""
        architecture = config_dict.get("architecture", cls.architecture)
        cfg_class = config_class(architecture)
        if not issubclass(cfg_class, cls):
            raise ValueError(
                f"SAE config class {cls} does not match dict config class {cfg_class} "
                f"(architecture {architecture!r}); use {cfg_class.__name__}.from_dict."
            )
        names = {f.name for f in dataclasses.fields(cfg_class) if f.init}
        if "metadata" not in config_dict:  # a flat config: its metadata at the top
            names |= set(CORE_METADATA)
        kwargs = {k: v for k, v in config_dict.items() if k in names and k != "architecture"}
        if "metadata" in config_dict:
            kwargs["metadata"] = SAEMetadata(**config_dict["metadata"])
        return cfg_class(**kwargs)


def _metadata_view(name: str, default: Any = None) -> property:
    def get(self: SAEConfig) -> Any:
        value = self.metadata.get(name)
        return default if value is None else value

    def set(self: SAEConfig, value: Any) -> None:
        self.metadata[name] = value

    return property(get, set, doc=f"``cfg.metadata.{name}``")


# The InitVars' class attributes become views of the metadata (the dataclass __init__ keeps
# their defaults).
SAEConfig.hook_name = _metadata_view("hook_name", "")
SAEConfig.hook_name_out = _metadata_view("hook_name_out")
SAEConfig.hook_head_index = _metadata_view("hook_head_index")
SAEConfig.model_name = _metadata_view("model_name")
SAEConfig.extra = property(
    lambda self: ExtraMetadata(self.metadata),
    lambda self, value: _replace_extra(self, value),
    doc="The metadata fields other than the hook, the model and the versions (live).",
)


def _replace_extra(cfg: SAEConfig, value: dict[str, Any]) -> None:
    for key in list(cfg.extra):
        del cfg.metadata[key]
    for key, item in value.items():
        cfg.metadata[key] = item


def config_class(architecture: str) -> type[SAEConfig]:
    """The config class registered for ``architecture``; a ``ValueError`` naming the known."""
    if architecture not in SAE_CLASS_REGISTRY:
        try:
            get_sae_class(architecture)
        except KeyError as error:
            raise ValueError(error.args[0]) from None
    return SAE_CLASS_REGISTRY[architecture][1]


def __getattr__(name: str) -> Any:
    """``HfDataset`` (SAELens's union of Hugging Face dataset types), importing ``datasets``
    only when asked for."""
    if name == "HfDataset":
        from datasets import Dataset, DatasetDict, IterableDataset, IterableDatasetDict

        return DatasetDict | Dataset | IterableDatasetDict | IterableDataset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
