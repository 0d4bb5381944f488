"""Small trained models shipped inside the package, so everything runs offline.

Each model is a folder here in interp's native format (``config.json``, ``model.safetensors``)
with a ``MODEL_CARD.md`` that says how it was trained and what it does;
``python -m interp.train <name>`` reproduces it.
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path

import torch

from interp.loading.native import is_native_folder, load_native
from interp.model import HookedTransformer

# Texts shipped with the package, by the name the commands' data options take for them.
SHIPPED_TEXTS = {"tinyshakespeare": "data/tinyshakespeare.txt.gz"}  # 1.1 MB, public domain


def _models_folder() -> Path:
    return Path(str(resources.files("interp.shipped")))


def shipped_text_path(name_or_path: str) -> str:
    """The file a data option (``--data``, ``--contexts-data``, ``--sae-data``) names: a
    shipped text's name (``SHIPPED_TEXTS``: ``"tinyshakespeare"``) is its gzip file inside
    the package, unless a file of that name exists here; any other value is a path as given.

    Example:
        >>> shipped_text_path("tinyshakespeare")
        '.../interp/shipped/data/tinyshakespeare.txt.gz'
    """
    if name_or_path in SHIPPED_TEXTS and not Path(name_or_path).exists():
        return str(_models_folder() / SHIPPED_TEXTS[name_or_path])
    return name_or_path


def list_models() -> list[str]:
    """The names of the models shipped with interp, sorted.

    Example:
        >>> interp.list_models()
        ['attn-only-2l', 'shakespeare-char']
    """
    return sorted(entry.name for entry in _models_folder().iterdir() if is_native_folder(entry))


def model_card(name: str) -> str:
    """The text of a shipped model's MODEL_CARD.md (training, figures, a sample).

    Example:
        >>> print(interp.shipped.model_card("shakespeare-char"))
        # shakespeare-char
        <BLANKLINE>
        A character-level GPT trained on tiny-shakespeare ...
    """
    return (_model_folder(name) / "MODEL_CARD.md").read_text(encoding="utf-8")


def load_model(
    name: str,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
):
    """A shipped model by name, as a HookedTransformer with its tokenizer.

    Example:
        >>> model = interp.load_model("attn-only-2l")
        >>> logits, cache = model.run_with_cache(tokens)
        >>> logits.shape   # [batch, pos, d_vocab]
        torch.Size([1, 21, 512])
        >>> interp.load_model("shakespeare-char", dtype=torch.bfloat16).cfg.dtype
        torch.bfloat16
    """
    return load_native(
        _model_folder(name), device=device, dtype=dtype, model_class=HookedTransformer
    )


def _model_folder(name: str) -> Path:
    names = list_models()
    if not isinstance(name, str):
        raise TypeError(
            f"load_model takes a shipped model's name (one of {names}), got a "
            f"{type(name).__name__} object; a Hugging Face model object loads with "
            "HookedTransformer.from_pretrained(name, hf_model=model)."
        )
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"No shipped model named {name!r}; {hint}the models are {names}.")
    return _models_folder() / name
