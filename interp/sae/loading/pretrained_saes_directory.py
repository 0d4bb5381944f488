"""SAELens's release directory: which Hugging Face repository and folder hold each SAE of a
release (``gpt2-small-res-jb`` / ``blocks.8.hook_resid_pre``), its model, its loader, its
config overrides and Neuronpedia id. SAELens's ``sae_lens.loading.pretrained_saes_directory``.

The data is ``pretrained_saes.json``, generated from SAELens's MIT-licensed
``pretrained_saes.yaml`` by ``python3 -m interp.sae.loading.make_releases_table`` (the file
records the SAELens version and licence).

Example:
    >>> lookup = get_pretrained_saes_directory()["gpt2-small-res-jb"]
    >>> lookup.repo_id, lookup.model, lookup.saes_map["blocks.8.hook_resid_pre"]
    ('jbloom/GPT2-Small-SAEs-Reformatted', 'gpt2-small', 'blocks.8.hook_resid_pre')
    >>> get_repo_id_and_folder_name("gpt2-small-res-jb", "blocks.8.hook_resid_pre")
    ('jbloom/GPT2-Small-SAEs-Reformatted', 'blocks.8.hook_resid_pre')
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("pretrained_saes.json")


@dataclass
class PretrainedSAELookup:
    """One release: SAELens's fields (``saes_map``: SAE id -> folder in ``repo_id``)."""

    release: str
    repo_id: str
    model: str
    conversion_func: str | None
    saes_map: dict[str, str]  # id -> path
    expected_var_explained: dict[str, float]
    expected_l0: dict[str, float]
    neuronpedia_id: dict[str, str]
    norm_scaling_factor: dict[str, float]
    config_overrides: dict[str, Any] | None


def _lookup(release: str, entry: dict[str, Any], columns: list[str]) -> PretrainedSAELookup:
    lookup = PretrainedSAELookup(
        release=release,
        repo_id=entry["repo_id"],
        model=entry["model"],
        conversion_func=entry.get("conversion_func"),
        saes_map={},
        expected_var_explained={},
        expected_l0={},
        neuronpedia_id={},
        norm_scaling_factor={},
        config_overrides=entry.get("config_overrides"),
    )
    for row in entry["saes"]:
        sae = dict(zip(columns, row, strict=True))
        sae_id = sae["id"]
        lookup.saes_map[sae_id] = sae["path"] if sae["path"] is not None else sae_id
        # SAELens's defaults for what the YAML leaves out
        var = sae["variance_explained"]
        lookup.expected_var_explained[sae_id] = 1.00 if var is None else var
        lookup.expected_l0[sae_id] = 0.00 if sae["l0"] is None else sae["l0"]
        lookup.neuronpedia_id[sae_id] = sae["neuronpedia"]
        if sae["norm_scaling_factor"] is not None:
            lookup.norm_scaling_factor[sae_id] = sae["norm_scaling_factor"]
    return lookup


@cache
def get_pretrained_saes_directory() -> dict[str, PretrainedSAELookup]:
    """Every release, by name (SAELens's function; the same lookups)."""
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    columns = data["_source"]["sae_columns"]
    return {
        release: _lookup(release, entry, columns) for release, entry in data["releases"].items()
    }


def directory_source() -> dict[str, Any]:
    """Where the table came from: SAELens's version, tag, the YAML's sha256, the licence."""
    return json.loads(TABLE.read_text(encoding="utf-8"))["_source"]


def get_norm_scaling_factor(release: str, sae_id: str) -> float | None:
    """The release's input norm scaling factor for ``sae_id`` (None when it has none)."""
    sae_info = get_pretrained_saes_directory().get(release)
    if sae_info is None:
        return None
    return sae_info.norm_scaling_factor.get(sae_id)


def get_repo_id_and_folder_name(release: str, sae_id: str) -> tuple[str, str]:
    """``(repo_id, folder)`` of ``sae_id`` in ``release``; an unknown release is taken as a
    repository id (``(release, sae_id)``), as SAELens does."""
    sae_info = get_pretrained_saes_directory().get(release)
    if sae_info is None:
        return release, sae_id
    if sae_id not in sae_info.saes_map:
        raise ValueError(unknown_sae_id_message(release, sae_id))
    return sae_info.repo_id, sae_info.saes_map[sae_id]


def get_config_overrides(release: str, sae_id: str) -> dict[str, Any]:
    """The release's config overrides, plus the SAE's ``neuronpedia_id``."""
    sae_info = get_pretrained_saes_directory().get(release)
    overrides: dict[str, Any] = {}
    if sae_info is not None:
        overrides = {**(sae_info.config_overrides or {})}
        if sae_id in sae_info.neuronpedia_id:
            overrides["neuronpedia_id"] = sae_info.neuronpedia_id[sae_id]
    return overrides


def get_releases_for_repo_id(repo_id: str) -> list[str]:
    """The releases stored in Hugging Face repository ``repo_id``."""
    return [
        release
        for release, lookup in get_pretrained_saes_directory().items()
        if lookup.repo_id == repo_id
    ]


def _closest(word: str, names: list[str], n: int) -> list[str]:
    close = difflib.get_close_matches(word, names, n=n, cutoff=0.0)
    return close or names[:n]


def unknown_release_message(release: str) -> str:
    """An unknown release: the known releases, closest first.

    Example:
        >>> print(unknown_release_message("gpt2-small-res-jbb")[:80])
        Release 'gpt2-small-res-jbb' is not in SAELens's release directory; did you mean
    """
    names = sorted(get_pretrained_saes_directory())
    close = _closest(release, names, 5)
    return (
        f"Release {release!r} is not in SAELens's release directory; did you mean "
        f"{close[0]!r}? Closest releases: {close}. All {len(names)} releases: "
        "interp.sae.loading.pretrained_saes_directory.get_pretrained_saes_directory(). "
        "A Hugging Face repository id (owner/name), an hf://owner/name[/folder] address, a "
        "local folder or a shipped SAE name (interp.list_saes()) load too."
    )


def unknown_sae_id_message(release: str, sae_id: str) -> str:
    """An unknown SAE id in a known release: its closest ids."""
    ids = list(get_pretrained_saes_directory()[release].saes_map)
    close = _closest(sae_id, ids, 5)
    return (
        f"ID {sae_id!r} not found in release {release!r}; did you mean {close[0]!r}? "
        f"Closest IDs: {close} ({len(ids)} in the release: "
        f"get_pretrained_saes_directory()[{release!r}].saes_map)."
    )
