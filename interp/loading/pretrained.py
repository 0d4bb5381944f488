"""``HookedTransformer.from_pretrained``: a local folder (interp's or Hugging Face's), a hub id
or one of TransformerLens's model names (GPT-2, Pythia, Llama 3, Mistral, Qwen 2/2.5/3,
Gemma 2/3), with TransformerLens's weight processing."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch

from interp.devices import check_device
from interp.loading.checkpoint import printable, read_config_json, resolve_dtype
from interp.loading.hf import download_from_hub, folder_tokenizer, from_hf_model, load_hf_folder
from interp.loading.processing import process_weights, skipped_steps
from interp.tokenizers import get_tokenizer

# owner/name or name, as the Hugging Face hub spells repo ids.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
# Pythia's sizes, with the names its models had before their parameter counts were corrected.
_PYTHIA_SIZES = {
    "14m": [],
    "31m": [],
    "70m": ["19m"],
    "160m": ["125m"],
    "410m": ["350m"],
    "1b": ["800m"],
    "1.4b": ["1.3b"],
    "2.8b": ["2.7b"],
    "6.9b": ["6.7b"],
    "12b": ["13b"],
}


def _pythia_aliases() -> dict[str, list[str]]:
    """TransformerLens's Pythia names: each size plain, deduped, and as the v0 re-release, with
    ``pythia-SIZE`` and the old sizes' names as aliases (14m and 31m exist plain only)."""
    table = {}
    for size, old_sizes in _PYTHIA_SIZES.items():
        for suffix in ["", "-deduped", "-v0", "-deduped-v0"] if old_sizes else [""]:
            names = [f"pythia-{size}{suffix}"]
            for old in old_sizes:
                names += [f"EleutherAI/pythia-{old}{suffix}", f"pythia-{old}{suffix}"]
            table[f"EleutherAI/pythia-{size}{suffix}"] = names
    table["EleutherAI/pythia-70m"].insert(1, "pythia")
    table["EleutherAI/pythia-70m-v0"].insert(1, "pythia-v0")
    for seed in (1, 2, 3):
        table[f"EleutherAI/pythia-160m-seed{seed}"] = [
            f"pythia-160m-seed{seed}",
            f"EleutherAI/pythia-125m-seed{seed}",
            f"pythia-125m-seed{seed}",
        ]
    return table


def _lowercase_aliases(hub_ids: list[str]) -> dict[str, list[str]]:
    """Hub ids whose TransformerLens alias is the lower-cased name after the owner."""
    return {hub_id: [hub_id.split("/")[1].lower()] for hub_id in hub_ids}


_QWEN_IDS = [
    f"Qwen/Qwen{version}-{size}{variant}"
    for version, sizes in [
        ("2", ["0.5B", "1.5B", "7B"]),
        ("2.5", ["0.5B", "1.5B", "3B", "7B", "14B", "32B", "72B"]),
    ]
    for size in sizes
    for variant in ["", "-Instruct"]
] + [
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-0.6B-Base",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B",
]
_GEMMA_IDS = [
    f"google/gemma-2-{size}{variant}" for size in ("2b", "9b", "27b") for variant in ("", "-it")
] + [
    f"google/gemma-3-{size}{variant}"
    for size, variants in [
        ("270m", ("", "-it")),
        ("1b", ("-pt", "-it")),
        ("4b", ("-pt", "-it")),
        ("12b", ("-pt", "-it")),
        ("27b", ("-pt", "-it")),
    ]
    for variant in variants
]
# Llama 3 has no TransformerLens alias: its hub ids are its names (matched ignoring case).
_LLAMA_IDS = [
    f"meta-llama/{name}"
    for name in [
        "Meta-Llama-3-8B",
        "Meta-Llama-3-8B-Instruct",
        "Meta-Llama-3-70B",
        "Meta-Llama-3-70B-Instruct",
        "Llama-3.1-8B",
        "Llama-3.1-8B-Instruct",
        "Llama-3.1-70B",
        "Llama-3.1-70B-Instruct",
        "Llama-3.2-1B",
        "Llama-3.2-1B-Instruct",
        "Llama-3.2-3B",
        "Llama-3.2-3B-Instruct",
        "Llama-3.3-70B-Instruct",
    ]
]

# TransformerLens's official names of the supported families (hub ids) and their aliases.
MODEL_ALIASES: dict[str, list[str]] = {
    "gpt2": ["gpt2-small"],
    "gpt2-medium": [],
    "gpt2-large": [],
    "gpt2-xl": [],
    "distilgpt2": ["distillgpt2", "distill-gpt2", "distil-gpt2", "gpt2-xs"],
    **_pythia_aliases(),
    **{hub_id: [] for hub_id in _LLAMA_IDS},
    "mistralai/Mistral-7B-v0.1": ["mistral-7b"],
    "mistralai/Mistral-7B-Instruct-v0.1": ["mistral-7b-instruct"],
    "mistralai/Mistral-Nemo-Base-2407": ["mistral-nemo-base-2407"],
    **_lowercase_aliases(_QWEN_IDS),
    **_lowercase_aliases(_GEMMA_IDS),
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
    """A HookedTransformer from a folder written by ``model.save``, a Hugging Face checkpoint
    folder (GPT-2, GPT-NeoX, Llama, Mistral, Qwen 2/3, Gemma 2/3), a hub id or TransformerLens
    name (downloaded once, then read from the Hugging Face cache, also offline), or the
    in-memory ``hf_model`` given (with no tokenizer given, GPT-2's for a GPT-2 model, else
    the one saved with ``name_or_path`` when that is a local folder).

    The processing flags are off here (``HookedTransformer.from_pretrained`` turns
    TransformerLens's on); a step the model cannot take (folding layer norms a model does not
    have) is skipped with a warning, as in TransformerLens. Hugging Face checkpoints load in
    float32 unless ``dtype`` says otherwise; interp's own keep their saved dtype.

    Example:
        >>> model = load_pretrained("gpt2-small", device="cuda", dtype=torch.bfloat16)
    """
    if hf_model is not None:
        model = from_hf_model(hf_model, tokenizer=_hf_model_tokenizer(hf_model, tokenizer))
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
    if hf_model.config.model_type == "gpt2":
        return "gpt2"
    name = getattr(hf_model, "name_or_path", "")
    return (
        folder_tokenizer(Path(name), gpt2_fallback=False) if name and Path(name).is_dir() else None
    )


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
