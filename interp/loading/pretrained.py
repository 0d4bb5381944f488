"""``HookedTransformer.from_pretrained``: a local folder (interp's or Hugging Face's) or hub id."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from interp.loading.hf import download_from_hub, load_hf_folder
from interp.loading.processing import process_weights
from interp.tokenizers import get_tokenizer

# owner/name or name, as the Hugging Face hub spells repo ids.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
# TransformerLens's names for hub repos.
_HUB_ALIASES = {"gpt2-small": "gpt2"}


def load_pretrained(
    name_or_path: str | Path,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    fold_ln: bool = False,
    center_writing_weights: bool = False,
    center_unembed: bool = False,
    fold_value_biases: bool = False,
    refactor_factored_attn_matrices: bool = False,
    tokenizer: Any = None,
) -> Any:
    """A HookedTransformer from a folder written by ``model.save``, a Hugging Face GPT-2 folder,
    or a hub id (downloaded once, then read from the Hugging Face cache, also offline).

    No weight processing happens unless a flag asks for it. Hugging Face checkpoints load
    in float32 unless ``dtype`` says otherwise; interp's own keep their saved dtype.

    Example:
        >>> model = load_pretrained("gpt2", device="cuda", dtype=torch.bfloat16)
    """
    folder = _local_folder(str(name_or_path))
    config = _read_config(folder)
    if "n_layers" in config and "d_model" in config:  # written by interp's save_native
        from interp.loading.native import load_native

        model = load_native(folder, device=device, dtype=dtype)
        if tokenizer is not None:
            model.tokenizer = get_tokenizer(tokenizer)
    else:
        model = load_hf_folder(folder, device=device, dtype=dtype, tokenizer=tokenizer)
    return process_weights(
        model,
        fold_ln=fold_ln,
        center_writing_weights=center_writing_weights,
        center_unembed=center_unembed,
        fold_value_biases=fold_value_biases,
        refactor_factored_attn_matrices=refactor_factored_attn_matrices,
    )


def _local_folder(name_or_path: str) -> Path:
    """The folder to load: the path itself when it exists, else the hub repo's cached copy."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        hint = " (for a nanoGPT .pt file use HookedTransformer.from_nanogpt)"
        raise FileNotFoundError(
            f"{path} is a file; from_pretrained takes the folder holding config.json and the "
            f"weights{hint if path.suffix in ('.pt', '.pth', '.ckpt') else ''}."
        )
    if not _HUB_ID.match(name_or_path) or name_or_path.startswith((".", "~")):
        raise FileNotFoundError(f"No folder {path} exists (and it is not a hub repo id).")
    return download_from_hub(_HUB_ALIASES.get(name_or_path, name_or_path))


def _read_config(folder: Path) -> dict[str, Any]:
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(
            f"{folder} has no config.json: from_pretrained needs a folder written by "
            "model.save or by Hugging Face's save_pretrained."
        )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{config_path} is not valid JSON: {error}.") from None
    if not isinstance(config, dict):
        raise ValueError(f"{config_path} does not hold a JSON object.")
    return config
