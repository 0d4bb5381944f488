"""The placement plans of ``interp.utils.device_map``, on devices this machine need not have
(a device check that accepts them is passed in)."""

from __future__ import annotations

import itertools

import pytest
import torch

from interp import HookedTransformerConfig
from interp.utils.device_map import (
    expand_device_map,
    get_device_for_block_index,
    parse_bytes,
    plan_balanced,
    plan_max_memory,
    resolve_device_map,
)


def fake_machine(n_cuda: int):
    """A device check for a machine with the CPU and ``n_cuda`` CUDA devices."""

    def check(device):
        parsed = torch.device(f"cuda:{device}" if isinstance(device, int) else device)
        if parsed.type == "cuda" and (parsed.index or 0) >= n_cuda:
            raise ValueError(f"device={str(device)!r} does not exist")
        return parsed

    return check


def units(n_blocks: int, block: int = 4, embed: int = 10, unembed: int = 10):
    return [
        ("embed", embed),
        *[(f"blocks.{i}", block) for i in range(n_blocks)],
        ("ln_final", 0),
        ("unembed", unembed),
    ]


def groups(plan: dict[str, str]) -> list[list[str]]:
    """The plan's modules, one list per device, in order; checks each device's run is one."""
    runs: list[list[str]] = []
    for name, device in plan.items():
        if not runs or plan[runs[-1][0]] != device:
            assert all(plan[r[0]] != device for r in runs), f"{device} holds two runs: {plan}"
            runs.append([])
        runs[-1].append(name)
    return runs


@pytest.mark.parametrize("n_blocks", [2, 5, 7, 12])
@pytest.mark.parametrize("n_devices", [1, 2, 3])
def test_balanced_plans_are_contiguous_and_no_split_is_lighter(n_blocks, n_devices):
    if n_devices > n_blocks:
        pytest.skip("more devices than blocks is its own test")
    items = units(n_blocks, block=4, embed=6, unembed=9)
    devices = [f"cuda:{i}" for i in range(n_devices)]
    plan = plan_balanced(items, devices)
    runs = groups(plan)
    assert [plan[run[0]] for run in runs] == devices  # every device, in order
    assert plan["embed"] == devices[0] and plan["unembed"] == devices[-1]
    assert all(any(n.startswith("blocks.") for n in run) for run in runs)
    size = dict(items)
    heaviest = max(sum(size[n] for n in run) for run in runs)
    # Against every split of the blocks into contiguous runs (brute force).
    best = min(
        max(
            sum(size[name] for name, _ in items[a:b])
            for a, b in zip((0, *cuts), (*cuts, len(items)), strict=True)
        )
        for cuts in itertools.combinations(range(2, len(items) - 1), n_devices - 1)
    )
    assert heaviest == best


def test_a_heavy_embedding_gets_fewer_blocks_on_its_device():
    plan = plan_balanced(units(6, block=4, embed=16, unembed=0), ["cuda:0", "cuda:1"])
    on_first = [n for n, d in plan.items() if d == "cuda:0" and n.startswith("blocks.")]
    assert on_first == ["blocks.0"]  # 16 + 4 against 5 * 4


def test_more_devices_than_blocks_is_named():
    with pytest.raises(ValueError, match="n_devices=3 cannot split 2 blocks"):
        plan_balanced(units(2), ["cuda:0", "cuda:1", "cuda:2"])


def test_max_memory_fills_devices_in_order_and_names_a_shortfall():
    plan = plan_max_memory(units(4), {"cuda:0": 18, "cpu": 100})
    assert groups(plan) == [
        ["embed", "blocks.0", "blocks.1"],
        ["blocks.2", "blocks.3", "ln_final", "unembed"],
    ]
    with pytest.raises(ValueError, match="do not fit max_memory"):
        plan_max_memory(units(4), {"cuda:0": 18, "cpu": 10})


def test_sizes_in_bytes_and_units():
    assert parse_bytes("2GiB", "m") == 2 * 2**30 and parse_bytes("3 MB", "m") == 3_000_000
    with pytest.raises(ValueError, match="max_memory\\['cuda:0'\\]='lots' is not a size"):
        parse_bytes("lots", "max_memory['cuda:0']")


def test_a_device_map_by_prefix_with_followers():
    plan = expand_device_map(
        {"embed": "cpu", "blocks": "cuda:0", "blocks.3": "cpu", "unembed": 1},
        [("embed", 1), ("pos_embed", 1), *units(4)[1:]],
        fake_machine(2),
    )
    assert plan == {
        "embed": "cpu",
        "pos_embed": "cpu",  # with embed
        "blocks.0": "cuda:0",
        "blocks.1": "cuda:0",
        "blocks.2": "cuda:0",
        "blocks.3": "cpu",  # the longer prefix wins
        "ln_final": "cuda:1",  # with unembed
        "unembed": "cuda:1",
    }


@pytest.mark.parametrize(
    ("device_map", "message"),
    [
        ({"embed": "cpu", "blocks": "cpu", "blocks.9": "cpu"}, "names \\['blocks.9'\\]"),
        ({"embed": "cpu", "blocks": "cpu", "lm_head": "cpu"}, "names \\['lm_head'\\], which"),
        ({"embed": "cpu", "blocks.0": "cpu", "unembed": "cpu"}, "leaves \\['blocks.1'\\] without"),
        ({"embed": "cpu", "blocks": "cuda:2", "unembed": "cpu"}, "'cuda:2' does not exist"),
        ({"embed": "meta", "blocks": "cpu", "unembed": "cpu"}, "meta device holds no weights"),
        ({}, "non-empty dict"),
    ],
)
def test_bad_device_maps_are_named(device_map, message):
    error = TypeError if not device_map else ValueError
    with pytest.raises(error, match=message):
        expand_device_map(device_map, units(2), fake_machine(2))


def test_n_devices_beyond_the_machine_is_named():
    from torch import nn

    model = nn.Module()
    model.embed, model.blocks = nn.Linear(2, 2), nn.ModuleList(nn.Linear(2, 2) for _ in range(4))
    model.unembed = nn.Linear(2, 2)
    plan = resolve_device_map(model, n_devices=2, check=fake_machine(2))
    assert set(plan.values()) == {"cuda:0", "cuda:1"}
    with pytest.raises(ValueError, match="n_devices=3 needs cuda:2 \\(device 3 of 3\\)"):
        resolve_device_map(model, n_devices=3, check=fake_machine(2))
    with pytest.raises(ValueError, match="device='cpu' is the one CPU"):
        resolve_device_map(model, n_devices=2, device="cpu", check=fake_machine(2))


@pytest.mark.parametrize(("n_layers", "n_devices"), [(4, 2), (12, 3), (6, 6), (8, 4)])
def test_block_devices_equal_transformer_lens_when_the_split_is_even(n_layers, n_devices):
    devices = pytest.importorskip("transformer_lens.utilities")
    cfg = HookedTransformerConfig(n_layers=n_layers, d_model=8, n_ctx=4, d_head=4, d_vocab=10)
    cfg.n_devices, cfg.device = n_devices, "cpu"  # TL's function only reads these
    for index in range(n_layers):
        ours = get_device_for_block_index(index, cfg, "cuda:1")
        assert ours == devices.get_device_for_block_index(index, cfg, "cuda:1")


def test_an_uneven_split_stays_on_the_devices():
    """TransformerLens names cuda:2 for block 4 of 5 over 2 devices; here the first device
    takes the extra block."""
    placed = [
        get_device_for_block_index(i, n_layers=5, n_devices=2, device="cuda").index
        for i in range(5)
    ]
    assert placed == [0, 0, 0, 1, 1]
