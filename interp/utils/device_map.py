"""Where each part of a model goes when it is laid over several devices in one process: the
plan (``n_devices``: contiguous blocks balanced by bytes; ``device_map="auto"``: filled in
order up to ``max_memory``) and the check of a ``device_map`` a user writes, all before any
weight is read. The devices are passed in, so the plans are tested on devices this machine
does not have.

The parts are a model's top-level modules that hold tensors, in the order the residual
stream visits them: ``embed`` (and ``pos_embed``), ``blocks.0`` ... ``blocks.{n-1}``,
``ln_final``, ``unembed`` (``placement_units``). A ``device_map`` names each part, or a
prefix of several (``"blocks"``: every block); the longest matching prefix decides.

Example:
    >>> units = [("embed", 10), ("blocks.0", 4), ("blocks.1", 4), ("blocks.2", 4),
    ...          ("blocks.3", 4), ("ln_final", 0), ("unembed", 10)]
    >>> plan = plan_balanced(units, ["cuda:0", "cuda:1"])   # embed first, unembed last
    >>> [name for name, device in plan.items() if device == "cuda:0"]
    ['embed', 'blocks.0', 'blocks.1']
    >>> get_device_for_block_index(3, n_layers=4, n_devices=2, device="cuda")
    device(type='cuda', index=1)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

# A device a user may write: "cuda:1", 1 (a CUDA index, as torch), torch.device("cpu").
DeviceLike = str | int | torch.device
_SIZE = re.compile(r"^\s*([\d.]+)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_UNITS |= {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def placement_units(model: nn.Module) -> list[tuple[str, int]]:
    """The model's top-level parts that hold parameters or buffers, each with its bytes, in
    the order the residual visits them (``blocks`` expanded to ``blocks.0``, ...). Works on a
    model built on the meta device (nothing allocated).

    Example:
        >>> [name for name, _ in placement_units(model)]   # attn-only-2l: ln_final folded
        ['embed', 'pos_embed', 'blocks.0', 'blocks.1', 'unembed']
    """
    units = []
    for name, child in model.named_children():
        parts = (
            [(f"{name}.{index}", block) for index, block in enumerate(child)]
            if isinstance(child, nn.ModuleList)
            else [(name, child)]
        )
        for part_name, part in parts:
            tensors = [*part.parameters(), *part.buffers()]
            if tensors:
                units.append((part_name, sum(t.numel() * t.element_size() for t in tensors)))
    last = ["ln_final", "unembed"]  # after the blocks, whatever order they were made in
    return [u for u in units if u[0] not in last] + [u for u in units if u[0] in last]


def plan_balanced(units: Sequence[tuple[str, int]], devices: Sequence[str]) -> dict[str, str]:
    """``units`` split into ``len(devices)`` contiguous groups, each with at least one block,
    the largest group's bytes as small as it can be (the first device holds the embedding,
    the last the unembedding). Ties go to the earlier device."""
    n_blocks = sum(name.startswith("blocks.") for name, _ in units)
    if not 1 <= len(devices) <= n_blocks:
        raise ValueError(
            f"n_devices={len(devices)} cannot split {n_blocks} blocks (each device takes at "
            f"least one block); pass n_devices between 1 and {n_blocks}."
        )
    sizes = [size for _, size in units]
    is_block = [name.startswith("blocks.") for name, _ in units]
    n, k = len(units), len(devices)
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)
    blocks_before = [0]
    for block in is_block:
        blocks_before.append(blocks_before[-1] + block)
    inf = float("inf")
    # best[g][j]: the smallest largest-group bytes placing units[:j] on g devices; cut[g][j]
    # where the last of those groups starts.
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    cut = [[0] * (n + 1) for _ in range(k + 1)]
    best[0][0] = 0
    for groups in range(1, k + 1):
        for end in range(1, n + 1):
            for start in range(end):
                if blocks_before[end] == blocks_before[start] or best[groups - 1][start] == inf:
                    continue  # a group without a block
                cost = max(best[groups - 1][start], prefix[end] - prefix[start])
                if cost < best[groups][end]:
                    best[groups][end], cut[groups][end] = cost, start
    plan, end = {}, n
    for groups in range(k, 0, -1):
        start = cut[groups][end]
        for name, _ in units[start:end]:
            plan[name] = devices[groups - 1]
        end = start
    return {name: plan[name] for name, _ in units}


def parse_bytes(value: int | str, what: str) -> int:
    """A size in bytes: an int, or a string such as ``"20GiB"``, ``"500MB"``.

    Example:
        >>> parse_bytes("1.5GiB", "max_memory['cuda:0']"), parse_bytes(1024, "x")
        (1610612736, 1024)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(
            f"{what}={value!r} is not a size; pass bytes (an int) or a string such as '20GiB'."
        )
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "B").upper()])


