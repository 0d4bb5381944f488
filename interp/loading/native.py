"""interp's own checkpoint format: a folder with ``config.json`` and ``model.safetensors``.

``config.json`` is ``HookedTransformerConfig.to_dict()`` (``dtype`` as its name, without
``device``) plus two keys: ``tokenizer`` (the
spec of ``interp.tokenizers.tokenizer_to_dict``, or null) and ``interp_format`` (the format
version, which tells these folders apart from Hugging Face ones). ``model.safetensors`` holds
the state dict in the model's own dtype, so a save and a load round-trip bit-exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from interp.components.tl_buffers import weights_state_dict
from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import (
    CheckpointError,
    TensorSource,
    check_model_dtype,
    check_names_and_shapes,
    printable,
    read_config_json,
    resolve_dtype,
)
from interp.tokenizers import tokenizer_from_dict, tokenizer_to_dict
from interp.utils.devices import check_device

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT_VERSION = 1


def save_native(model: Any, folder: str | Path) -> Path:
    """Write ``model`` (a HookedTransformer) to ``folder`` as config.json + model.safetensors.

    The tokenizer is saved when it is GPT-2's or a ``CharTokenizer``; any other tokenizer
    is left out (pass it again to ``load_native``'s caller by setting ``model.tokenizer``).

    Example:
        >>> import tempfile
        >>> save_native(model, Path(tempfile.mkdtemp()) / "my-model")
        PosixPath('/.../my-model')
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = model.cfg.to_dict()
    config["dtype"] = str(model.cfg.dtype).removeprefix("torch.")
    config.pop("device")
    config["tokenizer"] = tokenizer_to_dict(model.tokenizer)
    config["interp_format"] = FORMAT_VERSION
    state_dict = {name: tensor.contiguous() for name, tensor in weights_state_dict(model).items()}
    save_file(state_dict, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
    (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return folder


def is_native_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds a checkpoint written by ``save_native`` (not a Hugging Face one).

    Example:
        >>> import tempfile
        >>> folder = save_native(model, Path(tempfile.mkdtemp()) / "my-model")
        >>> is_native_folder(folder), is_native_folder(folder.parent)
        (True, False)
    """
    config_path = Path(folder) / CONFIG_FILE
    if not (config_path.is_file() and (Path(folder) / WEIGHTS_FILE).is_file()):
        return False
    try:
        return "interp_format" in json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


def load_native(
    folder: str | Path,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    *,
    model_class: type[nn.Module],
) -> Any:
    """The model saved in ``folder`` by ``save_native``, with its tokenizer, as a
    ``model_class`` (HookedTransformer or a subclass).

    Weights keep their saved dtype unless ``dtype`` is given; they load straight onto
    ``device`` (default CPU).

    Example:
        >>> import tempfile
        >>> folder = save_native(model, Path(tempfile.mkdtemp()) / "my-model")
        >>> copy = load_native(
        ...     folder, device="cpu", dtype=torch.bfloat16, model_class=HookedTransformer
        ... )
        >>> copy.cfg.dtype, copy.W_Q.dtype, copy.tokenizer is not None
        (torch.bfloat16, torch.bfloat16, True)
    """
    dtype = None if dtype is None else resolve_dtype(dtype, torch.float32)
    folder = Path(folder)
    config_path, weights_path = folder / CONFIG_FILE, folder / WEIGHTS_FILE
    if not weights_path.is_file():
        raise FileNotFoundError(
            f"{printable(folder)} is not an interp checkpoint: it needs {CONFIG_FILE} (with an "
            f"'interp_format' key) and {WEIGHTS_FILE}, as written by save_native / model.save."
        )
    config = read_config_json(config_path)
    if "interp_format" not in config:
        raise FileNotFoundError(
            f"{printable(config_path)} has no 'interp_format' key, so {printable(folder)} is not "
            "an interp checkpoint (for a Hugging Face folder use from_pretrained)."
        )
    version = config.pop("interp_format")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(
            f"{printable(folder)} uses checkpoint format {version!r}; this interp reads up to "
            f"{FORMAT_VERSION}. Upgrade interp."
        )
    tokenizer_spec = config.pop("tokenizer", None)
    device = check_device(device if device is not None else "cpu")
    try:
        cfg = HookedTransformerConfig.from_dict(config)
        check_model_dtype(cfg.dtype, f"field 'dtype' ({cfg.dtype})")
    except (TypeError, ValueError) as error:
        raise CheckpointError(
            f"{printable(config_path)} is not a valid config: {printable(error)} Fix that field "
            "in the file, or save the model again."
        ) from None
    if dtype is not None:
        cfg.dtype = dtype
    source = TensorSource.from_safetensors([weights_path])
    tokenizer = tokenizer_from_dict(tokenizer_spec) if tokenizer_spec is not None else None
    # Build on the CPU (the meta device would cost seconds of first-use set-up in torch),
    # then take the saved tensors as they are, already on ``device``.
    cfg.device, cfg.n_devices = None, 1  # saved laid over devices: loaded on ``device``
    model = model_class(cfg, tokenizer=tokenizer)
    expected = {name: tuple(t.shape) for name, t in weights_state_dict(model).items()}
    check_names_and_shapes(source.shapes, expected, printable(weights_path))
    state_dict = {
        name: tensor.to(device=device, dtype=cfg.dtype if tensor.is_floating_point() else None)
        for name in expected
        for tensor in (source.take(name),)  # MXFP4 blocks and scales stay uint8
    }
    model.load_state_dict(state_dict, assign=True)
    model.cfg.device = str(device) if device.type != "cpu" else None
    source.warn_non_finite(printable(weights_path))
    return model
