"""The modules TransformerLens users import from: each reachable under TL's name, and each
behaving as TL's (key/value cache against the full forward, norms against reference maths)."""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import LlamaRMSNorm

import interp
from interp import HookedTransformer, HookedTransformerConfig

TL_NAMES = {
    "interp.utils": ["Slice", "to_numpy", "test_prompt", "get_attention_mask",
                     "tokenize_and_concatenate", "lm_cross_entropy_loss", "lm_accuracy",
                     "get_device", "remove_batch_dim", "is_square", "is_lower_triangular",
                     "composition_scores", "get_offset_position_ids", "init_xavier_uniform_",
                     "init_xavier_normal_", "init_kaiming_uniform_", "init_kaiming_normal_",
                     "calc_fan_in_and_fan_out", "get_corner", "get_act_name",
                     "repeat_along_head_dimension", "get_nested_attr", "set_nested_attr",
                     "override_or_use_default_value", "is_library_available"],
    "interp.components": ["LayerNorm", "LayerNormPre", "RMSNorm", "RMSNormPre", "Embed",
                          "Unembed", "PosEmbed", "Attention", "MLP", "TransformerBlock"],
    "interp.past_key_value_caching": ["HookedTransformerKeyValueCache",
                                      "HookedTransformerKeyValueCacheEntry"],
    "interp.evals": ["sanity_check", "induction_loss", "ioi_eval", "IOIDataset", "evaluate",
                     "evaluate_on_dataset", "make_wiki_data_loader", "make_owt_data_loader",
                     "make_pile_data_loader", "make_code_data_loader"],
    "interp.head_detector": ["detect_head"],
    "interp.loading_from_pretrained": ["OFFICIAL_MODEL_NAMES", "MODEL_ALIASES",
                                       "get_official_model_name", "get_pretrained_model_config",
                                       "convert_hf_model_config", "convert_neel_model_config",
                                       "get_pretrained_state_dict"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(TL_NAMES))
def test_transformer_lens_names_import(module):
    loaded = importlib.import_module(module)
    missing = [name for name in TL_NAMES[module] if not hasattr(loaded, name)]
    assert not missing
    # ...and the submodule is an attribute of the package after a plain `import interp`.
    assert getattr(interp, module.split(".")[1]) is loaded


def test_import_lines_from_transformer_lens_scripts():
    from interp.utils import Slice, lm_cross_entropy_loss  # noqa: F401

    assert interp.HookedTransformerKeyValueCache is (
        interp.past_key_value_caching.HookedTransformerKeyValueCache
    )


# ------------------------------------------------------------------------ key/value cache
@pytest.fixture(scope="module")
def model() -> HookedTransformer:
    cfg = HookedTransformerConfig(n_layers=2, d_model=32, n_heads=4, d_vocab=50, n_ctx=16, seed=0)
    return HookedTransformer(cfg).eval()


def test_kv_cache_continuation_matches_the_full_forward(model):
    from interp.past_key_value_caching import (
        HookedTransformerKeyValueCache,
        HookedTransformerKeyValueCacheEntry,
    )

    tokens = torch.randint(0, 50, (3, 12), generator=torch.Generator().manual_seed(0))
    full = model(tokens)
    cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", batch_size=3)
    assert isinstance(cache[0], HookedTransformerKeyValueCacheEntry)
    assert cache[0].past_keys.shape == (3, 0, 4, 8) and cache[0].past_keys.dtype == torch.float32
    pieces = [model(tokens[:, a:b], past_kv_cache=cache) for a, b in [(0, 5), (5, 6), (6, 12)]]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=0)
    assert cache[1].past_values.shape == (3, 12, 4, 8)
    torch.testing.assert_close(cache.previous_attention_mask, torch.ones(3, 12, dtype=torch.int))


def test_frozen_kv_cache_reads_the_prefix_without_growing(model):
    from interp.past_key_value_caching import HookedTransformerKeyValueCache

    tokens = torch.randint(0, 50, (2, 10), generator=torch.Generator().manual_seed(1))
    cache = HookedTransformerKeyValueCache.init_cache(model.cfg, None, batch_size=2)
    model(tokens[:, :6], past_kv_cache=cache)
    cache.freeze()
    for end in (7, 10, 8):  # several continuations of the same prefix
        out = model(tokens[:, 6:end], past_kv_cache=cache)
        torch.testing.assert_close(out, model(tokens[:, :end])[:, 6:], atol=1e-5, rtol=0)
        assert cache.length == 6 and cache[0].past_keys.shape[1] == 6
    cache.unfreeze()
    model(tokens[:, 6:], past_kv_cache=cache)
    assert cache.length == 10


