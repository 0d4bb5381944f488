"""``attribute(..., offload="cpu" | "disk")``: the modules the backward passes do not read
(each MLP, the embedding and unembedding, and the transcoders once their vectors are read)
leave the device while the passes run, and come back afterwards, as circuit-tracer's
``offload`` does.

Each parameter and buffer keeps its object (so ``requires_grad``, ties and hooks stay); only
its data moves: to the CPU, or to a file in a temporary folder (freeing the memory) and back.

Example:
    >>> with offloaded([block.attn for block in model.blocks], "disk"):
    ...     model.blocks[0].attn.W_Q.numel()   # the weights are on disk here
    0
    >>> model.blocks[0].attn.W_Q.shape          # and back afterwards
    torch.Size([1, 128, 64])
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

OFFLOAD_CHOICES = (None, "cpu", "disk")


def check_offload(offload: object) -> None:
    if offload not in OFFLOAD_CHOICES:
        raise ValueError(
            f"offload={offload!r}; it must be 'cpu' (move unused weights to the CPU), 'disk' "
            "(to a temporary file) or None."
        )


def _tensors(modules: Sequence[nn.Module]) -> list[Tensor]:
    """Every parameter and buffer of ``modules``, each once (tied weights are one)."""
    seen: dict[int, Tensor] = {}
    for module in modules:
        for tensor in [*module.parameters(), *module.buffers()]:
            seen.setdefault(id(tensor), tensor)
    return list(seen.values())


@contextlib.contextmanager
def offloaded(modules: Sequence[nn.Module], offload: str | None) -> Iterator[None]:
    """Within the block, the data of ``modules``' tensors is on the CPU (``"cpu"``) or on
    disk (``"disk"``; the tensors are empty meanwhile); afterwards it is back where it was."""
    check_offload(offload)
    tensors = _tensors(modules) if offload else []
    devices = [tensor.device for tensor in tensors]
    path: Path | None = None
    with contextlib.ExitStack() as stack:
        try:
            if offload == "cpu":
                for tensor in tensors:
                    tensor.data = tensor.data.cpu()
            elif offload == "disk":
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
                torch.save([tensor.data for tensor in tensors], folder / "offload.pt")
                path = folder / "offload.pt"
                for tensor in tensors:
                    tensor.data = tensor.data.new_empty(0)
            yield
        finally:
            if path is not None:  # saved, so (some of) the tensors are empty
                for tensor, data in zip(tensors, torch.load(path, weights_only=True), strict=True):
                    tensor.data = data
            for tensor, device in zip(tensors, devices, strict=True):
                tensor.data = tensor.data.to(device)
