"""A model from what a user types: a shipped model's name, a checkpoint folder or a hub id
(what ``interp``'s ``--model`` and ``interp.harvest.harvest(model="...")`` take).

Example:
    >>> import tempfile
    >>> from interp.loading.native import save_native
    >>> model = load_named_model("attn-only-2l")            # shipped with interp
    >>> folder = save_native(model, Path(tempfile.mkdtemp()) / "my-model")
    >>> model = load_named_model(str(folder))               # interp or Hugging Face format
    >>> model.cfg.n_layers
    2
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import torch

from interp.model import HookedTransformer
from interp.shipped import list_models, load_model


class UnknownModelError(ValueError):
    """A name that is not a shipped model, not a folder, and not a hub id that could be loaded."""


class ModelLoadError(RuntimeError):
    """A checkpoint folder or hub id that was found but could not be loaded."""


def load_named_model(
    name_or_path: str,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    **kwargs: Any,
) -> HookedTransformer:
    """A shipped model by name (``interp.load_model``), or a checkpoint folder or hub id
    (``HookedTransformer.from_pretrained_no_processing``: the checkpoint's exact weights),
    on ``device`` in ``dtype`` (None: the loader's default). Neither folds nor centres
    weights. A name that is none of these is an ``UnknownModelError`` suggesting the
    closest shipped name; a checkpoint that fails to load, a ``ModelLoadError``.

    Args:
        kwargs: more options of ``from_pretrained_no_processing``, for a folder or hub id;
            a shipped model takes none (a ``TypeError`` naming them).

    Example:
        >>> load_named_model("attn-only-2l").cfg.model_name
        'attn-only-2l'
        >>> import tempfile
        >>> load_named_model(tempfile.mkdtemp())   # a folder, but no checkpoint in it
        Traceback (most recent call last):
        ...
        interp.shipped.by_name.ModelLoadError: Could not load '...': ... has no config.json: ...
    """
    shipped = list_models()
    if name_or_path in shipped:
        if kwargs:
            raise TypeError(
                f"{name_or_path!r} is a shipped model, which loads with device and dtype "
                f"only; drop {sorted(kwargs)} (they are options of a checkpoint folder or "
                "hub id's from_pretrained_no_processing)."
            )
        return load_model(name_or_path, device=device, dtype=dtype)
    options = {"device": device, "dtype": dtype}
    options = {key: value for key, value in options.items() if value is not None}
    try:
        return HookedTransformer.from_pretrained_no_processing(name_or_path, **options, **kwargs)
    except FileNotFoundError as error:
        if Path(name_or_path).exists():
            raise ModelLoadError(f"Could not load {name_or_path!r}: {error}") from error
        close = difflib.get_close_matches(name_or_path, shipped, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UnknownModelError(
            f"unknown model {name_or_path!r}: {hint}It is not a shipped model "
            f"({', '.join(shipped)}), not a folder, and not a hub id that could be loaded: {error}"
        ) from error
    except Exception as error:
        raise ModelLoadError(
            f"Could not load {name_or_path!r} as a checkpoint folder or hub id: {error}"
        ) from error
