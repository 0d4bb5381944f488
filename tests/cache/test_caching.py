"""run_with_cache's storage options (interp.caching): positions, dtype, device, batch axis."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformer_lens.HookedRootModule import HookedRootModule as TransformerLensRoot
from transformer_lens.utilities import Slice as TransformerLensSlice

from interp import HookedTransformer, HookedTransformerConfig
from interp.caching import position_axis
from interp.utils import Slice

NAMES = ["blocks.0.hook_resid_post", "blocks.1.attn.hook_pattern", "blocks.1.attn.hook_q"]


@pytest.fixture(scope="module")
def model() -> HookedTransformer:
    cfg = HookedTransformerConfig(n_layers=2, d_model=32, n_heads=4, d_vocab=50, n_ctx=16, seed=0)
    return HookedTransformer(cfg).eval()


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    return torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(0))


def full_cache(model, tokens):
    return model.run_with_cache(tokens, names_filter=NAMES)[1]


def select(activation: torch.Tensor, name: str, index) -> torch.Tensor:
    """The reference: plain indexing along the position (query) axis."""
    return activation[(slice(None),) * position_axis(name) + (index,)]


def assert_compact(tensor: torch.Tensor) -> None:
    """The tensor owns exactly its own elements: no hidden view of a larger activation."""
    assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()


def transformer_lens_cache(model, tokens, pos_slice) -> dict[str, torch.Tensor]:
    """The reference: TransformerLens's own caching hooks, run on our model's hook points."""
    if isinstance(pos_slice, Slice):  # the same slice as TransformerLens's own Slice class
        pos_slice = TransformerLensSlice(None if pos_slice.mode == "identity" else pos_slice.slice)
    store, fwd, _ = TransformerLensRoot.get_caching_hooks(
        model, names_filter=NAMES, pos_slice=pos_slice
    )
    with model.hooks(fwd_hooks=fwd):
        model(tokens)
    return store


POS_SLICES = [-1, 2, (1, 4), slice(1, 4), slice(None, None, 3), [0, -1, 3], torch.tensor([5, 1])]
POS_SLICES += [Slice(-1), Slice((1, 4)), Slice([0, 2]), Slice(None), np.int64(3)]
POS_IDS = ["last", "int", "tuple", "slice", "strided", "list", "tensor"]
POS_IDS += ["Slice-int", "Slice-tuple", "Slice-list", "Slice-None", "numpy-int"]


@pytest.mark.parametrize("pos_slice", POS_SLICES, ids=POS_IDS)
def test_pos_slice_keeps_what_transformer_lens_keeps(model, tokens, pos_slice):
    _, sliced = model.run_with_cache(tokens, names_filter=NAMES, pos_slice=pos_slice)
    expected = transformer_lens_cache(model, tokens, pos_slice)
    assert set(sliced) == set(NAMES) == set(expected)
    for name in NAMES:
        torch.testing.assert_close(sliced[name], expected[name], atol=0, rtol=0)
        if not (isinstance(pos_slice, Slice) and pos_slice.mode == "identity"):
            assert_compact(sliced[name])
    # A bare int keeps the position axis (as TransformerLens); only Slice(int) drops it.
    pattern = sliced["blocks.1.attn.hook_pattern"]
    assert pattern.shape[-1] == tokens.shape[1]
    assert pattern.ndim == (3 if isinstance(pos_slice, Slice) and pos_slice.mode == "int" else 4)
    if isinstance(pos_slice, int):
        assert sliced["blocks.0.hook_resid_post"].shape == (2, 1, model.cfg.d_model)


def test_pos_slice_with_remove_batch_dim_and_gradients(model, tokens):
    one = tokens[:1]
    full = full_cache(model, one)
    _, cache = model.run_with_cache(
        one, names_filter=NAMES, pos_slice=slice(2, 5), remove_batch_dim=True
    )
    for name in NAMES:
        expected = select(full[name], name, slice(2, 5))[0]
        torch.testing.assert_close(cache[name], expected, atol=0, rtol=0)
    assert not cache.has_batch_dim
    loss, grads = model.run_with_cache(
        one, names_filter="blocks.0.hook_resid_post", pos_slice=-1, incl_bwd=True,
        return_type="loss",
    )  # fmt: skip
    assert grads["blocks.0.hook_resid_post_grad"].shape == (1, 1, model.cfg.d_model)
    assert grads["blocks.0.hook_resid_post"].shape == (1, 1, model.cfg.d_model)
    model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_dtype_stores_a_smaller_type(model, tokens, dtype):
    full = full_cache(model, tokens)
    _, small = model.run_with_cache(tokens, names_filter=NAMES, dtype=dtype)
    for name in NAMES:
        assert small[name].dtype == dtype
        torch.testing.assert_close(small[name], full[name].to(dtype), atol=0, rtol=0)
    assert small.nbytes * 2 == full.nbytes


def test_default_cache_holds_the_activations_without_copying(model, tokens):
    seen = {}
    hook = ("blocks.0.hook_resid_post", lambda resid, hook: seen.setdefault("resid", resid))
    with model.hooks(fwd_hooks=[hook]):
        _, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_resid_post")
    kept = cache["blocks.0.hook_resid_post"]
    assert kept.data_ptr() == seen["resid"].data_ptr() and not kept.requires_grad


def test_device_cpu_keeps_values(model, tokens):
    full = full_cache(model, tokens)
    _, moved = model.run_with_cache(tokens, names_filter=NAMES, device="cpu")
    for name in NAMES:
        assert moved[name].device.type == "cpu"
        torch.testing.assert_close(moved[name], full[name], atol=0, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_device_cpu_offloads_from_the_gpu_into_pinned_memory(model, tokens):
    gpu_model = HookedTransformer(model.cfg).eval()
    gpu_model.load_state_dict(model.state_dict())
    gpu_model.to("cuda")
    on_gpu = full_cache(gpu_model, tokens.cuda())
    _, offloaded = gpu_model.run_with_cache(
        tokens.cuda(), names_filter=NAMES, device="cpu", dtype=torch.float16, pos_slice=[1, 3]
    )
    for name in NAMES:
        kept = offloaded[name]
        assert kept.device.type == "cpu" and kept.is_pinned() and kept.dtype == torch.float16
        expected = select(on_gpu[name], name, [1, 3]).to(torch.float16).cpu()
        torch.testing.assert_close(kept, expected, atol=0, rtol=0)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"pos_slice": 7}, IndexError, "out of range for blocks.0.hook_resid_post"),
        ({"pos_slice": [0, 9]}, IndexError, "out of range"),
        ({"pos_slice": Slice(7)}, IndexError, "pos_slice=7 is out of range"),
        ({"pos_slice": "last"}, TypeError, "pos_slice must be"),
        ({"pos_slice": torch.tensor([0.5])}, TypeError, "integer positions"),
        ({"dtype": torch.int8}, TypeError, "floating dtype"),
        ({"remove_batch_dim": True}, ValueError, "batch of one"),
    ],
)
def test_bad_options_get_clear_errors_and_leave_no_hook(model, tokens, options, error, message):
    with pytest.raises(error, match=message):
        model.run_with_cache(tokens, names_filter=NAMES, **options)
    assert not any(point.has_hooks for point in model.hook_points())