def plan_max_memory(
    units: Sequence[tuple[str, int]], max_memory: Mapping[str, int]
) -> dict[str, str]:
    """``device_map="auto"``: the units in order, each on the first device (in
    ``max_memory``'s order) from the current one on that still has room for it; a
    ValueError naming the shortfall when they do not fit."""
    devices = list(max_memory)
    plan, index, used = {}, 0, dict.fromkeys(devices, 0)
    for name, size in units:
        while index < len(devices) and used[devices[index]] + size > max_memory[devices[index]]:
            index += 1
        if index == len(devices):
            total = sum(size for _, size in units)
            budget = ", ".join(f"{d!r}: {b / 2**30:.2f} GiB" for d, b in max_memory.items())
            raise ValueError(
                f"device_map='auto': the model's {total / 2**30:.2f} GiB do not fit max_memory "
                f"({budget}); {name} ({size / 2**30:.2f} GiB) has no room left. Give more "
                "memory, or add a device (e.g. 'cpu')."
            )
        used[devices[index]] += size
        plan[name] = devices[index]
    return plan


def expand_device_map(
    device_map: Mapping[str, DeviceLike],
    units: Sequence[tuple[str, int]],
    check: Callable[[DeviceLike], torch.device],
) -> dict[str, str]:
    """Each unit's device under ``device_map`` (module prefix -> device; the longest prefix
    that names the unit or a module above it wins), every device checked by ``check``. A
    ValueError names a key that matches no part, a part no key covers, a device that does
    not exist, and the valid names. ``pos_embed`` and ``ln_final``, when not named, go with
    ``embed`` and ``unembed``."""
    names = [name for name, _ in units]
    valid = ", ".join(names)
    followers = {name: lead for name, lead in _FOLLOWS.items() if name in names}
    if not isinstance(device_map, Mapping) or not device_map:
        raise TypeError(
            f"device_map must be 'auto' or a non-empty dict of module -> device, got "
            f"{device_map!r}; the modules are {valid}."
        )
    covered = {name: [key for key in device_map if _covers(key, name)] for name in names}
    unknown = [key for key in device_map if not any(_covers(key, name) for name in names)]
    if unknown:
        raise ValueError(
            f"device_map names {unknown}, which this model does not have; its modules are "
            f"{valid} (or a prefix such as 'blocks')."
        )
    for name, lead in followers.items():  # unnamed: with the module it goes with
        if not covered[name] and lead in covered:
            covered[name] = covered[lead]
    missing = [name for name, keys in covered.items() if not keys]
    if missing:
        raise ValueError(
            f"device_map leaves {missing} without a device; give every module one (e.g. "
            "'blocks': 'cuda:0' covers all blocks)."
        )
    devices = {}
    for key, device in device_map.items():
        checked = check(device)
        if checked.type == "meta":
            raise ValueError(
                f"device_map[{key!r}]={device!r}: the meta device holds no weights; pick a "
                "real device."
            )
        devices[key] = str(checked)
    return {name: devices[max(keys, key=len)] for name, keys in covered.items()}


# A module a device_map may leave out, and the module whose device it then takes.
_FOLLOWS = {"pos_embed": "embed", "ln_final": "unembed"}


def _covers(key: str, name: str) -> bool:
    return name == key or name.startswith(key + ".")


