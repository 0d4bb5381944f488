"""A key/value cache used with custom attention masks, as TransformerLens's test_kv_cache
does it: a prefix, then new tokens with a mask that hides one of them; a left-padded batch
decoded a token at a time with a mask that grows. Each equals the full forward (and
TransformerLens 2.18's logits on the same weights)."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformerKeyValueCache
from interp.kv_cache import KeyValueCache
from tests.support.tl218_components import case, close, model_of

MODELS = ["causal", "rotary", "attn_only_shortformer"]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("cache_class", ["transformer_lens", "interp"])
def test_new_tokens_with_a_custom_mask_equal_the_full_forward(name, cache_class):
    model, expected = model_of(f"kv_{name}"), case(f"kv_{name}")
    tokens, post_mask = expected["tokens"], expected["post_mask"]
    pre, post = tokens[:, :3], tokens[:, 3:]
    if cache_class == "transformer_lens":
        cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", tokens.shape[0])
    else:
        cache = KeyValueCache.empty(model.cfg.n_layers)
    model(pre, past_kv_cache=cache)  # no mask: nothing cached is padding
    masked = model(post, attention_mask=post_mask, past_kv_cache=cache)
    full_mask = torch.cat([torch.ones_like(pre), post_mask], dim=1)
    full = model(tokens, attention_mask=full_mask)
    real = full_mask[:, 3:].bool()  # a hidden query's own output is arbitrary
    close(masked[real], full[:, 3:][real], depth=6)
    close(masked[real], expected["masked_logits"][real], depth=6)
    close(full[full_mask.bool()], expected["full_masked_logits"][full_mask.bool()], depth=6)
    assert cache.attention_mask.tolist() == full_mask.tolist()


@pytest.mark.parametrize("name", MODELS)
def test_left_padded_decoding_with_a_growing_mask_equals_the_full_forward(name):
    model, expected = model_of(f"kv_{name}"), case(f"kv_{name}")
    tokens, prompt_mask = expected["tokens"], expected["prompt_mask"]
    cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", tokens.shape[0])
    steps = [model(tokens[:, :4], attention_mask=prompt_mask, past_kv_cache=cache)]
    for position in range(4, tokens.shape[1]):
        one = torch.ones(tokens.shape[0], 1, dtype=torch.long)
        steps.append(model(tokens[:, position : position + 1], attention_mask=one,
                           past_kv_cache=cache))  # fmt: skip
    stepped = torch.cat(steps, dim=1)
    grown = torch.cat([prompt_mask, torch.ones(2, tokens.shape[1] - 4, dtype=torch.long)], 1)
    full = model(tokens, attention_mask=grown)
    real = grown.bool()
    close(stepped[real], full[real], depth=6)
    close(stepped[real], expected["stepped_logits"][real], depth=6)
    close(full[real], expected["full_padded_logits"][real], depth=6)


def test_a_frozen_cache_reads_the_prefix_mask_without_growing():
    model, expected = model_of("kv_causal"), case("kv_causal")
    tokens, post_mask = expected["tokens"], expected["post_mask"]
    cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", tokens.shape[0])
    model(tokens[:, :3], past_kv_cache=cache)
    cache.freeze()
    first = model(tokens[:, 3:], attention_mask=post_mask, past_kv_cache=cache)
    again = model(tokens[:, 3:], attention_mask=post_mask, past_kv_cache=cache)
    torch.testing.assert_close(first, again)
    assert cache.length == 3


@pytest.mark.parametrize("name", MODELS)
def test_input_to_embed_then_start_at_layer_with_a_cache(name):
    """TransformerLens's pattern: ``input_to_embed`` with the cache (which records the new
    positions' mask), then ``forward(residual, start_at_layer=0, ...)`` with what it returned."""
    model, expected = model_of(f"kv_{name}"), case(f"kv_{name}")
    tokens, post_mask = expected["tokens"], expected["post_mask"]
    cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", tokens.shape[0])
    model(tokens[:, :3], past_kv_cache=cache)
    residual, post, shortformer_pos_embed, mask = model.input_to_embed(
        tokens[:, 3:], attention_mask=post_mask, past_kv_cache=cache
    )
    logits = model(
        residual,
        start_at_layer=0,
        tokens=post,
        shortformer_pos_embed=shortformer_pos_embed,
        attention_mask=mask,
        past_kv_cache=cache,
    )
    full_mask = torch.cat([torch.ones_like(tokens[:, :3]), post_mask], dim=1)
    assert cache.attention_mask.tolist() == full_mask.tolist()  # extended once
    real = post_mask.bool()
    close(logits[real], expected["masked_logits"][real], depth=6)