def test_kv_cache_with_left_padding_matches_the_padded_forward(model):
    from interp.past_key_value_caching import HookedTransformerKeyValueCache

    tokens = torch.randint(1, 50, (2, 9), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(tokens)
    mask[0, :3] = 0  # the first row is left-padded
    full = model(tokens, attention_mask=mask)
    cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", batch_size=2)
    first = model(tokens[:, :5], attention_mask=mask[:, :5], past_kv_cache=cache)
    rest = model(tokens[:, 5:], past_kv_cache=cache)
    real = mask.bool()
    torch.testing.assert_close(torch.cat([first, rest], 1)[real], full[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(cache.previous_attention_mask, mask, check_dtype=False)


def test_kv_cache_batch_mismatch_is_a_clear_error(model):
    from interp.past_key_value_caching import HookedTransformerKeyValueCache

    cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", batch_size=1)
    with pytest.raises(ValueError, match=r"holds a batch of 1.*batch_size=2"):
        model(torch.zeros(2, 3, dtype=torch.long), past_kv_cache=cache)


# ----------------------------------------------------------------------------- the norms
def norm_cfg(**overrides) -> dict:
    return dict(n_layers=1, d_model=16, n_heads=2, d_vocab=10, n_ctx=8, eps=1e-6, **overrides)


def x() -> torch.Tensor:
    return 3 * torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0)) + 1


def test_layer_norm_pre_is_layer_norm_without_weights():
    from interp.components import LayerNorm, LayerNormPre

    norm = LayerNormPre(norm_cfg())  # a dict config, as TransformerLens accepts
    assert not list(norm.parameters())
    torch.testing.assert_close(norm(x()), F.layer_norm(x(), (16,), eps=1e-6))
    seen = {}
    norm.hook_scale.add_hook(lambda scale, hook: seen.__setitem__("scale", scale))
    norm(x())
    centred = x() - x().mean(-1, keepdim=True)
    torch.testing.assert_close(seen["scale"], (centred.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt())
    assert LayerNorm(HookedTransformerConfig(**norm_cfg()), length=7).w.shape == (7,)


def test_rms_norm_matches_llama_rms_norm():
    from interp.components import RMSNorm, RMSNormPre

    norm = RMSNorm(norm_cfg())
    reference = LlamaRMSNorm(16, eps=1e-6)
    with torch.no_grad():
        weight = torch.randn(16, generator=torch.Generator().manual_seed(1))
        norm.w.copy_(weight)
        reference.weight.copy_(weight)
    torch.testing.assert_close(norm(x()), reference(x()), atol=1e-6, rtol=1e-6)
    with torch.no_grad():
        reference.weight.fill_(1.0)
    torch.testing.assert_close(RMSNormPre(norm_cfg())(x()), reference(x()), atol=1e-6, rtol=1e-6)
    assert RMSNorm(norm_cfg(), length=64).w.shape == (64,)


def test_rms_norm_hooks_fire_and_half_precision_is_computed_in_float32():
    from interp.components import RMSNorm

    norm = RMSNorm(norm_cfg(dtype=torch.bfloat16))
    seen = {}
    norm.hook_scale.add_hook(lambda scale, hook: seen.__setitem__("scale", scale))
    norm.hook_normalized.add_hook(lambda act, hook: seen.__setitem__("normalized", act))
    out = norm(x().bfloat16())
    assert out.dtype == torch.bfloat16 and seen["scale"].dtype == torch.float32
    # As TransformerLens: the hook sees the float32 result, the output is cast back.
    normalized = x().bfloat16().float() / seen["scale"]
    torch.testing.assert_close(seen["normalized"], normalized, atol=0, rtol=0)
    torch.testing.assert_close(out, (normalized * norm.w.float()).bfloat16(), atol=0, rtol=0)
    # The scale a hook returns is the one the norm divides by.
    norm.hook_scale.add_hook(lambda scale, hook: 2 * scale)
    halved = norm(x().bfloat16())
    torch.testing.assert_close(halved.float(), out.float() / 2, atol=1e-2, rtol=1e-2)
