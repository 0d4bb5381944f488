"""ActivationCache: shorthand keys, moving, batch dimension, size."""

from __future__ import annotations

import pytest
import torch

from interp import ActivationCache, HookedTransformer, HookedTransformerConfig


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
