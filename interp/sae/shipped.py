"""SAEs shipped inside the package (``interp/shipped/saes/<name>/``, SAELens's folder format
with a MODEL_CARD.md), loadable by name offline.

Example:
    >>> interp.list_saes()
    ['shakespeare-char-resid-l1']
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> sae.cfg.model_name, sae.cfg.hook_name, sae.cfg.d_sae
    ('shakespeare-char', 'blocks.1.hook_resid_post', 1024)
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from interp.sae import formats
from interp.sae.sae import SAE


def _saes_folder() -> Path:
    return Path(str(resources.files("interp.shipped"))) / "saes"


def list_saes() -> list[str]:
    """The names of the SAEs shipped with interp, sorted.

    Example:
        >>> interp.list_saes()
        ['shakespeare-char-resid-l1']
    """
    folder = _saes_folder()
    if not folder.is_dir():
        return []
    return sorted(entry.name for entry in folder.iterdir() if (entry / "cfg.json").is_file())


def sae_card(name: str) -> str:
    """The text of a shipped SAE's MODEL_CARD.md (training and its figures).

    Example:
        >>> print(interp.sae.shipped.sae_card("shakespeare-char-resid-l1"))
        # shakespeare-char-resid-l1
        <BLANKLINE>
        A TopK sparse autoencoder on the residual stream of the shipped ...
    """
    return (_sae_folder(name) / "MODEL_CARD.md").read_text(encoding="utf-8")


def _sae_folder(name: str) -> Path:
    names = list_saes()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"No shipped SAE named {name!r}; {hint}the shipped SAEs are {names}.")
    return _saes_folder() / name


def load_sae(
    name_or_path: str | Path,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    **overrides: Any,
) -> SAE:
    """A shipped SAE by name, or an SAE folder in any supported format (SAELens, Gemma
    Scope 1/2, sparsify, Llama Scope; see ``interp.sae.formats.load_sae_folder``).

    Example:
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> sae.cfg.hook_name
        'blocks.1.hook_resid_post'
    """
    path = Path(name_or_path)
    if not path.exists() and str(name_or_path) in list_saes():
        path = _sae_folder(str(name_or_path))
    elif not path.exists() and len(path.parts) == 1:
        close = difflib.get_close_matches(str(name_or_path), list_saes(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise formats.SAEFormatError(
            f"{name_or_path}: no such folder, and no shipped SAE of that name; {hint}the "
            f"shipped SAEs are {list_saes()}."
        )
    return formats.load_sae_folder(path, device=device, dtype=dtype, **overrides)
