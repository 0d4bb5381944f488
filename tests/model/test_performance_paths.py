"""The fast paths of the forward pass: SDPA attention against the explicit path, and early exit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from interp import HookedTransformer
from interp.kv_cache import KeyValueCache
from interp.loading.hf import from_hf_model
from tests.conftest import make_hf_gpt2
from tests.support.tolerances import model_tolerance, tolerance


def make_model(dtype: torch.dtype = torch.float32, n_layer: int = 3) -> HookedTransformer:
    hf_model = make_hf_gpt2(n_layer=n_layer, n_positions=32)
    return from_hf_model(hf_model, tokenizer=None).eval().to(dtype)


def block_tolerance(cfg, expected: torch.Tensor) -> dict[str, float]:
    """One block (an attention and an MLP) computed two ways."""
    return tolerance(cfg.dtype, reduction=cfg.d_mlp, depth=2, magnitude=expected)


def keep_pattern(pattern, hook):
    """A read-only hook on the pattern: it forces the explicit attention path."""
    return None


EXPLICIT = [(lambda name: name.endswith("hook_pattern"), keep_pattern)]


def count_sdpa_calls(monkeypatch) -> list[int]:
    calls = [0]
    sdpa = F.scaled_dot_product_attention

    def counting_sdpa(*args, **kwargs):
        calls[0] += 1
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting_sdpa)
    return calls


def left_padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three rows of 9 positions, the first two with 3 and 8 positions of left padding."""
    tokens = torch.randint(0, 999, (3, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(tokens)
    mask[0, :3] = 0
    mask[1, :8] = 0
    return tokens, mask


def test_sdpa_runs_only_when_scores_and_pattern_are_unhooked(monkeypatch):
    model = make_model()
    tokens = torch.randint(0, 999, (2, 7))
    calls = count_sdpa_calls(monkeypatch)
    model(tokens)
    assert calls[0] == model.cfg.n_layers
    model.run_with_cache(tokens, names_filter="blocks.0.attn.hook_pattern")
    assert calls[0] == 2 * model.cfg.n_layers - 1  # block 0 took the explicit path
    model.run_with_cache(tokens, names_filter=lambda name: name.endswith("attn_scores"))
    assert calls[0] == 2 * model.cfg.n_layers - 1
    model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_z"))
    assert calls[0] == 3 * model.cfg.n_layers - 1


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
def test_fast_and_explicit_attention_agree_fp32(padded):
    model = make_model()
    if padded:
        tokens, mask = left_padded_batch()
    else:
        tokens, mask = torch.randint(0, 999, (3, 9)), None
    with torch.no_grad():
        fast_logits, fast_cache = model.run_with_cache(
            tokens, attention_mask=mask, names_filter=lambda name: name.endswith("hook_z")
        )
        explicit_logits, explicit_cache = model.run_with_cache(
            tokens, attention_mask=mask, names_filter=lambda name: name.endswith(("z", "pattern"))
        )
    within = model_tolerance(model.cfg, explicit_logits)
    torch.testing.assert_close(fast_logits, explicit_logits, **within)
    for layer in range(model.cfg.n_layers):
        explicit_z = explicit_cache["z", layer]
        within = model_tolerance(model.cfg, explicit_z)
        torch.testing.assert_close(fast_cache["z", layer], explicit_z, **within)


def test_explicit_path_from_the_config_flag_agrees():
    model = make_model()
    tokens, mask = left_padded_batch()
    with torch.no_grad():
        fast = model(tokens, attention_mask=mask)
        model.cfg.use_fast_attention = False
        explicit = model(tokens, attention_mask=mask)
    torch.testing.assert_close(fast, explicit, **model_tolerance(model.cfg, explicit))


def generate_logits(model, tokens, mask, chunks):
    """Logits of ``tokens`` fed through the KV cache in chunks of the given sizes."""
    kv_cache = KeyValueCache.empty(model.cfg.n_layers)
    logits, start = [], 0
    for size in chunks:
        step_mask = mask[:, start : start + size] if mask is not None else None
        logits.append(
            model(tokens[:, start : start + size], attention_mask=step_mask, past_kv_cache=kv_cache)
        )
        start += size
    return torch.cat(logits, dim=1)


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
def test_fast_and_explicit_attention_agree_with_the_kv_cache(padded):
    model = make_model()
    tokens, mask = left_padded_batch()
    mask = mask if padded else None
    chunks = [5, 1, 2, 1]  # a prompt, one token, two tokens (a mask is needed), one token
    with torch.no_grad():
        fast = generate_logits(model, tokens, mask, chunks)
        with model.hooks(fwd_hooks=EXPLICIT):
            explicit = generate_logits(model, tokens, mask, chunks)
        whole = model(tokens, attention_mask=mask)
    within = model_tolerance(model.cfg, explicit)
    torch.testing.assert_close(fast, explicit, **within)
    real = mask.bool() if padded else torch.ones_like(tokens, dtype=torch.bool)
    torch.testing.assert_close(fast[real], whole[real], **within)


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
def test_fast_and_explicit_attention_agree_bf16(padded):
    model = make_model(torch.bfloat16)
    tokens, mask = left_padded_batch()
    mask = mask if padded else None
    with torch.no_grad():
        fast = model(tokens, attention_mask=mask).float()
        with model.hooks(fwd_hooks=EXPLICIT):
            explicit = model(tokens, attention_mask=mask).float()
        fast_cached = generate_logits(model, tokens, mask, [6, 1, 2]).float()
        with model.hooks(fwd_hooks=EXPLICIT):
            explicit_cached = generate_logits(model, tokens, mask, [6, 1, 2]).float()
    assert fast.dtype == explicit.dtype
    within = model_tolerance(model.cfg, explicit, dtype=torch.bfloat16)
    torch.testing.assert_close(fast, explicit, **within)
    torch.testing.assert_close(fast_cached, explicit_cached, **within)


# ------------------------------------------------------------------------------ early exit
def test_early_exit_runs_only_the_blocks_it_needs():
    model = make_model()
    tokens = torch.randint(0, 999, (2, 7))
    later_calls = []
    model.add_hook("blocks.2.hook_resid_pre", lambda resid, hook: later_calls.append(hook.name))
    model.add_hook("ln_final.hook_scale", lambda scale, hook: later_calls.append(hook.name))
    names = ["hook_embed", "blocks.1.hook_resid_post"]
    with torch.no_grad():
        output, early = model.run_with_cache(tokens, names_filter=names, return_type=None)
        assert output is None and later_calls == []
        logits, full = model.run_with_cache(tokens, names_filter=names)
    assert later_calls == ["blocks.2.hook_resid_pre", "ln_final.hook_scale"]
    assert set(early) == {"hook_embed", "blocks.1.hook_resid_post"}
    for name in early:
        torch.testing.assert_close(early[name], full[name], atol=0, rtol=0)
    model.reset_hooks()  # the hooked final layer norm ran its explicit path: equal to rounding
    torch.testing.assert_close(logits, model(tokens), **model_tolerance(model.cfg, logits))


def test_default_run_with_cache_returns_logits_and_runs_every_block():
    model = make_model()
    tokens = torch.randint(0, 999, (2, 7))
    fired = []
    with model.hooks(fwd_hooks=[("blocks.2.hook_resid_post", lambda x, hook: fired.append(1))]):
        logits, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_resid_post")
    assert fired == [1] and list(cache) == ["blocks.0.hook_resid_post"]
    torch.testing.assert_close(logits, model(tokens), atol=0, rtol=0)


def test_return_type_none_still_caches_the_final_layer_norm():
    model = make_model()
    tokens = torch.randint(0, 999, (2, 7))
    output, cache = model.run_with_cache(
        tokens, names_filter=["ln_final.hook_scale", "blocks.0.hook_resid_pre"], return_type=None
    )
    _, full = model.run_with_cache(tokens, names_filter="ln_final.hook_scale")
    assert output is None
    torch.testing.assert_close(cache["ln_final.hook_scale"], full["ln_final.hook_scale"])


# ------------------------------------------------------------------------------ layer norm
def test_cached_layer_norm_agrees_and_a_hook_that_edits_the_scale_takes_effect():
    model = make_model()
    tokens = torch.randint(0, 999, (2, 7))
    with torch.no_grad():
        plain = model(tokens)
        cached_logits, cache = model.run_with_cache(tokens, names_filter=lambda n: "ln" in n)
        torch.testing.assert_close(cached_logits, plain, **model_tolerance(model.cfg, plain))
        ln1 = model.blocks[0].ln1
        x = model(tokens, stop_at_layer=0)
        expected_scale = (x.var(-1, keepdim=True, unbiased=False) + ln1.eps).sqrt()
        within = tolerance(torch.float32, reduction=model.cfg.d_model, magnitude=expected_scale)
        torch.testing.assert_close(cache["scale", 0, "ln1"], expected_scale, **within)

        def double_in_place(scale, hook):
            scale.mul_(2)
            return scale

        with model.hooks(fwd_hooks=[("blocks.0.ln1.hook_scale", double_in_place)]):
            _, edited = model.run_with_cache(tokens, names_filter="blocks.0.ln1.hook_normalized")
    centred = x - x.mean(-1, keepdim=True)
    expected = centred / (2 * expected_scale) * ln1.w + ln1.b
    within = tolerance(torch.float32, reduction=model.cfg.d_model, magnitude=expected)
    torch.testing.assert_close(edited["normalized", 0, "ln1"], expected, **within)


@pytest.mark.parametrize("explicit", [False, True])
def test_block_output_positions_and_allowed_keys_agree_with_the_full_block(explicit):
    """A block computing only some positions (the others only as keys and values), and a
    block over two sequences packed end to end with an attention mask, give the full
    block's values there."""
    model = make_model()
    block = model.blocks[1]
    resid = torch.randn(2, 9, model.cfg.d_model, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), model.hooks(fwd_hooks=EXPLICIT if explicit else ()):
        full = block(resid)
        outputs = torch.tensor([2, 5, 8])
        some = block(resid, output_positions=outputs)
        within = block_tolerance(model.cfg, full)
        torch.testing.assert_close(some, full[:, outputs], **within)

        # Positions 0-3 and 0-4 of two sequences, packed as 9 positions of one sequence.
        first, second = resid[:1, :4], resid[1:, :5]
        packed = torch.cat([first, second], dim=1)
        run_of = torch.tensor([0] * 4 + [1] * 5)
        position = torch.arange(9)
        allowed = (run_of[:, None] == run_of[None, :]) & (position[None, :] <= position[:, None])
        together = block(packed, allowed_keys=allowed[None, None])
        torch.testing.assert_close(together[:, :4], block(first), **within)
        torch.testing.assert_close(together[:, 4:], block(second), **within)
