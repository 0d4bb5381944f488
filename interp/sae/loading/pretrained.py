"""``SAE.from_pretrained``: a SAELens release and SAE id (``"gpt2-small-res-jb"``,
``"blocks.8.hook_resid_pre"``) through SAELens's release directory and loaders, and interp's own
forms: ``hf://owner/repo[/folder][@revision]``, a Hugging Face repository id with a folder, a
local folder, a shipped SAE's name. Files are read from the Hugging Face cache first, so a
cached SAE loads offline.

Example:
    >>> sae = load_pretrained("shakespeare-char-resid-l1")   # shipped: no hub
    >>> sae.cfg.hook_name
    'blocks.1.hook_resid_post'
    >>> sae = load_pretrained(  # needs the hub once  # doctest: +SKIP
    ...     "gpt2-small-res-jb", "blocks.8.hook_resid_pre")
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.sae.loading import pretrained_sae_loaders as loaders
from interp.sae.loading.config_dicts import (
    fold_activation_norm_scaling_factor,
    handle_config_defaulting,
    sae_from_config_dict,
)
from interp.sae.loading.pretrained_saes_directory import (
    unknown_release_message,
    unknown_sae_id_message,
)
from interp.sae.sae import SAE, dtype_to_str, str_to_dtype

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _lookups() -> Any:
    """The module of SAELens's ``SAE`` (``sae_lens.saes.sae``, here ``interp.sae.saes.sae``),
    whose names (the release directory, the loaders) SAELens's users and tests patch: read
    through it at call time, so that a patch there is what loads."""
    from interp.sae.saes import sae as saes_module

    return saes_module


def _repo_warning(release: str) -> None:
    matching = _lookups().get_releases_for_repo_id(release)
    if matching:
        warnings.warn(
            f"You are loading an SAE using the HuggingFace repo_id '{release}' directly. "
            f"This repo is registered in the official pretrained SAEs list with release "
            f"name(s): {matching}. For better compatibility and to access additional "
            f"metadata, consider loading with: SAE.from_pretrained(release='{matching[0]}', "
            "sae_id='<sae_id>').",
            UserWarning,
            stacklevel=4,
        )


def from_pretrained_with_cfg_and_sparsity(
    release: str,
    sae_id: str,
    device: str = "cpu",
    dtype: str = "float32",
    force_download: bool = False,
    converter: loaders.PretrainedSaeHuggingfaceLoader | None = None,
) -> tuple[SAE, dict[str, Any], Tensor | None]:
    """SAELens's ``SAE.from_pretrained_with_cfg_and_sparsity``: ``(sae, cfg_dict,
    log_sparsity)`` for ``sae_id`` of ``release`` (or of a repository id, read as a SAELens
    folder). ``converter`` replaces the release's loader."""
    lookups = _lookups()
    directory = lookups.get_pretrained_saes_directory()
    registered_as = release
    if release not in directory:
        if "/" not in release:
            raise ValueError(unknown_release_message(release))
        _repo_warning(release)
        # A repository a release registers is read with that release's loader (SAELens
        # reads every repository id as its own format).
        registered_as = next(iter(lookups.get_releases_for_repo_id(release)), release)
    elif sae_id not in directory[release].saes_map:
        raise ValueError(unknown_sae_id_message(release, sae_id))
    loader = (
        converter
        or lookups.NAMED_PRETRAINED_SAE_LOADERS[lookups.get_conversion_loader_name(registered_as)]
    )
    repo_id, folder_name = lookups.get_repo_id_and_folder_name(release, sae_id)
    overrides = lookups.get_config_overrides(release, sae_id)
    overrides["device"] = str(device)
    overrides["dtype"] = dtype_to_str(str_to_dtype(dtype))
    cfg_dict, state_dict, log_sparsity = loader(
        repo_id=repo_id,
        folder_name=folder_name,
        device=str(device),
        force_download=force_download,
        cfg_overrides=overrides,
    )
    cfg_dict = handle_config_defaulting(cfg_dict)
    source = f"hf://{repo_id}/{folder_name}"
    sae = sae_from_config_dict(cfg_dict, state_dict, source, dtype=dtype)
    if cfg_dict.get("normalize_activations") == "expected_average_only_in":
        factor = lookups.get_norm_scaling_factor(release, sae_id)
        if factor is not None:
            fold_activation_norm_scaling_factor(sae, factor)
            cfg_dict["normalize_activations"] = "none"
        else:
            warnings.warn(
                f"norm_scaling_factor not found for {release} and {sae_id}, but "
                "normalize_activations is 'expected_average_only_in'. Skipping normalization "
                "folding.",
                stacklevel=3,
            )
    return sae.to(device=device), cfg_dict, log_sparsity


def _hf_address(text: str) -> tuple[str, str | None, str | None]:
    """``hf://owner/repo[/folder][@revision]`` -> (repo_id, folder, revision)."""
    body, _, revision = text.removeprefix("hf://").partition("@")
    parts = body.strip("/").split("/")
    if len(parts) < 2 or not all(parts[:2]):
        raise ValueError(f"{text!r}: expected hf://owner/repo[/folder][@revision].")
    folder = "/".join(parts[2:]) or None
    return f"{parts[0]}/{parts[1]}", folder, revision or None


def load_pretrained(
    release: str | Path,
    sae_id: str | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    force_download: bool = False,
    **kw: Any,
) -> SAE:
    """``SAE.from_pretrained``: a SAELens release + SAE id, ``hf://owner/repo[/folder]``, a
    repository id + folder (any format interp reads, detected), a folder, or a shipped name.
    ``kw``: ``converter`` (releases), ``subfolder``/``revision``/``cache_dir`` (repository
    ids), config ``overrides`` (folders and repositories)."""
    text = str(release)
    directory = _lookups().get_pretrained_saes_directory()
    if text in directory:
        if sae_id is None:
            ids = list(directory[text].saes_map)[:5]
            raise ValueError(f"Release {text!r} needs an sae_id, e.g. one of {ids}.")
        sae, _, _ = from_pretrained_with_cfg_and_sparsity(
            text,
            sae_id,
            device=str(device or "cpu"),
            dtype=dtype or "float32",
            force_download=force_download,
            converter=kw.pop("converter", None),
        )
        return sae
    from interp.sae.formats import load_from_hub
    from interp.sae.shipped import list_saes, load_sae

    subfolder = kw.pop("subfolder", None)
    if text.startswith("hf://"):
        repo_id, folder, revision = _hf_address(text)
        folder = "/".join(part for part in (folder, sae_id or subfolder) if part) or None
        kw.setdefault("revision", revision)
        return load_from_hub(repo_id, folder, device=device, dtype=dtype, **kw)
    if Path(text).exists() or text in list_saes():
        return load_sae(text, device=device, dtype=dtype, **kw)
    if _REPO_ID.match(text):
        if _lookups().get_releases_for_repo_id(text) and sae_id is not None and not kw:
            sae, _, _ = from_pretrained_with_cfg_and_sparsity(
                text, sae_id, device=str(device or "cpu"), dtype=dtype or "float32",
                force_download=force_download,
            )  # fmt: skip
            return sae
        _repo_warning(text)
        return load_from_hub(text, sae_id or subfolder, device=device, dtype=dtype, **kw)
    raise ValueError(unknown_release_message(text))
