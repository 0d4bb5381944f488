"""Devices a user names: clear errors for one this machine lacks, before anything moves."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.devices import available_devices, check_device

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


def tiny_config(**overrides):
    return HookedTransformerConfig(
        n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=50, n_ctx=8, **overrides
    )


def test_available_devices_start_with_cpu():
    devices = available_devices()
    assert devices[0] == "cpu"
    assert len(devices) == 1 + torch.cuda.device_count() + torch.backends.mps.is_available()
    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("meta")) == torch.device("meta")


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("gpu", "device='gpu' is not a torch device; this machine has 'cpu'"),
        ("GPU:0", "did you mean 'cuda'?"),
        ("CPU", "did you mean 'cpu'?"),
        ("tpu", "device='tpu' is not a torch device"),
    ],
)
def test_names_that_are_not_torch_devices(device, message):
    with pytest.raises(ValueError) as info:
        check_device(device)
    assert message in str(info.value)


@no_cuda
@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda"), 0])
def test_cuda_without_cuda(device):
    with pytest.raises(ValueError) as info:
        check_device(device)
    assert f"device={device!r} needs CUDA, but CUDA is not available here" in str(info.value)
    assert "pass device='cpu'" in str(info.value)


def test_wrong_types():
    for device in (None, True, 1.5):
        with pytest.raises(TypeError, match=f"got {device!r}"):
            check_device(device)


@no_cuda
def test_model_construction_to_cuda_and_cache_device_check_first():
    with pytest.raises(ValueError, match="device='gpu' is not a torch device"):
        HookedTransformer(tiny_config(device="gpu"))
    model = HookedTransformer(tiny_config())
    for move in (lambda: model.to("gpu"), lambda: model.to(device="cuda"), model.cuda):
        with pytest.raises(ValueError, match="this machine has 'cpu'"):
            move()
    assert model.device == torch.device("cpu")
    assert model.to(torch.float64).W_E.dtype == torch.float64  # dtype-only moves still work
    tokens = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="device='cuda' needs CUDA"):
        model.run_with_cache(tokens, device="cuda")
    assert not any(point.has_hooks for point in model.hook_points())
    _, cache = model.run_with_cache(tokens, device="cpu")
    assert cache["hook_embed"].device == torch.device("cpu")
