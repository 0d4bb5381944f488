"""Reading an SAE folder's files: JSON, safetensors and .npz, with ``SAEFormatError``s that
name the file.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp(), "cfg.json")
    >>> _ = path.write_text('{"d_sae": 1024')   # a brace short
    >>> read_json(path)
    Traceback (most recent call last):
    interp.sae.formats.files.SAEFormatError: .../cfg.json: not readable JSON (...).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor


class SAEFormatError(ValueError):
    """A folder that is not a readable SAE; the message names the file and the field."""


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SAEFormatError(f"{path}: not readable JSON ({error}).") from None
    if not isinstance(data, dict):
        raise SAEFormatError(f"{path}: expected a JSON object, got {type(data).__name__}.")
    return data


def read_safetensors(path: Path) -> dict[str, Tensor]:
    if not path.is_file():
        raise SAEFormatError(f"{path}: missing.")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, RuntimeError) as error:
        raise SAEFormatError(
            f"{path}: not a readable safetensors file, truncated or corrupt ({error})."
        ) from None


def read_npz(path: Path) -> dict[str, Tensor]:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: torch.from_numpy(np.array(data[key])) for key in data.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise SAEFormatError(
            f"{path}: not a readable .npz file, truncated or corrupt ({error})."
        ) from None
