"""``attribute(..., offload=...)``: the same graph with the unread weights on the CPU or on
disk during the backward passes, and the model exactly as it was afterwards."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import ReplacementModel, attribute
from interp.circuits import attribution as attribution_module
from interp.circuits.offload import offloaded
from tests.circuits.test_circuits import TOKENS, tiny_model, tiny_transcoders


def snapshot(model: ReplacementModel) -> dict:
    modules = {"model": model.model, "transcoders": model.transcoders}
    return {
        f"{owner}.{name}": (tensor.detach().clone(), tensor.device, tensor.requires_grad)
        for owner, module in modules.items()
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]
    }


def assert_unchanged(model: ReplacementModel, before: dict) -> None:
    after = snapshot(model)
    assert after.keys() == before.keys()
    for name, (value, device, requires_grad) in before.items():
        assert torch.equal(after[name][0], value), name
        assert after[name][1:] == (device, requires_grad), name


@pytest.mark.parametrize("by_autograd", [False, True], ids=["written-out", "autograd"])
@pytest.mark.parametrize("offload", ["cpu", "disk"])
def test_offloading_gives_the_same_graph(offload, by_autograd, monkeypatch) -> None:
    if by_autograd:
        monkeypatch.setattr(attribution_module, "unsupported", lambda model: "the test's choice")
    model = ReplacementModel.from_model(tiny_model("llama"), tiny_transcoders("llama", True))
    before = snapshot(model)
    expected = attribute(TOKENS, model, batch_size=4)
    offloaded_graph = attribute(TOKENS, model, batch_size=4, offload=offload)
    assert torch.equal(offloaded_graph.adjacency_matrix, expected.adjacency_matrix)
    assert_unchanged(model, before)


def test_disk_offload_empties_the_weights_meanwhile_and_restores_them() -> None:
    model = tiny_model("gpt2")
    before = {name: param.detach().clone() for name, param in model.named_parameters()}
    mlps = [block.mlp for block in model.blocks]
    with offloaded(mlps, "disk"):
        assert all(param.numel() == 0 for mlp in mlps for param in mlp.parameters())
        assert model.blocks[0].attn.W_Q.numel() > 0  # only what was named
    for name, param in model.named_parameters():
        assert torch.equal(param, before[name]), name


def test_a_failure_while_offloaded_still_restores_the_model() -> None:
    model = ReplacementModel.from_model(tiny_model("gpt2"), tiny_transcoders("gpt2", True))
    before = snapshot(model)
    with pytest.raises(RuntimeError, match="inside"), offloaded([model.embed], "disk"):
        raise RuntimeError("inside")
    assert_unchanged(model, before)


@pytest.mark.parametrize("bad", ["gpu", "CPU", True, 0])
def test_an_unknown_offload_is_a_clear_error(bad) -> None:
    model = ReplacementModel.from_model(tiny_model("gpt2"), tiny_transcoders("gpt2", True))
    before = snapshot(model)
    with pytest.raises(ValueError, match="offload=.*'cpu'.*'disk'.*None"):
        attribute(TOKENS, model, offload=bad)
    assert_unchanged(model, before)
