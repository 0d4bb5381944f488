"""circuit-tracer's ``utils.hf_utils``: files and transcoders from the Hugging Face hub.

``download_hf_uris`` first checks each repository (a gated one needs a token: without one
it stops before downloading, with ``PermissionError``), then downloads every
``hf://owner/repo/path/to/file[?revision=...]`` and maps each URI to its local path.
``load_transcoder_from_hub`` reads a transcoder repository (``config.yaml`` + files) with
``interp.circuits.load_transcoders`` (from the cache once downloaded).

Example:
    >>> uri = "hf://mntss/transcoder-Llama-3.2-1B/layer_0.safetensors"
    >>> download_hf_uris([uri])  # needs the hub  # doctest: +SKIP
    {'hf://mntss/...': '/root/.cache/huggingface/hub/.../layer_0.safetensors'}
    >>> load_transcoder_from_hub("mntss/transcoder-Llama-3.2-1B")  # needs the hub  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import yaml
from huggingface_hub import get_token, hf_api, hf_hub_download

from interp.circuits.cross_layer import CrossLayerTranscoder
from interp.circuits.transcoders import (
    _LEGACY_HUB_NAMES,
    HubRef,
    TranscoderSet,
    hub_folder,
    load_transcoders,
)

__all__ = ["download_hf_uris", "load_transcoder_from_hub"]


def _file_ref(uri: str) -> HubRef:
    if not uri.startswith("hf://"):
        raise ValueError(f"{uri!r} is not a hub URI: expected hf://owner/repo/path/to/file.")
    ref = HubRef.parse(uri)
    if ref.subfolder is None:
        raise ValueError(f"{uri!r} names a repository but no file in it.")
    return ref


def download_hf_uris(uris: Iterable[str]) -> dict[str, str]:
    """``{uri: local path}`` for each ``hf://`` file URI, after checking access to each
    repository (``PermissionError`` for a gated one without a token; the hub's
    ``RepositoryNotFoundError`` / ``GatedRepoError`` pass through)."""
    refs = {uri: _file_ref(uri) for uri in uris}
    if not refs:
        return {}
    token = get_token()
    for repo_id in sorted({ref.repo_id for ref in refs.values()}):
        if hf_api.repo_info(repo_id=repo_id, token=token).gated is not False and token is None:
            raise PermissionError(
                f"{repo_id} is a gated repository: accept its terms on the hub and log in "
                "(huggingface-cli login, or set HF_TOKEN) to download from it."
            )
    return {
        uri: hf_hub_download(
            repo_id=ref.repo_id, filename=ref.subfolder, revision=ref.revision, token=token
        )
        for uri, ref in refs.items()
    }


def load_transcoder_from_hub(
    hf_ref: str,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    lazy_encoder: bool = False,
    lazy_decoder: bool = True,
    cache_dir: str | None = None,
    use_cache: bool = True,
) -> tuple[TranscoderSet | CrossLayerTranscoder, dict[str, Any]]:
    """(transcoders, config) of a hub repository holding circuit-tracer's transcoder folder
    (``owner/repo[/subfolder][@revision]``, ``hf://...``, or ``"gemma"`` / ``"llama"``).

    The weights are read whole (``lazy_*`` are accepted for circuit-tracer's scripts); the
    Hugging Face cache stands in for circuit-tracer's own cache (``cache_dir`` and
    ``use_cache`` are accepted and not used)."""
    ref = HubRef.parse(_LEGACY_HUB_NAMES.get(hf_ref, hf_ref))
    folder = hub_folder(ref)
    config = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    config.update(repo_id=ref.repo_id, revision=ref.revision, subfolder=ref.subfolder)
    config["scan"] = ref.scan
    transcoders = load_transcoders(str(folder), dtype=dtype)
    transcoders.scan = ref.scan
    if device is not None:
        transcoders.to(device)
    return transcoders, config
