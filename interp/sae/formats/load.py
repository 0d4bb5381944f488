"""Loading any SAE folder: its format detected from its files, then the format's reader;
and fetching a folder from the Hugging Face hub (offline when it is cached).

Example:
    >>> import tempfile, numpy as np
    >>> folder = Path(tempfile.mkdtemp(),
    ...               "gemma-scope-2b-pt-res/layer_3/width_16k/average_l0_59")
    >>> folder.mkdir(parents=True)   # a tiny stand-in for the hub's folder: d_in 8, d_sae 32
    >>> np.savez(folder / "params.npz", W_enc=np.zeros((8, 32), "f4"),
    ...          W_dec=np.zeros((32, 8), "f4"), b_enc=np.zeros(32, "f4"),
    ...          b_dec=np.zeros(8, "f4"), threshold=np.zeros(32, "f4"))
    >>> detect_format(folder)   # from the files it holds: params.npz
    'gemma_scope_1'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from interp.sae.formats.files import SAEFormatError
from interp.sae.formats.gemma_scope import load_gemma_scope_1, load_gemma_scope_2
from interp.sae.formats.llama_scope import load_llama_scope
from interp.sae.formats.saelens import SAELENS_CFG, SAELENS_WEIGHTS, load_saelens
from interp.sae.formats.sparsify import load_sparsify
from interp.sae.sae import SAE


def detect_format(folder: Path) -> str:
    """``saelens``, ``gemma_scope_1``, ``gemma_scope_2``, ``sparsify`` or ``llama_scope``."""
    if not folder.is_dir():
        raise SAEFormatError(f"{folder}: no such folder.")
    has = {path.name for path in folder.iterdir()}
    if SAELENS_CFG in has and SAELENS_WEIGHTS in has:
        return "saelens"
    if "params.npz" in has:
        return "gemma_scope_1"
    if "params.safetensors" in has:
        return "gemma_scope_2"
    if "cfg.json" in has and "sae.safetensors" in has:
        return "sparsify"
    if "hyperparams.json" in has:
        return "llama_scope"
    raise SAEFormatError(
        f"{folder}: no SAE found (it holds {sorted(has)[:10]}); expected cfg.json + "
        "sae_weights.safetensors (SAELens), params.npz (Gemma Scope), params.safetensors "
        "(Gemma Scope 2), cfg.json + sae.safetensors (sparsify) or hyperparams.json + "
        "checkpoints/final.safetensors (Llama Scope)."
    )


LOADERS = {
    "saelens": load_saelens,
    "gemma_scope_1": load_gemma_scope_1,
    "gemma_scope_2": load_gemma_scope_2,
    "sparsify": load_sparsify,
    "llama_scope": load_llama_scope,
}


def load_sae_folder(
    path: str | Path,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    **overrides: Any,
) -> SAE:
    """Load the SAE in folder ``path``, whatever its format (see ``interp.sae.formats``'s table).

    ``overrides`` set config fields the files lack or get wrong (``hook_name=...``).

    Example:
        >>> import tempfile, numpy as np
        >>> folder = Path(tempfile.mkdtemp(),
        ...               "gemma-scope-2b-pt-res/layer_3/width_16k/average_l0_59")
        >>> folder.mkdir(parents=True)   # a tiny stand-in: d_in 8, d_sae 32
        >>> np.savez(folder / "params.npz", W_enc=np.zeros((8, 32), "f4"),
        ...          W_dec=np.zeros((32, 8), "f4"), b_enc=np.zeros(32, "f4"),
        ...          b_dec=np.zeros(8, "f4"), threshold=np.zeros(32, "f4"))
        >>> sae = load_sae_folder(folder)
        >>> sae.cfg.hook_name
        'blocks.3.hook_resid_post'
    """
    folder = Path(path)
    return LOADERS[detect_format(folder)](folder, device=device, dtype=dtype, **overrides)


def load_from_hub(
    repo_id: str,
    subfolder: str | None = None,
    device: str | torch.device | None = None,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    **overrides: Any,
) -> SAE:
    """Fetch ``repo_id``'s ``subfolder`` from the Hugging Face hub (only the cache when it is
    already there, so it works offline) and load it with ``load_sae``."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    patterns = [f"{subfolder.strip('/')}/*", f"{subfolder.strip('/')}/checkpoints/*"]
    patterns = patterns if subfolder else None
    kwargs = {"repo_id": repo_id, "revision": revision, "allow_patterns": patterns}
    kwargs["cache_dir"] = cache_dir
    try:
        root = snapshot_download(**kwargs, local_files_only=True)
        folder = Path(root) / (subfolder or "")
        detect_format(folder)
    except (LocalEntryNotFoundError, SAEFormatError):
        root = snapshot_download(**kwargs)
    return load_sae_folder(Path(root) / (subfolder or ""), device=device, **overrides)
