"""TransformerLens 2.x ``HookedTransformer`` state dicts: the same names and shapes as ours.

Such a state dict loads with ``model.load_state_dict`` as it is; this loader also accepts a
file saved with ``torch.save``, checks and drops the buffers TransformerLens stores with the
weights (``attn.mask``, ``attn.IGNORE``, ``attn.rotary_sin``/``rotary_cos``: see
``interp.components.tl_buffers``), checks names and shapes, and builds the model
without a second copy of the weights.

TransformerLens's toy models (``attn-only-2l``, ``gelu-1l``, ``solu-1l``, ...: the
``NeelNanda/...`` hub repos) are folders in this format: TL's own config.json and a state dict
``*final.pth``; ``load_transformer_lens_folder`` reads one (a local folder or the hub cache's
snapshot), converting the old Pile SoLU models' layout as TransformerLens does.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from interp.components.tl_buffers import check_model_tl_buffers
from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import (
    CheckpointError,
    TensorSource,
    build_model,
    load_torch_file,
    printable,
    read_config_json,
    resolve_dtype,
)
from interp.loading.tokenizer_files import HF_TOKENIZER_FILES, tokenizer_from_folder
from interp.loading.transformer_lens.model_names import MODEL_NAME_UNSTATED
from interp.loading.transformer_lens.toy_config import neel_config_dict

_TL_BUFFER = re.compile(r"^blocks\.\d+\.attn\.(mask|IGNORE|rotary_sin|rotary_cos)$")


def load_transformer_lens_state_dict(
    state_dict: dict[str, Tensor] | str | Path,
    cfg: HookedTransformerConfig | dict[str, Any],
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    tokenizer: Any = None,
    *,
    model_class: type[nn.Module],
) -> Any:
    """A ``model_class`` (HookedTransformer or a subclass) of shape ``cfg`` with a
    TransformerLens state dict (or its file).

    A state dict saved after ``fold_ln`` has no layer-norm weights: give ``cfg``
    ``normalization_type="LNPre"``.

    Example:
        >>> copy = load_transformer_lens_state_dict(
        ...     model.state_dict(), model.cfg, device="cpu", model_class=HookedTransformer
        ... )
        >>> torch.equal(copy.blocks[1].attn.W_K, model.blocks[1].attn.W_K)
        True
    """
    cfg = HookedTransformerConfig.unwrap(cfg)
    name = "The TransformerLens state dict"
    if not isinstance(state_dict, dict):
        name, state_dict = str(state_dict), load_torch_file(state_dict)
        if not isinstance(state_dict, dict):
            raise CheckpointError(f"{name} holds a {type(state_dict).__name__}, not a state dict.")
    tensors = {key: value for key, value in state_dict.items() if not _TL_BUFFER.match(key)}
    if cfg.normalization_type == "LN" and "ln_final.w" not in tensors and "embed.W_E" in tensors:
        raise CheckpointError(
            f"{name} has no layer-norm weights (it was saved after fold_ln); pass a cfg with "
            "normalization_type='LNPre'."
        )
    cfg.dtype = resolve_dtype(dtype, cfg.dtype)
    source = TensorSource.from_state_dict(tensors)  # notes NaN and infinite weights
    tensors = ((key, source.take(key)) for key in list(source.shapes))
    model = build_model(cfg, tensors, tokenizer, device, name, model_class=model_class)
    source.warn_non_finite(name)
    check_model_tl_buffers(model, state_dict)  # a mask it cannot honour is an error
    return model


def load_transformer_lens_folder(
    folder: str | Path,
    name: str | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    tokenizer: Any = None,
    *,
    model_class: type[nn.Module],
) -> Any:
    """A ``model_class`` (HookedTransformer or a subclass) from a folder in TransformerLens's format
    (a toy model's hub snapshot: TL's config.json and a state dict ``*final.pth``), unprocessed.
    ``name`` is the hub repo (its ``_old`` marks the old Pile SoLU layout; the model is named after
    it). With no ``tokenizer``, the config's ``tokenizer_name`` is loaded from the Hugging Face
    cache when it is there, else the model has none (a warning says how to give one).

    Example:
        >>> import json, tempfile
        >>> folder = Path(tempfile.mkdtemp()) / "my-toy"; folder.mkdir()
        >>> config = {"n_layers": 2, "d_model": 128, "d_mlp": 512, "d_head": 64, "n_heads": 1,
        ...           "n_ctx": 64, "d_vocab": 512, "act_fn": "gelu_new", "attn_only": True,
        ...           "normalization": None}   # TL's format, attn-only-2l's shape
        >>> _ = (folder / "config.json").write_text(json.dumps(config))
        >>> torch.save(model.state_dict(), folder / "model_final.pth")
        >>> toy = load_transformer_lens_folder(folder, model_class=HookedTransformer)
        >>> toy.cfg.model_name, torch.allclose(toy(tokens), model(tokens))
        ('my-toy', True)
    """
    folder = Path(folder)
    stated = name is not None  # a hub repo names the model; a local folder's name does not
    name = name or folder.name
    values = read_config_json(folder / "config.json")
    try:
        fields = neel_config_dict(values, name)
    except ValueError as error:
        raise CheckpointError(f"{printable(folder / 'config.json')}: {error}") from None
    weights = sorted(folder.glob("*final.pth")) or sorted(folder.glob("*.pth"))
    if len(weights) != 1:
        raise FileNotFoundError(
            f"{printable(folder)} holds {[p.name for p in weights] or 'no .pth file'}; a "
            "TransformerLens checkpoint folder has one state dict named *final.pth."
        )
    state_dict = load_torch_file(weights[0])
    if not isinstance(state_dict, dict):
        raise CheckpointError(
            f"{printable(weights[0])} holds a {type(state_dict).__name__}, not a state dict."
        )
    cfg = HookedTransformerConfig(**fields, model_name=name.split("/")[-1])
    if not stated and isinstance(values.get("model_name"), str) and values["model_name"]:
        cfg.model_name = values["model_name"]  # the folder's config names the model
    elif not stated:
        cfg.extra[MODEL_NAME_UNSTATED] = True
    if cfg.original_architecture == "neel-solu-old":
        state_dict = convert_neel_solu_old_weights(state_dict, cfg)
    state_dict = _with_missing_biases(state_dict, cfg, weights[0], model_class)
    if tokenizer is None and cfg.tokenizer_name:
        tokenizer = _cached_tokenizer(cfg.tokenizer_name)
    return load_transformer_lens_state_dict(
        state_dict, cfg, device=device, dtype=dtype, tokenizer=tokenizer, model_class=model_class
    )


def _with_missing_biases(
    state_dict: dict[str, Tensor],
    cfg: HookedTransformerConfig,
    path: Path,
    model_class: type[nn.Module],
) -> dict[str, Tensor]:
    """``state_dict`` with the biases it lacks as zeros (what TransformerLens's
    ``fill_missing_keys`` gives them), with a warning naming them; any other missing tensor
    is left for the loader's error."""
    with torch.device("meta"):
        expected = model_class(cfg).state_dict()
    missing = [
        name
        for name in expected
        if name not in state_dict and name.rsplit(".", 1)[-1].startswith("b_")
    ]
    if not missing:
        return state_dict
    warnings.warn(
        f"{printable(path)} has no {missing}; they are zeros, as TransformerLens fills them.",
        stacklevel=4,
    )
    zeros = {name: torch.zeros(expected[name].shape) for name in missing}
    return state_dict | zeros


