"""SAELens's class-level API of an SAE: dicts (``from_dict``), files (``save_model``,
``load_from_disk``), the class of an architecture, and the tuple ``from_pretrained`` returned
before SAELens 6.

``save_model`` writes SAELens's folder (``cfg.json`` + ``sae_weights.safetensors``);
``load_from_disk`` reads it back as the architecture's class (any format ``SAE.load``
reads, in fact), or through a SAELens-style ``converter(path, device, cfg_overrides)``
returning ``(cfg_dict, state_dict)``.

Example:
    >>> import tempfile
    >>> from interp.sae import SAE, SAEConfig, TopKSAE
    >>> sae = SAE(SAEConfig(d_in=8, d_sae=32, architecture="topk", k=4,
    ...                     hook_name="blocks.0.hook_resid_post"))
    >>> folder = tempfile.mkdtemp()
    >>> weights, cfg_json = sae.save_model(folder)
    >>> weights.name, cfg_json.name
    ('sae_weights.safetensors', 'cfg.json')
    >>> again = TopKSAE.load_from_disk(folder)
    >>> type(again).__name__, torch.equal(again.W_enc, sae.W_enc)
    ('TopKSAE', True)
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from interp.sae.registry import get_sae_class

SAE_WEIGHTS_FILENAME, SAE_CFG_FILENAME = "sae_weights.safetensors", "cfg.json"
# SAELens's PretrainedSaeDiskLoader: (path, device, cfg_overrides) -> (cfg_dict, state_dict)
DiskLoader = Callable[..., tuple[dict[str, Any], dict[str, torch.Tensor]]]


class SAEFilesMixin:
    """Dicts, files and class look-ups for ``SAE`` (which supplies ``cfg`` and the weights)."""

    def get_name(self) -> str:
        """``sae_<model>_<hook>_<d_sae>``, SAELens's name for an SAE."""
        meta = self.cfg.metadata
        return f"sae_{meta.model_name}_{meta.hook_name}_{self.cfg.d_sae}"

    # ------------------------------------------------------------------ files
    def process_state_dict_for_saving(self, state_dict: dict[str, Any]) -> None:
        """Change ``state_dict`` in place before ``save_model`` writes it (a subclass hook)."""

    def process_state_dict_for_loading(self, state_dict: dict[str, Any]) -> None:
        """Change ``state_dict`` in place before a converter's weights are loaded."""

    def save_model(self, path: str | Path) -> tuple[Path, Path]:
        """Write ``sae_weights.safetensors`` and ``cfg.json`` (SAELens 6.x) into the folder
        ``path``; returns their paths."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        state = {name: t.detach().cpu().contiguous() for name, t in self.state_dict().items()}
        self.process_state_dict_for_saving(state)
        weights, cfg_path = folder / SAE_WEIGHTS_FILENAME, folder / SAE_CFG_FILENAME
        save_file(state, str(weights))
        cfg_path.write_text(json.dumps(self.cfg.to_dict(), indent=2))
        return weights, cfg_path

    @classmethod
    def load_from_disk(
        cls,
        path: str | Path,
        device: str | torch.device = "cpu",
        dtype: str | torch.dtype | None = None,
        converter: DiskLoader | None = None,
    ) -> Any:
        """The SAE saved in folder ``path`` as its architecture's class, which must be
        ``cls`` or a subclass. Without ``converter``, any format ``SAE.load`` reads."""
        if converter is None:
            from interp.sae.formats import load_sae_folder

            sae = load_sae_folder(Path(path), device=device, dtype=dtype)
            cls.get_sae_class_for_architecture(sae.cfg.architecture)
            return sae
        overrides = {"dtype": dtype} if dtype is not None else None
        cfg_dict, state_dict = converter(path, device, cfg_overrides=overrides)
        if dtype is not None:  # also when the converter leaves the overrides out
            cfg_dict = {**cfg_dict, "dtype": str(dtype).removeprefix("torch.")}
        return cls._from_cfg_and_state_dict(cfg_dict, state_dict, device)

    @classmethod
    def _from_cfg_and_state_dict(
        cls, cfg_dict: dict[str, Any], state_dict: dict[str, torch.Tensor], device: Any
    ) -> Any:
        """SAELens's loading: the SAE built on the meta device, then the weights assigned."""
        from interp.sae.config import SAEConfig
        from interp.sae.formats.saelens import saelens_fields
        from interp.utils.dtypes import parse_dtype

        fields = saelens_fields(cfg_dict)
        sae_cls = cls.get_sae_class_for_architecture(fields.get("architecture", "standard"))
        cfg = SAEConfig.from_dict(fields)
        wanted_device, cfg.device = str(device or cfg.device), "meta"
        sae = sae_cls(cfg)  # on the meta device: the weights come from state_dict
        sae.process_state_dict_for_loading(state_dict)
        sae.load_state_dict(state_dict, assign=True)
        return sae.to(dtype=parse_dtype(cfg.dtype, "SAE dtype"), device=wanted_device)

    @classmethod
    def load_from_pretrained(
        cls, path: str | Path, device: str = "cpu", dtype: str | None = None
    ) -> Any:
        """Deprecated in SAELens: ``load_from_disk``."""
        warnings.warn(
            "load_from_pretrained is deprecated: use load_from_disk.",
            DeprecationWarning,
            stacklevel=2,
        )
        return cls.load_from_disk(path, device=device, dtype=dtype)

    # ------------------------------------------------------------------ dicts
    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> Any:
        """A new SAE of ``config_dict``'s architecture (``cfg.to_dict()``'s form)."""
        from interp.sae.config import SAEConfig

        sae_cls = cls.get_sae_class_for_architecture(config_dict.get("architecture", "standard"))
        return sae_cls(SAEConfig.from_dict(config_dict))

    @classmethod
    def get_sae_class_for_architecture(cls, architecture: str) -> type:
        """The registered class of ``architecture``; a ``ValueError`` unless it is ``cls``
        or a subclass (``TopKSAE.from_dict`` of a standard config)."""
        sae_cls, _ = get_sae_class(architecture)
        if not issubclass(sae_cls, cls):
            raise ValueError(
                f"Loaded SAE is not of type {cls.__name__}. Use {sae_cls.__name__} instead."
            )
        return sae_cls

    @classmethod
    def get_sae_config_class_for_architecture(cls, architecture: str) -> type:  # noqa: ARG003
        """SAELens returns the base ``SAEConfig``; its ``from_dict`` picks the class."""
        from interp.sae.config import SAEConfig

        return SAEConfig

    # ------------------------------------ the (sae, cfg_dict, sparsity) of SAELens 5
    def __getitem__(self, index: int) -> Any:
        warnings.warn(
            "Indexing SAE objects is deprecated. SAE.from_pretrained() now returns only the "
            "SAE object. Use SAE.from_pretrained_with_cfg_and_sparsity() to get the config "
            "dict and sparsity as well.",
            DeprecationWarning,
            stacklevel=2,
        )
        if index in (0, 1, 2):
            return (self, self.cfg.to_dict(), None)[index]
        raise IndexError(f"SAE tuple index {index} out of range")

    def __iter__(self) -> Iterator[Any]:
        warnings.warn(
            "Unpacking SAE objects is deprecated. SAE.from_pretrained() now returns only the "
            "SAE object. Use SAE.from_pretrained_with_cfg_and_sparsity() to get the config "
            "dict and sparsity as well.",
            DeprecationWarning,
            stacklevel=2,
        )
        yield self
        yield self.cfg.to_dict()
        yield None

    def __len__(self) -> int:
        warnings.warn(
            "Getting length of SAE objects is deprecated. SAE.from_pretrained() now returns "
            "only the SAE object. Use SAE.from_pretrained_with_cfg_and_sparsity() to get "
            "the config dict and sparsity as well.",
            DeprecationWarning,
            stacklevel=2,
        )
        return 3

    def __bool__(self) -> bool:  # an SAE is true, not "of length 3"
        return True