def resolve_device_map(
    model: nn.Module,
    device_map: Mapping[str, DeviceLike] | str | None = None,
    n_devices: int = 1,
    device: DeviceLike | None = None,
    max_memory: Mapping[DeviceLike, int | str] | None = None,
    check: Callable[[DeviceLike], torch.device] | None = None,
) -> dict[str, str]:
    """Each placement unit of ``model`` (built on the meta device, or real) and its device:
    ``device_map`` as given (checked), ``"auto"`` (filled up to ``max_memory``), or with
    ``n_devices`` the blocks balanced over ``device`` (default ``"cuda"``) index 0 to
    ``n_devices - 1``, the embedding on the first, ``ln_final`` and ``unembed`` on the last.
    ``check`` (default ``interp.utils.devices.check_device``) turns a device into a
    ``torch.device`` or raises; tests pass one that accepts devices this machine lacks.
    """
    if check is None:
        from interp.utils.devices import check_device as check
    units = placement_units(model)
    if device_map == "auto":
        if not max_memory:
            raise ValueError(
                "device_map='auto' needs max_memory={device: bytes}, e.g. {'cuda:0': "
                "'20GiB', 'cpu': '64GiB'}: the devices to fill, in order."
            )
        budget = {
            str(check(key)): parse_bytes(size, f"max_memory[{key!r}]")
            for key, size in max_memory.items()
        }
        return plan_max_memory(units, budget)
    if max_memory is not None:
        raise ValueError("max_memory goes with device_map='auto' only; drop one of them.")
    if device_map is not None:
        if isinstance(device_map, str):
            raise ValueError(
                f"device_map={device_map!r}: a string device_map must be 'auto'; for one device "
                "pass device=..."
            )
        return expand_device_map(device_map, units, check)
    return plan_balanced(units, devices_for(n_devices, device, check))


def devices_for(
    n_devices: int, device: DeviceLike | None, check: Callable[[DeviceLike], torch.device]
) -> list[str]:
    """``n_devices`` devices of ``device``'s kind from its index on (``"cuda"``: cuda:0...),
    each checked, so asking for more than the machine has is a ValueError naming both."""
    if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
        raise ValueError(f"n_devices must be a positive integer, got {n_devices!r}.")
    base = torch.device(device if device is not None else "cuda")
    if base.type == "cpu" and n_devices > 1:
        raise ValueError(
            f"n_devices={n_devices} splits the blocks over {n_devices} accelerators, but "
            f"device={str(base)!r} is the one CPU; use device='cuda', or device_map={{...}} to "
            "put some modules on the CPU."
        )
    start = base.index or 0
    devices = [torch.device(base.type, start + index) for index in range(n_devices)]
    for index, candidate in enumerate(devices):
        try:
            check(candidate)
        except ValueError as error:
            raise ValueError(
                f"n_devices={n_devices} needs {candidate} (device {index + 1} of "
                f"{n_devices}), which this machine does not have: {error}"
            ) from None
    return [str(candidate) for candidate in devices]


def get_device_for_block_index(
    index: int,
    cfg: Any = None,
    device: DeviceLike | None = None,
    *,
    n_layers: int | None = None,
    n_devices: int | None = None,
) -> torch.device:
    """TransformerLens 2.x's ``utils.get_device_for_block_index``: the device of block
    ``index`` when ``cfg.n_layers`` blocks are split in order over ``cfg.n_devices`` devices
    from ``device`` (default ``cfg.device``) on. Unlike TransformerLens (``index //
    (n_layers // n_devices)``, which names a device past the last when the split is uneven),
    the first ``n_layers % n_devices`` devices take one block more. A CPU device is returned
    as it is. ``n_layers``/``n_devices`` may be given instead of ``cfg``."""
    n_layers = cfg.n_layers if n_layers is None else n_layers
    n_devices = cfg.n_devices if n_devices is None else n_devices
    device = torch.device(device if device is not None else cfg.device)
    if device.type == "cpu" or n_devices == 1:
        return device
    if not 0 <= index < n_layers:
        raise ValueError(f"block index {index} is out of range for {n_layers} blocks.")
    per_device, extra = divmod(n_layers, n_devices)
    boundary = extra * (per_device + 1)  # the blocks of the devices with one more
    offset = (
        index // (per_device + 1) if index < boundary else extra + (index - boundary) // per_device
    )
    return torch.device(device.type, (device.index or 0) + offset)


def module_device(module: nn.Module, default: torch.device) -> torch.device:
    """The device of ``module``'s first parameter or buffer (``default`` if it has none):
    where an input must be for it to run.

    Example:
        >>> module_device(model.blocks[0], torch.device("meta"))
        device(type='cpu')
    """
    for tensor in module.parameters():
        return tensor.device
    for tensor in module.buffers():
        return tensor.device
    return default