def convert_neel_solu_old_weights(
    state_dict: dict[str, Tensor], cfg: HookedTransformerConfig
) -> dict[str, Tensor]:
    """The old Pile SoLU models' state dict in TL's names and shapes, as TransformerLens
    converts it: norms were called "norm" (the final one "norm."); models of up to 8 layers
    stored ``W_pos`` transposed, of up to 6 layers every other ``W_`` too."""
    converted = {}
    for key, value in state_dict.items():
        key = key.replace("norm", "ln")
        converted["ln_final." + key.removeprefix("ln.") if key.startswith("ln.") else key] = value
    for key, value in converted.items():
        if (key == "pos_embed.W_pos" and cfg.n_layers <= 8) or (
            "W_" in key and key != "pos_embed.W_pos" and cfg.n_layers <= 6
        ):
            converted[key] = value.transpose(-2, -1)
    return converted


def download_transformer_lens_repo(repo_id: str) -> Path:
    """The local snapshot of a TransformerLens-format hub repo (its config.json and
    ``*final.pth``; no training checkpoints), from the Hugging Face cache when the hub cannot
    be reached."""
    import huggingface_hub

    try:
        return Path(
            huggingface_hub.snapshot_download(repo_id, allow_patterns=["config.json", "*final.pth"])
        )
    except Exception as online_error:  # offline, no network, or a hub outage
        try:
            return Path(huggingface_hub.snapshot_download(repo_id, local_files_only=True))
        except Exception:
            raise FileNotFoundError(
                f"{repo_id!r} is not in the Hugging Face cache "
                f"({huggingface_hub.constants.HF_HUB_CACHE}) and the hub could not be reached "
                f"({type(online_error).__name__}). Connect once to download it (it is cached "
                "for offline use afterwards), point HF_HOME at a cache that has it, or pass "
                "the path of a folder holding its config.json and model_final.pth."
            ) from None


def _cached_tokenizer(name: str) -> Any:
    """The Hugging Face tokenizer ``name`` from the hub (or its cache), else None with a
    warning naming the fix."""
    try:
        import huggingface_hub

        try:
            folder = huggingface_hub.snapshot_download(
                name, allow_patterns=list(HF_TOKENIZER_FILES)
            )
        except Exception:  # offline: the cache only
            folder = huggingface_hub.snapshot_download(name, local_files_only=True)
        tokenizer = tokenizer_from_folder(folder)
        if tokenizer is not None:
            return tokenizer
        problem = "its folder has no tokenizer files"
    except Exception as error:  # not cached, no network, or no transformers
        problem = f"{type(error).__name__}: {printable(error)}"
    warnings.warn(
        f"The model's tokenizer {name!r} could not be loaded ({problem}); the model has no "
        "tokenizer. Pass tokenizer=... to give it one, or run it on token ids.",
        stacklevel=4,
    )
    return None
