"""ActivationCache: shorthand keys, moving, batch dimension, size, and TransformerLens 2.x's
cache API (stack_activation, apply_slice_to_batch_dim, apply_ln_to_stack, Slice) against TL."""

from __future__ import annotations

import pytest
import torch
from transformer_lens.ActivationCache import ActivationCache as TransformerLensCache
from transformer_lens.utilities import Slice as TransformerLensSlice

from interp import ActivationCache, HookedTransformer, HookedTransformerConfig
from interp.utils import Slice
from tests.support.tolerances import tolerance


def norm_tolerance(expected: torch.Tensor) -> dict[str, float]:
    """Two computations of a layer norm over d_model = 16 (its mean and variance: 16 terms)."""
    return tolerance(torch.float32, reduction=16, magnitude=expected)


@pytest.fixture
def model_and_cache():
    cfg = HookedTransformerConfig(n_layers=3, d_model=16, n_heads=2, d_vocab=20, n_ctx=8, seed=0)
    model = HookedTransformer(cfg)
    _, cache = model.run_with_cache(torch.arange(6)[None])
    return model, cache


def test_shorthand_keys(model_and_cache):
    _, cache = model_and_cache
    assert isinstance(cache, ActivationCache)
    assert cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
    assert cache["resid_post", -1] is cache["blocks.2.hook_resid_post"]
    assert cache["scale", 2, "ln1"] is cache["blocks.2.ln1.hook_scale"]
    assert cache["scale"] is cache["ln_final.hook_scale"]
    assert cache["embed"] is cache["hook_embed"]
    assert cache["z", 1].shape == (1, 6, 2, 8)
    assert ("pattern", 1) in cache and ("pattern", 7) not in cache
    assert len(cache) == len(list(cache)) == len(cache.keys())


def test_missing_key_says_how_to_keep_it(model_and_cache):
    model, _ = model_and_cache
    _, small = model.run_with_cache(torch.arange(3)[None], names_filter="hook_embed")
    with pytest.raises(KeyError, match="names_filter"):
        small["pattern", 0]


def test_size_to_and_remove_batch_dim(model_and_cache):
    _, cache = model_and_cache
    expected = sum(t.numel() * t.element_size() for t in cache.values())
    assert cache.nbytes == expected and "MiB" in repr(cache)
    cache.to("cpu", dtype=torch.float16)
    assert cache.nbytes == expected // 2
    assert cache["resid_pre", 0].dtype == torch.float16
    cache.remove_batch_dim()
    assert cache["resid_pre", 0].shape == (6, 16) and not cache.has_batch_dim


def test_remove_batch_dim_needs_batch_of_one():
    cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_heads=2, d_vocab=10, n_ctx=8)
    _, cache = HookedTransformer(cfg).run_with_cache(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="batch of 1"):
        cache.remove_batch_dim()


# ------------------------------------------------- TransformerLens 2.x API, checked against TL
@pytest.fixture(scope="module")
def batch_run():
    cfg = HookedTransformerConfig(n_layers=3, d_model=16, n_heads=2, d_vocab=20, n_ctx=8, seed=0)
    model = HookedTransformer(cfg).eval()
    with torch.no_grad():  # non-trivial norm weights and biases
        for name, param in model.named_parameters():
            if name.startswith("ln_final"):
                param.add_(
                    0.3 * torch.randn(param.shape, generator=torch.Generator().manual_seed(1))
                )
    tokens = torch.randint(0, 20, (3, 6), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens)
    return model, cache, TransformerLensCache(dict(cache.cache_dict), model)


def tl_slice(value):
    """The same slice as TransformerLens's own Slice class (the reference's input)."""
    if isinstance(value, Slice):
        return TransformerLensSlice(None if value.mode == "identity" else value.slice)
    return value


@pytest.mark.parametrize(
    "args", [("pattern",), ("resid_post", 2), ("scale", -1, "ln1"), ("z", None), ("q", 1, "attn")]
)
def test_stack_activation_matches_transformer_lens(batch_run, args):
    _, cache, reference = batch_run
    torch.testing.assert_close(
        cache.stack_activation(*args), reference.stack_activation(*args), atol=0, rtol=0
    )


@pytest.mark.parametrize("batch_slice", [0, -1, [0, 2], (1, 3), Slice([2, 0]), Slice(1), None])
def test_apply_slice_to_batch_dim_matches_transformer_lens(batch_run, batch_slice):
    _, cache, reference = batch_run
    sliced = cache.apply_slice_to_batch_dim(batch_slice)
    expected = reference.apply_slice_to_batch_dim(tl_slice(batch_slice))
    assert isinstance(sliced, ActivationCache) and sliced is not cache
    assert sliced.has_batch_dim == expected.has_batch_dim
    assert set(sliced.cache_dict) == set(expected.cache_dict)
    for name, activation in expected.cache_dict.items():
        torch.testing.assert_close(sliced[name], activation, atol=0, rtol=0)


