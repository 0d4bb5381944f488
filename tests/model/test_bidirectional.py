"""Bidirectional (encoder-style) models built from a config, such as a balanced-brackets
classifier, against TransformerLens 2.18 on the same random weights, with and without a
padding ``attention_mask``; the fused and explicit paths; masking padding by hand."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.patching import get_act_patch_resid_pre
from tests.support.tl218_components import case, close, model_of

CASES = [
    "bidirectional",
    "bidirectional_right_padded",
    "bidirectional_left_padded",
    "causal_left_padded",
]


@pytest.mark.parametrize("name", CASES)
def test_logits_and_every_hook_equal_transformer_lens(name):
    model, expected = model_of(name), case(name)
    logits, cache = model.run_with_cache(
        expected["tokens"], attention_mask=expected.get("attention_mask")
    )
    tl_hooks = sorted(key.removeprefix("cache.") for key in expected if key.startswith("cache."))
    assert sorted(cache.keys()) == tl_hooks
    for hook in tl_hooks:
        close(cache[hook], expected[f"cache.{hook}"], depth=8)
    close(logits, expected["logits"], depth=8)


@pytest.mark.parametrize("name", CASES[:3])
def test_fused_path_equals_the_explicit_one(name):
    model, expected = model_of(name), case(name)
    mask = expected.get("attention_mask")
    fused = model(expected["tokens"], attention_mask=mask)
    with model.hooks(fwd_hooks=[(lambda n: n.endswith("hook_pattern"), lambda p, hook: None)]):
        explicit = model(expected["tokens"], attention_mask=mask)
    close(fused, explicit, depth=8)


def test_every_position_sees_every_key():
    model, tokens = model_of("bidirectional"), case("bidirectional")["tokens"]
    _, cache = model.run_with_cache(tokens)
    pattern = cache["pattern", 0]
    assert (pattern > 0).all()  # no causal mask: later keys are attended too
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % model.cfg.d_vocab
    # The last token changes what the first position computes.
    assert not torch.allclose(model(changed)[:, 0], model(tokens)[:, 0])


def test_padding_keys_are_attended_unless_masked_as_transformer_lens():
    """As TransformerLens's HookedTransformer, a bidirectional model's attention_mask only sets
    the positions (padding gets no position embedding); an additive mask on the scores (what
    a brackets classifier adds with a hook) hides the padding keys."""
    model, expected = model_of("bidirectional_right_padded"), case("bidirectional_right_padded")
    tokens, mask = expected["tokens"], expected["attention_mask"]
    _, cache = model.run_with_cache(tokens, attention_mask=mask)
    padded_keys = cache["pattern", 0][0, :, :, mask[0] == 0]
    assert (padded_keys > 0).all()

    def hide_padding(scores, hook):
        return scores.masked_fill(mask[:, None, None, :] == 0, float("-inf"))

    hooked = model.run_with_hooks(
        tokens,
        attention_mask=mask,
        fwd_hooks=[(lambda name: name.endswith("attn_scores"), hide_padding)],
    )
    # Row 0's real tokens now compute what they compute alone, unpadded.
    n_real = int(mask[0].sum())
    alone = model(tokens[:1, :n_real])
    close(hooked[:1, :n_real], alone, depth=8)
    # The attention's own additive mask (TransformerLens's argument) does the same.
    attn, x = model.blocks[0].attn, cache["blocks.0.ln1.hook_normalized"]
    additive = torch.where(mask[:, None, None, :] == 0, float("-inf"), 0.0)
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_attn_scores", hide_padding)]):
        expected_out = attn(x, x, x)
    close(attn(x, x, x, None, additive), expected_out, depth=2)


def test_classifier_config_and_batched_patching():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=5, d_vocab_out=2,
        n_ctx=10, act_fn="relu", attention_dir="bidirectional", seed=1,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    clean = torch.tensor([[0, 1, 1, 2, 2, 3], [0, 1, 2, 1, 2, 3]])
    corrupted = torch.tensor([[0, 1, 2, 2, 1, 3], [0, 2, 1, 1, 2, 3]])
    _, clean_cache = model.run_with_cache(clean)

    def metric(logits):
        return (logits[:, 0, 1] - logits[:, 0, 0]).mean()  # the class read at position 0

    with pytest.warns(UserWarning, match="bidirectional"):
        patched = get_act_patch_resid_pre(model, corrupted, clean_cache, metric)
    # A patch at the last position changes position 0's output: no causal shortcut was taken.
    for layer in range(2):

        def patch(resid, hook):
            resid[:, -2] = clean_cache[hook.name][:, -2]
            return resid

        name = f"blocks.{layer}.hook_resid_pre"
        expected = metric(model.run_with_hooks(corrupted, fwd_hooks=[(name, patch)]))
        close(patched[layer, -2], expected, depth=8)


def test_local_attention_contradicts_bidirectional():
    with pytest.raises(ValueError, match="attention_dir='bidirectional'"):
        HookedTransformerConfig(
            n_layers=1, d_model=8, n_ctx=4, d_head=4, attention_dir="bidirectional",
            use_local_attn=True, window_size=2, attn_types=["local"],
        )  # fmt: skip


def test_brackets_tutorial_padding_hooks_through_hook_tokens():
    """ARENA's balanced-brackets classifier masks its padding with permanent hooks: one on
    ``hook_tokens`` (``use_hook_tokens=True``) stores the mask in its ``ctx``, one on every
    ``attn_scores`` fills the padding keys in place."""
    pad = 4
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=16, d_vocab=5, d_vocab_out=2,
        n_ctx=10, act_fn="relu", attention_dir="bidirectional", use_attn_result=True,
        use_hook_tokens=True, seed=3,
    )  # fmt: skip
    model = HookedTransformer(cfg)

    def cache_padding_tokens_mask(tokens, hook):
        hook.ctx["padding_tokens_mask"] = (tokens == pad)[:, None, None, :]

    def apply_padding_tokens_mask(attn_scores, hook):
        attn_scores.masked_fill_(model.hook_dict["hook_tokens"].ctx["padding_tokens_mask"], -1e5)
        if hook.layer() == model.cfg.n_layers - 1:
            del model.hook_dict["hook_tokens"].ctx["padding_tokens_mask"]

    for name, hook in model.hook_dict.items():
        if name == "hook_tokens":
            hook.add_perma_hook(cache_padding_tokens_mask)
        elif name.endswith("attn_scores"):
            hook.add_perma_hook(apply_padding_tokens_mask)
    padded = torch.tensor([[0, 1, 2, 3, pad, pad], [0, 1, 1, 2, 2, 3]])
    logits, cache = model.run_with_cache(padded)
    close(logits[:1, :4], model(padded[:1, :4]), depth=8)
    assert cache["hook_tokens"].tolist() == padded.tolist()
    assert cache["blocks.1.attn.hook_result"].shape == (2, 6, 2, 16)
