"""``HookedTransformer.from_pretrained``: a local folder (interp's, Hugging Face's or
TransformerLens's), a hub id or one of TransformerLens's model names (GPT-2, Pythia, Llama,
Mistral, Qwen 1.5/2/2.5/3, Gemma 2/3 and TL's toy models: ``attn-only-2l``, ``solu-1l``, ...),
with TransformerLens's weight processing."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from interp.loading.checkpoint import printable, read_config_json, resolve_dtype
from interp.loading.families.gpt2 import fits_gpt2_tokenizer
from interp.loading.hf import download_from_hub, folder_tokenizer, from_hf_model, load_hf_folder
from interp.loading.processing import process_weights, skipped_steps
from interp.loading.transformer_lens import (
    download_transformer_lens_repo,
    load_transformer_lens_folder,
)
from interp.loading.transformer_lens.model_names import (
    MODEL_ALIASES,
    OFFICIAL_MODEL_NAMES,
    get_official_model_name,
    hub_repo_id,
    is_transformer_lens_repo,
)
from interp.loading.transformer_lens.toy_config import is_transformer_lens_config
from interp.tokenizers import get_tokenizer
from interp.utils.devices import check_device

__all__ = ["MODEL_ALIASES", "OFFICIAL_MODEL_NAMES", "get_official_model_name", "load_pretrained"]

# owner/name or name, as the Hugging Face hub spells repo ids.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def check_model_name(name_or_path: Any, call: str) -> None:
    """Raise TypeError, naming what ``call`` takes, unless ``name_or_path`` is a model name
    or a path (a model object passed there would otherwise be read as a file name)."""
    if isinstance(name_or_path, (str, os.PathLike)):
        return
    got = type(name_or_path).__name__
    hint = ""
    if isinstance(name_or_path, torch.nn.Module):
        name = getattr(name_or_path, "name_or_path", None) or "gpt2"
        hint = (
            " A Hugging Face model object goes in hf_model=, with its name first: "
            f"HookedTransformer.from_pretrained({name!r}, hf_model=model)."
        )
    raise TypeError(
        f"{call} takes a model name (e.g. 'gpt2') or a folder path as its first argument, "
        f"got a {got} object.{hint}"
    )


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
    *,
    model_class: type[nn.Module],
    dequantize_experts: bool = False,
) -> Any:
    """A ``model_class`` (HookedTransformer or a subclass: ``from_pretrained`` passes its ``cls``,
    so a subclass loads as itself) from a folder written by ``model.save``, a Hugging Face
    checkpoint folder (GPT-2, GPT-NeoX, Llama, Mistral, Qwen 2/3, Gemma 2/3), a
    TransformerLens-format folder (TL's toy models: its config.json and ``*final.pth``), a hub id or
    TransformerLens name (downloaded once, then read from the Hugging Face cache, also offline), or
    the in-memory ``hf_model`` given (with no tokenizer given, GPT-2's for a GPT-2 model, else the
    one saved with ``name_or_path`` when that is a local folder).

    The processing flags are off here (``HookedTransformer.from_pretrained`` turns
    TransformerLens's on); a step the model cannot take (folding layer norms a model does not
    have) is skipped with a warning, as in TransformerLens. Hugging Face checkpoints load in
    float32 unless ``dtype`` says otherwise; interp's own keep their saved dtype. gpt-oss's
    MXFP4 experts stay MXFP4 (then ``fold_ln`` is skipped: it would rewrite them) unless
    ``dequantize_experts``.

    Example:
        >>> import tempfile, transformers
        >>> folder = Path(tempfile.mkdtemp())   # or a hub id ("gpt2"), a TransformerLens name
        >>> transformers.GPT2LMHeadModel(transformers.GPT2Config(
        ...     n_layer=1, n_embd=32, n_head=2, n_positions=16)).save_pretrained(folder)
        >>> model = load_pretrained(
        ...     folder, device="cpu", dtype=torch.bfloat16, model_class=HookedTransformer
        ... )
        >>> model.cfg.n_layers, model.cfg.dtype, model.cfg.d_vocab
        (1, torch.bfloat16, 50257)
    """
    check_model_name(name_or_path, "from_pretrained")
    if hf_model is not None:
        tokenizer = _hf_model_tokenizer(hf_model, tokenizer)
        model = from_hf_model(hf_model, tokenizer=tokenizer, model_class=model_class)
        model.cfg.dtype = resolve_dtype(dtype, model.cfg.dtype)
        model.to(device=check_device(device or model.cfg.device), dtype=model.cfg.dtype)
        model.cfg.device = str(check_device(device or model.cfg.device))
    else:
        folder, repo_id = _local_folder(str(name_or_path))
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"{printable(folder)} has no config.json: from_pretrained needs a folder written "
                "by model.save or by Hugging Face's save_pretrained, or a TransformerLens "
                "checkpoint folder (config.json and model_final.pth)."
            )
        config = read_config_json(folder / "config.json")
        if "interp_format" in config:  # written by interp's save_native
            from interp.loading.native import load_native

            model = load_native(folder, device=device, dtype=dtype, model_class=model_class)
            if tokenizer is not None:
                model.tokenizer = get_tokenizer(tokenizer)
        elif is_transformer_lens_config(config):
            model = load_transformer_lens_folder(
                folder,
                name=repo_id,
                device=device,
                dtype=dtype,
                tokenizer=tokenizer,
                model_class=model_class,
            )
        else:
            model = load_hf_folder(
                folder,
                device=device,
                dtype=dtype,
                tokenizer=tokenizer,
                repo_id=repo_id,
                model_class=model_class,
                dequantize_experts=dequantize_experts,
            )
    steps = dict(
        fold_ln=fold_ln,
        center_writing_weights=center_writing_weights,
        center_unembed=center_unembed,
        fold_value_biases=fold_value_biases,
        refactor_factored_attn_matrices=refactor_factored_attn_matrices,
    )
    skipped = skipped_steps(model, **steps)
    if skipped:  # as TransformerLens: a step the model cannot take is skipped, with a warning
        warnings.warn(
            f"{model.cfg.model_name!r}: {'; '.join(skipped.values())}. So "
            f"{' and '.join(skipped)} cannot apply and "
            f"{'was' if len(skipped) == 1 else 'were'} skipped (as TransformerLens does).",
            stacklevel=3,
        )
        steps.update(dict.fromkeys(skipped, False))
    return process_weights(model, **steps)


def _hf_model_tokenizer(hf_model: Any, tokenizer: Any) -> Any:
    """The tokenizer for an in-memory Hugging Face model: ``tokenizer`` when given, else
    GPT-2's for GPT-2, else its folder's (None when it was not loaded from a folder)."""
    if tokenizer is not None:
        return tokenizer
    if hf_model.config.model_type == "gpt2":  # GPT-2's, when its ids fit the vocabulary
        return "gpt2" if fits_gpt2_tokenizer(hf_model.config.vocab_size) else None
    name = getattr(hf_model, "name_or_path", "")
    return (
        folder_tokenizer(Path(name), gpt2_fallback=False) if name and Path(name).is_dir() else None
    )


def _local_folder(name_or_path: str) -> tuple[Path, str | None]:
    """The folder to load and its hub repo: the path itself (no repo) when it exists, else
    the hub repo's snapshot (downloaded, or from the cache)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path, None
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
    repo_id = hub_repo_id(name_or_path)
    if is_transformer_lens_repo(repo_id):
        return download_transformer_lens_repo(repo_id), repo_id
    return download_from_hub(repo_id), repo_id
