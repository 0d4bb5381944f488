"""``HookedTransformer.from_pretrained``: a local folder (interp's or Hugging Face's), a hub id
or one of TransformerLens's model names, with TransformerLens's weight processing."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch

from interp.devices import check_device
from interp.loading.checkpoint import printable, read_config_json, resolve_dtype
from interp.loading.hf import download_from_hub, from_hf_model, load_hf_folder
from interp.loading.processing import process_weights
from interp.tokenizers import get_tokenizer

# owner/name or name, as the Hugging Face hub spells repo ids.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
# TransformerLens 2.x's official names of the GPT-2 family (hub ids) and their aliases.
MODEL_ALIASES: dict[str, list[str]] = {
    "gpt2": ["gpt2-small"],
    "gpt2-medium": [],
    "gpt2-large": [],
    "gpt2-xl": [],
    "distilgpt2": ["distillgpt2", "distill-gpt2", "distil-gpt2", "gpt2-xs"],
}
OFFICIAL_MODEL_NAMES = list(MODEL_ALIASES)
_ALIAS_TO_OFFICIAL = {
    name.lower(): official
    for official, aliases in MODEL_ALIASES.items()
    for name in [official, *aliases]
}


def get_official_model_name(name: str) -> str:
    """The hub id of a TransformerLens model name or alias (case-insensitive, as TL), or
    ``name`` itself when it is not one of them.

    Example:
        >>> get_official_model_name("gpt2-small")
        'gpt2'
    """
    return _ALIAS_TO_OFFICIAL.get(name.lower(), name)


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
    hf_model: Any = None,
) -> Any:
    """A HookedTransformer from a folder written by ``model.save``, a Hugging Face GPT-2 folder,
    a hub id or TransformerLens name (downloaded once, then read from the Hugging Face cache,
    also offline), or the in-memory ``hf_model`` given.

    The processing flags are off here (``HookedTransformer.from_pretrained`` turns
    TransformerLens's on); a step the model cannot take (folding layer norms a model does not
    have) is skipped with a warning, as in TransformerLens. Hugging Face checkpoints load in
    float32 unless ``dtype`` says otherwise; interp's own keep their saved dtype.

    Example:
        >>> model = load_pretrained("gpt2-small", device="cuda", dtype=torch.bfloat16)
    """
    if hf_model is not None:
        model = from_hf_model(hf_model, tokenizer="gpt2" if tokenizer is None else tokenizer)
        model.cfg.dtype = resolve_dtype(dtype, model.cfg.dtype)
        model.to(device=check_device(device or model.cfg.device), dtype=model.cfg.dtype)
        model.cfg.device = str(check_device(device or model.cfg.device))
    else:
        folder = _local_folder(str(name_or_path))
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"{printable(folder)} has no config.json: from_pretrained needs a folder written "
                "by model.save or by Hugging Face's save_pretrained."
            )
        config = read_config_json(folder / "config.json")
        if "interp_format" in config:  # written by interp's save_native
            from interp.loading.native import load_native

            model = load_native(folder, device=device, dtype=dtype)
            if tokenizer is not None:
                model.tokenizer = get_tokenizer(tokenizer)
        else:
            model = load_hf_folder(folder, device=device, dtype=dtype, tokenizer=tokenizer)
    steps = dict(
        fold_ln=fold_ln,
        center_writing_weights=center_writing_weights,
        center_unembed=center_unembed,
        fold_value_biases=fold_value_biases,
        refactor_factored_attn_matrices=refactor_factored_attn_matrices,
    )
    if model.cfg.normalization_type not in ("LN", "LNPre"):
        skipped = [name for name in ("fold_ln", "center_writing_weights") if steps[name]]
        if skipped:
            warnings.warn(
                f"{model.cfg.model_name!r} has no layer norms (normalization_type="
                f"{model.cfg.normalization_type!r}), so {' and '.join(skipped)} cannot apply and "
                "were skipped (as TransformerLens does).",
                stacklevel=3,
            )
        steps.update(fold_ln=False, center_writing_weights=False)
    return process_weights(model, **steps)


def _local_folder(name_or_path: str) -> Path:
    """The folder to load: the path itself when it exists, else the hub repo's cached copy."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        hint = " (for a nanoGPT .pt file use HookedTransformer.from_nanogpt)"
        raise FileNotFoundError(
            f"{printable(path)} is a file; from_pretrained takes the folder holding config.json "
            f"and the weights{hint if path.suffix in ('.pt', '.pth', '.ckpt') else ''}."
        )
    if not _HUB_ID.match(name_or_path) or name_or_path.startswith((".", "~")):
        raise FileNotFoundError(
            f"No folder {printable(path)} exists (and it is not a hub repo id); check the path."
        )
    return download_from_hub(get_official_model_name(name_or_path))
