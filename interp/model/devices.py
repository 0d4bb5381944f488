"""A model laid over several devices in one process: TransformerLens 2.x's
``move_model_modules_to_device`` (blocks split over ``cfg.n_devices`` devices), a
``device_map`` applied to a built model, and the map a model has now. The forward moves the
residual stream (and the positions and masks with it) to each block's device, once per
boundary, wherever the blocks are (``interp.utils.device_map.module_device``); unlike
TransformerLens, which sends it to a fixed device per layer.

Example:
    >>> copy = interp.load_model("attn-only-2l")
    >>> copy = copy.place_modules({"embed": "cpu", "blocks": "cpu", "unembed": "cpu"})
    >>> copy.device_map   # pos_embed goes with embed (ln_final, folded, has no weights)
    {'embed': 'cpu', 'pos_embed': 'cpu', 'blocks.0': 'cpu', 'blocks.1': 'cpu', 'unembed': 'cpu'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from interp.utils.device_map import (
    get_device_for_block_index,
    module_device,
    placement_units,
    resolve_device_map,
)


class DevicePlacementMixin:
    """``move_model_modules_to_device``, ``place_modules`` and ``device_map``."""

    @property
    def device_map(self) -> dict[str, str]:
        """Each top-level module (``embed``, ``blocks.0``, ..., ``unembed``) and the device its
        weights are on now."""
        default = torch.device("cpu")
        return {
            name: str(module_device(self.get_submodule(name), default))
            for name, _ in placement_units(self)
        }

    def move_model_modules_to_device(self) -> Any:
        """TransformerLens's: the embedding on ``cfg.device``, block ``i`` on
        ``get_device_for_block_index(i, cfg)`` (the blocks split in order over
        ``cfg.n_devices`` devices), ``ln_final`` and ``unembed`` with the last block."""
        cfg = self.cfg
        # No device: CUDA when the blocks are split (TransformerLens checks it has them).
        device = cfg.device if cfg.device is not None else ("cuda" if cfg.n_devices > 1 else "cpu")
        last = get_device_for_block_index(cfg.n_layers - 1, cfg, device)
        plan = {}
        for name, _ in placement_units(self):
            if name.startswith("blocks."):
                index = int(name.split(".")[1])
                plan[name] = str(get_device_for_block_index(index, cfg, device))
            else:
                plan[name] = str(last) if name in ("ln_final", "unembed") else device
        return self.place_modules(plan)

    def place_modules(
        self,
        device_map: Mapping[str, Any] | str | None = None,
        n_devices: int = 1,
        device: Any = None,
        max_memory: Mapping[Any, int | str] | None = None,
    ) -> Any:
        """Move each module to its device under ``device_map`` (module prefix -> device, or
        ``"auto"`` with ``max_memory``) or, without one, the blocks balanced over
        ``n_devices`` devices from ``device`` on (``interp.utils.device_map``). The map is
        checked whole before anything moves, so a bad one leaves the model as it was.
        ``cfg.device`` becomes the embedding's device (where inputs go) and
        ``cfg.n_devices`` the number of devices used. Returns the model."""
        plan = resolve_device_map(self, device_map, n_devices, device, max_memory)
        for name, target in plan.items():
            self.get_submodule(name).to(target)
        self.cfg.device = plan[next(iter(plan))]
        self.cfg.n_devices = len(set(plan.values()))
        return self
