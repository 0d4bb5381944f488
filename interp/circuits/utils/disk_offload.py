"""circuit-tracer's ``utils.disk_offload``: move a module's weights off the device and get a
handle that brings them back.

``disk_offload_module(module)`` writes the state dict to a temporary ``.safetensors`` file
(name prefix ``_PREFIX``) and leaves the module on the ``meta`` device; ``handle(device=None)``
reads it back (onto ``device``, else where it was) and deletes the file.
``cpu_offload_module`` moves the module to the CPU; its handle moves it back.
``offload_modules`` does either to a module, a list, ``ModuleList``, ``Sequential`` or
``ModuleDict`` (one handle per module). Files left behind by a crashed run:
``cleanup_all_offload_files()`` deletes them (and says how many).

``attribute(..., offload=...)`` uses ``interp.circuits.offload`` instead, which keeps every
tensor object (so hooks and ties survive); these are the module-level helpers.

Example:
    >>> shakespeare = interp.load_model("shakespeare-char")
    >>> reload = disk_offload_module(shakespeare.blocks[0].mlp)  # weights on disk, module on meta
    >>> shakespeare.blocks[0].mlp.W_in.device
    device(type='meta')
    >>> reload()                                                  # back on its device
    >>> shakespeare.blocks[0].mlp.W_in.device
    device(type='cpu')
"""

from __future__ import annotations

import atexit
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import torch
from safetensors.torch import load_file, save_file
from torch import nn

__all__ = [
    "cleanup_all_offload_files",
    "cpu_offload_module",
    "disk_offload_module",
    "offload_modules",
]

_PREFIX = "interp-offload-"
_pending: set[str] = set()  # files written and not yet reloaded


@atexit.register
def _remove_pending() -> None:
    for name in list(_pending):
        Path(name).unlink(missing_ok=True)


def cleanup_all_offload_files() -> int:
    """Delete every offload file in the temporary folder; returns how many there were."""
    folder = Path(tempfile.gettempdir())
    removed = 0
    for path in folder.glob(f"{_PREFIX}*"):
        path.unlink(missing_ok=True)
        _pending.discard(str(path))
        removed += 1
    return removed


def _device_of(module: nn.Module) -> torch.device:
    tensor = next(iter([*module.parameters(), *module.buffers()]), None)
    if tensor is None:
        raise ValueError(f"{type(module).__name__} has no parameters or buffers to offload.")
    return tensor.device


def disk_offload_module(module: nn.Module) -> Callable[..., None]:
    """Save ``module``'s state to a temporary file and move it to ``meta``; the handle
    ``handle(device=None)`` loads it back (onto ``device``, else where it was)."""
    device = _device_of(module)
    state = {key: value.detach().contiguous() for key, value in module.state_dict().items()}
    handle, name = tempfile.mkstemp(prefix=_PREFIX, suffix=".safetensors")
    os.close(handle)
    save_file(state, name)
    _pending.add(name)
    module.to(device="meta")

    def reload(device: torch.device | str | None = None) -> None:
        target = str(device or original)
        module.load_state_dict(load_file(name, device=target), assign=True)
        Path(name).unlink(missing_ok=True)
        _pending.discard(name)

    original = device
    return reload


def cpu_offload_module(module: nn.Module) -> Callable[[], None]:
    """Move ``module`` to the CPU; the handle moves it back to where it was."""
    device = _device_of(module)
    module.to(device="cpu")

    def reload() -> None:
        module.to(device=device)

    return reload


def offload_modules(
    modules: nn.Module | list[nn.Module], offload_type: Literal["cpu", "disk"]
) -> list[Callable[..., None]]:
    """Offload each module (of a list, ``ModuleList``, ``Sequential`` or ``ModuleDict``, or
    one module) to ``"cpu"`` or ``"disk"``; one reload handle per module."""
    if offload_type not in ("cpu", "disk"):
        raise ValueError(f"offload_type={offload_type!r}; use 'cpu' or 'disk'.")
    offload = disk_offload_module if offload_type == "disk" else cpu_offload_module
    if isinstance(modules, nn.ModuleDict):
        items = list(modules.values())
    elif isinstance(modules, (list, tuple, nn.ModuleList, nn.Sequential)):
        items = list(modules)
    else:
        items = [modules]
    return [offload(module) for module in items]
