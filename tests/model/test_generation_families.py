"""KV-cache generation on every model family: greedy tokens with the cache equal those without
it and Hugging Face's greedy ``generate`` on the same weights (random tiny checkpoints of
``tests.loading.test_families_parity``: GQA, partial rotary, rope scaling, soft caps, QK norms and
sliding windows shorter than the generated text); a left-padded batch equals each prompt
generated alone, and Hugging Face's generation of the same padded batch."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer
from interp.kv_cache import KeyValueCache
from tests.loading.test_families_parity import CASES, VOCAB, saved
from tests.support.family_models import FAMILIES, make_model
from tests.support.tolerances import model_error_bound, within_contract

N_NEW = 12  # longer than every case's sliding window (3 to 5), so the windows bite
PROMPT_LENGTHS = (7, 4, 5)  # a batch left-padded to 7


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, tmp_path_factory):
    """(our model, Hugging Face's) on one case's random weights, saved and loaded back."""
    folder = tmp_path_factory.mktemp(request.param)
    hf_model = saved(folder, request.param)
    model = HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None).eval()
    hf_model = type(hf_model).from_pretrained(folder).eval()
    return model, hf_model


def padded_prompts() -> tuple[torch.Tensor, torch.Tensor]:
    """Random prompts of ``PROMPT_LENGTHS`` tokens, left-padded with token 0, and their mask."""
    generator = torch.Generator().manual_seed(2)
    width = max(PROMPT_LENGTHS)
    tokens = torch.randint(1, VOCAB, (len(PROMPT_LENGTHS), width), generator=generator)
    mask = torch.ones_like(tokens)
    for row, length in enumerate(PROMPT_LENGTHS):
        tokens[row, : width - length] = 0
        mask[row, : width - length] = 0
    return tokens, mask


def ours(model: HookedTransformer, tokens: torch.Tensor, **kwargs) -> torch.Tensor:
    return model.generate(
        tokens, max_new_tokens=N_NEW, do_sample=False, stop_at_eos=False, **kwargs
    )


def theirs(hf_model, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    with torch.no_grad():
        return hf_model.generate(
            tokens,
            attention_mask=torch.ones_like(tokens) if mask is None else mask,
            max_new_tokens=N_NEW,
            min_new_tokens=N_NEW,
            do_sample=False,
            pad_token_id=0,
        )


def test_cached_generation_equals_uncached_and_hugging_face(pair):
    model, hf_model = pair
    prompt = padded_prompts()[0][:1]  # the unpadded row
    cached = ours(model, prompt)
    assert cached.shape == (1, prompt.shape[1] + N_NEW)
    assert torch.equal(cached, ours(model, prompt, use_past_kv_cache=False))
    assert torch.equal(cached, theirs(hf_model, prompt))


def test_left_padded_batch_equals_each_prompt_alone_and_hugging_face(pair):
    model, hf_model = pair
    tokens, mask = padded_prompts()
    batch = ours(model, tokens, attention_mask=mask)
    assert torch.equal(batch, ours(model, tokens, attention_mask=mask, use_past_kv_cache=False))
    for row, length in enumerate(PROMPT_LENGTHS):
        alone = ours(model, tokens[row : row + 1, tokens.shape[1] - length :])
        assert torch.equal(batch[row, -N_NEW:], alone[0, -N_NEW:]), row
    assert torch.equal(batch, theirs(hf_model, tokens, mask))


def test_cached_step_logits_equal_hugging_face_generation(pair):
    """Token by token through our key/value cache, a left-padded batch gets the logits Hugging
    Face's ``generate`` computed at each step (within 1e-4), windows and soft caps included."""
    model, hf_model = pair
    tokens, mask = padded_prompts()
    with torch.no_grad():
        generated = hf_model.generate(
            tokens,
            attention_mask=mask,
            max_new_tokens=N_NEW,
            min_new_tokens=N_NEW,
            do_sample=False,
            pad_token_id=0,
            return_dict_in_generate=True,
            output_logits=True,
        )
        kv_cache = KeyValueCache.empty(model.cfg.n_layers)
        step_logits = [model(tokens, attention_mask=mask, past_kv_cache=kv_cache)[:, -1]]
        for step in range(N_NEW - 1):
            next_token = generated.sequences[:, tokens.shape[1] + step, None]
            step_logits.append(model(next_token, past_kv_cache=kv_cache)[:, -1])
    assert kv_cache.length == tokens.shape[1] + N_NEW - 1
    for step, (mine, hf_logits) in enumerate(zip(step_logits, generated.logits, strict=True)):
        bound = within_contract(1e-4, model_error_bound(model.cfg, hf_logits.abs().max()))
        assert (mine - hf_logits).abs().max() <= bound, step


@pytest.mark.parametrize("family", list(FAMILIES))
def test_sampled_generation_with_and_without_cache_agree(family):
    """Sampling with one seed draws the same tokens with and without the cache (the cache
    changes no logit beyond rounding), on a left-padded batch of a random model of
    ``tests.support.family_models``."""
    model = make_model(family, d_vocab=VOCAB)
    tokens, mask = padded_prompts()
    sampled = [
        model.generate(
            tokens,
            max_new_tokens=N_NEW,
            attention_mask=mask,
            stop_at_eos=False,
            top_k=20,
            seed=3,
            use_past_kv_cache=use_cache,
        )
        for use_cache in (True, False)
    ]
    assert torch.equal(sampled[0], sampled[1])
    logits = model(tokens, attention_mask=mask)
    assert logits[mask.bool()].isfinite().all()
