"""Checking a device a user names, before anything is moved there."""

from __future__ import annotations

import torch


def available_devices() -> list[str]:
    """The devices this machine can run on: ``"cpu"``, then ``"cuda:0"``... and ``"mps"``.

    Example:
        >>> available_devices()[0]   # then "cuda:0", ... and "mps" where present
        'cpu'
    """
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{index}" for index in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def check_device(device: torch.device | str | int) -> torch.device:
    """``device`` as a ``torch.device``, or a ValueError that names it and the devices this
    machine has (``"gpu"`` is not a torch device; ``"cuda"`` needs a CUDA build and a GPU).
    ``"meta"`` is always accepted. An integer means that CUDA device, as in torch.

    Example:
        >>> check_device("cpu")
        device(type='cpu')
        >>> check_device("gpu")
        Traceback (most recent call last):
        ValueError: device='gpu' is not a torch device; this machine has 'cpu'...
    """
    available = available_devices()
    hint = f"this machine has {', '.join(map(repr, available))}"
    if isinstance(device, bool) or not isinstance(device, (torch.device, str, int)):
        raise TypeError(
            f"device must be a torch.device, a string such as 'cpu' or 'cuda:0', or a CUDA "
            f"index, got {device!r} ({type(device).__name__}); {hint}."
        )
    try:
        parsed = torch.device(f"cuda:{device}" if isinstance(device, int) else device)
    except RuntimeError:
        kind = str(device).strip().lower().split(":")[0]
        alias = {"gpu": "cuda"}.get(kind, kind if kind in ("cpu", "cuda", "mps") else None)
        suggestion = f"; did you mean {alias!r}?" if alias else "."
        raise ValueError(f"device={device!r} is not a torch device; {hint}{suggestion}") from None
    if parsed.type in ("cpu", "meta"):
        return parsed
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} needs CUDA, but CUDA is not available here (no GPU, or a "
                f"CPU-only torch build); {hint}: pass device='cpu'."
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r} does not exist: {hint}; pick one of those.")
        return parsed
    if parsed.type == "mps" and torch.backends.mps.is_available():
        return parsed
    backend = getattr(torch, parsed.type, None)
    if backend is not None and getattr(backend, "is_available", lambda: False)():
        return parsed
    raise ValueError(f"device={device!r} is not available: {hint}; pick one of those.")


def get_default_device() -> torch.device:
    """``cuda`` when torch sees a GPU, else ``cpu`` (circuit-tracer's default device).

    Example:
        >>> get_default_device().type in ("cuda", "cpu")   # cpu on a machine without a GPU
        True
    """
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