@pytest.mark.parametrize("layer", [None, 1, 3])
@pytest.mark.parametrize(
    "slices",
    [
        {},
        {"pos_slice": -1},
        {"pos_slice": Slice((1, 4)), "batch_slice": [0, 2]},
        {"batch_slice": 1},
        {"pos_slice": [0, 5], "batch_slice": Slice((0, 2))},
    ],
)
@pytest.mark.parametrize("recompute_ln", [False, True])
def test_apply_ln_to_stack_matches_transformer_lens(batch_run, layer, slices, recompute_ln):
    _, cache, reference = batch_run
    pos_slice = slices.get("pos_slice")
    stack = cache.accumulated_resid(layer, pos_slice=pos_slice)
    actual = cache.apply_ln_to_stack(stack, layer, recompute_ln=recompute_ln, **slices)
    tl_slices = {key: tl_slice(value) for key, value in slices.items()}
    expected = reference.apply_ln_to_stack(stack, layer, recompute_ln=recompute_ln, **tl_slices)
    torch.testing.assert_close(actual, expected, **norm_tolerance(expected))


def test_recompute_ln_is_the_final_norm_of_each_component(batch_run):
    model, cache, _ = batch_run
    stack = cache.accumulated_resid()
    lens = cache.apply_ln_to_stack(stack, recompute_ln=True)
    # The last stage is the full stream, so the lens reproduces ln_final's cached output.
    normalized = cache["ln_final.hook_normalized"]
    torch.testing.assert_close(lens[-1], normalized, **norm_tolerance(normalized))
    naive = torch.nn.functional.layer_norm(stack[1], (16,), model.ln_final.w, model.ln_final.b)
    torch.testing.assert_close(lens[1], naive, **norm_tolerance(naive))


@pytest.mark.parametrize("pos_slice", [Slice(-1), Slice((1, 4)), Slice([0, 3]), (2, 5), Slice()])
@pytest.mark.parametrize("method", ["decompose_resid", "accumulated_resid", "stack_head_results"])
def test_slice_objects_in_decompositions_match_transformer_lens(batch_run, pos_slice, method):
    _, cache, reference = batch_run
    # Layer 2, not the unembed: TransformerLens 4's accumulated_resid recomputes the final norm
    # there (its logit-lens mode, recompute_ln), where 2.x and interp use the cached scale.
    actual = getattr(cache, method)(2, pos_slice=pos_slice, apply_ln=True)
    expected = getattr(reference, method)(2, pos_slice=tl_slice(pos_slice), apply_ln=True)
    torch.testing.assert_close(actual, expected, **norm_tolerance(expected))


def test_toggle_autodiff_sets_the_global_grad_mode(batch_run):
    _, cache, _ = batch_run
    try:
        cache.toggle_autodiff(False)
        assert not torch.is_grad_enabled()
        cache.toggle_autodiff(True)
        assert torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def test_missing_hook_says_the_model_has_none_with_closest_names(model_and_cache):
    _, cache = model_and_cache
    with pytest.raises(KeyError, match=r"no hook point named 'blocks.0.attn.hook_patern'") as info:
        cache["blocks.0.attn.hook_patern"]
    assert "blocks.0.attn.hook_pattern" in str(info.value) and "names_filter" not in str(info.value)
    with pytest.raises(KeyError, match=r"no hook point named \('bogus', 1\)"):
        cache["bogus", 1]
    with pytest.raises(KeyError, match="compute_head_results"):
        cache["result", 0]


@pytest.mark.parametrize("layer", [-100, 3, 97])
def test_out_of_range_layer_in_a_key_names_the_layer_and_n_layers(model_and_cache, layer):
    _, cache = model_and_cache
    with pytest.raises(KeyError, match=rf"Layer {layer} in cache key .* n_layers=3") as info:
        cache["resid_pre", layer]
    assert "blocks.-" not in str(info.value) and "names_filter" not in str(info.value)
    assert ("resid_pre", layer) not in cache


def test_hook_the_model_has_but_was_not_cached_says_widen_names_filter(model_and_cache):
    model, _ = model_and_cache
    _, small = model.run_with_cache(torch.arange(3)[None], names_filter="hook_embed")
    with pytest.raises(KeyError, match="not in this cache.*widen run_with_cache's names_filter"):
        small["pattern", 0]
    with pytest.raises(KeyError, match="gradient of .*incl_bwd=True"):
        small["hook_embed_grad"]
