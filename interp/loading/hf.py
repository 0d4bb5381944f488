"""Hugging Face checkpoints: folders, hub ids and in-memory models of the families in
``interp.loading.families`` (GPT-2, GPT-NeoX, Llama, Mistral, Qwen, Gemma, ...): the family
table decides how a checkpoint's config and tensors become ours."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import (
    MODEL_DTYPES,
    CheckpointError,
    TensorSource,
    build_model,
    printable,
    read_config_json,
    resolve_dtype,
)
from interp.loading.families import family_for
from interp.loading.families.gpt2 import GPT2_VOCAB_SIZE, fits_gpt2_tokenizer
from interp.loading.tokenizer_files import HF_TOKENIZER_FILES, tokenizer_from_folder
from interp.loading.transformer_lens.model_names import MODEL_NAME_UNSTATED
from interp.tokenizers import get_tokenizer

# (sharded index, single file) for each weights format, in order of preference.
_HF_WEIGHT_FILES = (
    ("model.safetensors.index.json", "model.safetensors"),
    ("pytorch_model.bin.index.json", "pytorch_model.bin"),
)


def checkpoint_state_dict(hf_model: Any) -> dict[str, Tensor]:
    """The model's tensors under the names and layout ``save_pretrained`` writes, which the
    family tables describe: transformers 5 fuses some in memory (a mixture of experts'
    per-expert projections into one [experts, ...] tensor) and splits them again on saving."""
    from transformers.core_model_loading import revert_weight_conversion

    return revert_weight_conversion(hf_model, hf_model.state_dict())


def from_hf_model(hf_model: Any, tokenizer: Any = "gpt2", *, model_class: type[nn.Module]) -> Any:
    """A ``model_class`` (HookedTransformer or a subclass) with the weights of an in-memory
    Hugging Face model of a supported architecture (``GPT2LMHeadModel``, ``LlamaForCausalLM``,
    ...), in its dtype and on its device.

    Example:
        >>> import transformers
        >>> hf_model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        ...     n_layer=1, n_embd=32, n_head=2, n_positions=16, vocab_size=100))
        >>> hf_model = hf_model.eval()   # a model made by its class is in training mode
        >>> model = from_hf_model(hf_model, tokenizer=None, model_class=HookedTransformer)
        >>> tokens = torch.tensor([[1, 2, 3]])
        >>> torch.allclose(model(tokens), hf_model(tokens).logits, atol=1e-5)
        True
    """
    parameter = next(hf_model.parameters())
    if parameter.dtype not in MODEL_DTYPES:
        raise ValueError(
            f"The Hugging Face model's weights are {parameter.dtype} (a quantized model?), a "
            f"dtype a model cannot compute in here; load it unquantized in one of "
            f"{', '.join(map(str, MODEL_DTYPES))} (e.g. from_pretrained(..., "
            "dtype=torch.bfloat16)), or pass its checkpoint folder instead."
        )
    hf_config = hf_model.config.to_dict()
    state_dict = TensorSource.from_state_dict(checkpoint_state_dict(hf_model))
    hf_config["architectures"] = [type(hf_model).__name__]  # the class in memory decides
    family = family_for(hf_config)
    cfg = family.hooked_config(hf_config, dtype=parameter.dtype)
    tensors = family.checked_tensors(state_dict, cfg, hf_config, "The model")
    if not hf_config.get("_name_or_path"):  # built in code: its name is only its family's
        cfg.extra[MODEL_NAME_UNSTATED] = True
    model = build_model(cfg, tensors, tokenizer, parameter.device, model_class=model_class)
    state_dict.warn_non_finite(f"The {type(hf_model).__name__}")
    return model


def hf_folder_source(folder: Path) -> TensorSource:
    """The weights of a Hugging Face checkpoint folder: ``model.safetensors``, a sharded
    ``model.safetensors.index.json``, ``pytorch_model.bin`` or its sharded index.

    Every tensor it gives is read for this load alone (no memory map, no caller's dict).
    """
    for index_name, single_name in _HF_WEIGHT_FILES:
        if (folder / single_name).is_file():
            paths = [folder / single_name]
        elif (folder / index_name).is_file():
            paths = _shard_paths(folder / index_name)
        else:
            continue
        if single_name.endswith(".safetensors"):
            return TensorSource.from_safetensors(paths)
        return TensorSource.from_torch_files(paths)
    present = sorted(p.name for p in folder.iterdir())
    raise FileNotFoundError(
        f"{printable(folder)} has no weights: expected model.safetensors, "
        "model.safetensors.index.json, pytorch_model.bin or pytorch_model.bin.index.json, "
        f"found {present}."
    )


def _shard_paths(index_path: Path) -> list[Path]:
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise CheckpointError(
            f"{printable(index_path)} is not a valid shard index: {error!r}."
        ) from None
    paths = [index_path.parent / name for name in dict.fromkeys(weight_map.values())]
    missing = [path.name for path in paths if not path.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{printable(index_path)} lists shards that are missing: {missing}."
        )
    return paths


def folder_tokenizer(
    folder: Path, gpt2_fallback: bool = True, vocab_size: int | None = None
) -> Any:
    """The Hugging Face tokenizer saved in a checkpoint folder; without one, the offline
    GPT-2 tokenizer (``gpt2_fallback``, for GPT-2 checkpoints whose ``vocab_size`` holds
    GPT-2's 50,257 tokens) or None (with a warning when the vocabulary is not GPT-2's)."""
    if not any((folder / name).is_file() for name in HF_TOKENIZER_FILES):
        if gpt2_fallback and not fits_gpt2_tokenizer(vocab_size):
            warnings.warn(
                f"{printable(folder)} has no tokenizer files and its {vocab_size}-token "
                f"vocabulary is not GPT-2's ({GPT2_VOCAB_SIZE}): the model has no tokenizer. "
                "Run it on token ids, or pass tokenizer=... (one of its vocabulary).",
                stacklevel=3,
            )
            return None
        return get_tokenizer("gpt2") if gpt2_fallback else None
    try:
        return tokenizer_from_folder(folder)
    except ImportError:
        if not gpt2_fallback:
            raise
        warnings.warn(
            f"{printable(folder)} has a tokenizer but transformers is not installed; using the "
            "offline GPT-2 tokenizer instead (pip install transformers to use the folder's).",
            stacklevel=3,
        )
        return get_tokenizer("gpt2")


def load_hf_folder(
    folder: str | Path,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    tokenizer: Any = None,
    repo_id: str | None = None,
    *,
    model_class: type[nn.Module],
    dequantize_experts: bool = False,
) -> Any:
    """A ``model_class`` (HookedTransformer or a subclass) from a Hugging Face checkpoint
    folder of a supported architecture (``SUPPORTED_ARCHITECTURES``), in float32 unless
    ``dtype`` says otherwise. MXFP4 experts (gpt-oss) stay MXFP4 in memory unless
    ``dequantize_experts`` (or the config's ``quantization_config.dequantize``).

    The model is named after ``repo_id`` (the hub repo the folder is a snapshot of) as
    TransformerLens names it (``"meta-llama/Llama-3.2-1B"`` -> ``"Llama-3.2-1B"``), else the
    config's ``_name_or_path``, else the folder (a name the checkpoint does not state:
    ``stated_model_name`` gives None).

    Every tensor's name and shape is checked against the config before any is read; the
    tensors are then read one at a time and placed on ``device``, so loading peaks near the
    model's size. The tokenizer is the folder's (``tokenizer.json``), else GPT-2's for a GPT-2
    checkpoint and none for the other families.

    Example:
        >>> import tempfile, transformers
        >>> hf_model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        ...     hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        ...     num_key_value_heads=2, vocab_size=100, max_position_embeddings=32))
        >>> folder = Path(tempfile.mkdtemp()) / "my-llama"
        >>> hf_model.save_pretrained(folder)
        >>> model = load_hf_folder(folder, model_class=HookedTransformer)
        >>> model.cfg.original_architecture, model.cfg.n_key_value_heads, model.tokenizer
        ('LlamaForCausalLM', 2, None)
    """
    dtype = resolve_dtype(dtype, torch.float32)
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(
            f"{printable(folder)} has no config.json; it is not a checkpoint folder."
        )
    hf_config = read_config_json(config_path)
    quantization = hf_config.get("quantization_config")
    if dequantize_experts and isinstance(quantization, dict):
        hf_config["quantization_config"] = quantization | dict(dequantize=True)
    what = f"The checkpoint in {printable(folder)}"
    family = family_for(hf_config)
    cfg = _checked_config(
        config_path, family.name, lambda: family.hooked_config(hf_config, dtype=dtype)
    )
    cfg.model_name = _model_name(cfg, hf_config, folder, repo_id)
    if family.default_tokenizer is None:  # the checkpoint's own tokenizer
        cfg.tokenizer_name = hf_config.get("_name_or_path") or folder.name
    weights = hf_folder_source(folder)
    tensors = family.checked_tensors(weights, cfg, hf_config, what)
    if tokenizer is None:
        tokenizer = folder_tokenizer(folder, family.default_tokenizer == "gpt2", cfg.d_vocab)
    model = build_model(
        cfg, tensors, tokenizer, device, printable(folder), fresh=True, model_class=model_class
    )
    weights.warn_non_finite(what)
    return model


def _model_name(
    cfg: HookedTransformerConfig, hf_config: dict, folder: Path, repo_id: str | None
) -> str:
    """The loaded model's name (see ``load_hf_folder``); a folder's name is marked as not
    stated in ``cfg.extra``."""
    if repo_id:
        return repo_id.rsplit("/", 1)[-1]
    if hf_config.get("_name_or_path"):
        return hf_config["_name_or_path"]
    cfg.extra[MODEL_NAME_UNSTATED] = True
    return folder.name


def _checked_config(
    config_path: Path, family: str, make: Callable[[], HookedTransformerConfig]
) -> HookedTransformerConfig:
    """``make()``, its errors said as errors of the config file, with the fix."""
    try:
        return make()
    except (TypeError, ValueError) as error:
        raise CheckpointError(
            f"{printable(config_path)} is not a valid {family} config: {printable(error)} Fix "
            "that field in the file, or save the model again with save_pretrained."
        ) from None


def download_from_hub(repo_id: str) -> Path:
    """The local folder of a hub repo's checkpoint, from the Hugging Face cache when the hub
    cannot be reached. Only the config, tokenizer and one weights format are fetched.

    Example:
        >>> download_from_hub("gpt2")  # needs the Hugging Face hub  # doctest: +SKIP
        PosixPath('/root/.cache/huggingface/hub/models--gpt2/snapshots/607a30d783dfa663caf39e06633721c8d4cfcd7e')
    """
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    patterns = ["config.json", *HF_TOKENIZER_FILES]
    safetensors_patterns = [
        "model.safetensors",
        "model.safetensors.index.json",
        "model-*.safetensors",
    ]
    torch_patterns = ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"]
    try:
        folder = Path(
            huggingface_hub.snapshot_download(
                repo_id, allow_patterns=patterns + safetensors_patterns
            )
        )
        if not any((folder / name).is_file() for name in safetensors_patterns[:2]):
            folder = Path(
                huggingface_hub.snapshot_download(repo_id, allow_patterns=patterns + torch_patterns)
            )
        return folder
    except (RepositoryNotFoundError, GatedRepoError) as error:
        raise FileNotFoundError(
            f"{repo_id!r} is not a local folder, and the Hugging Face hub has no repo by that name "
            f"that you can access ({type(error).__name__}). Check the spelling, or log in with "
            "`hf auth login` for a gated or private repo."
        ) from None
    except Exception as online_error:  # no network, offline mode, or a hub outage
        try:
            return Path(huggingface_hub.snapshot_download(repo_id, local_files_only=True))
        except Exception:
            raise FileNotFoundError(
                f"{repo_id!r} is not a local folder, is not in the Hugging Face cache "
                f"({huggingface_hub.constants.HF_HUB_CACHE}), and the hub could not be reached "
                f"({type(online_error).__name__}: {online_error}). Connect to the internet once "
                "to download it (it is cached for offline use afterwards; unset HF_HUB_OFFLINE "
                "if set), point HF_HOME at a cache that has it, or pass the path of a local "
                "checkpoint folder."
            ) from None
