"""HookedTransformer against Hugging Face's GPT2LMHeadModel on the same weights."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.loading.hf import from_hf_model
from tests.conftest import make_hf_gpt2
from tests.support.tolerances import logits_bound, model_error_bound, model_tolerance

SHAPES = {
    "tiny": dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=64),
    "relu-wide-mlp": dict(
        n_layer=3,
        n_embd=48,
        n_head=6,
        vocab_size=500,
        n_positions=32,
        activation_function="relu",
        n_inner=100,
    ),
    "one-layer-gelu": dict(
        n_layer=1, n_embd=32, n_head=1, vocab_size=300, activation_function="gelu"
    ),
    "gpt2-small": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
}


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_logits_patterns_and_loss_equal_hugging_face(shape):
    hf_model = make_hf_gpt2(**SHAPES[shape])
    model = from_hf_model(hf_model, tokenizer=None).eval()
    tokens = torch.randint(
        0, hf_model.config.vocab_size, (2, 17), generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        expected = hf_model(tokens, labels=tokens, output_attentions=True)
        logits, cache = model.run_with_cache(tokens)
        loss = model(tokens, return_type="loss")
        plain_logits = model(tokens)
    bound = logits_bound(model.cfg, expected.logits)
    assert (logits - expected.logits).abs().max() <= bound
    assert (plain_logits - expected.logits).abs().max() <= bound
    # The loss moves by at most twice the logits' error (logsumexp, less the target's logit).
    loss_bound = 2 * model_error_bound(model.cfg, expected.logits.abs().max())
    assert abs(loss.item() - expected.loss.item()) <= loss_bound
    for layer, hf_pattern in enumerate(expected.attentions):
        # A probability moves by at most twice its scores' error.
        scores = cache["attn_scores", layer][cache["attn_scores", layer].isfinite()]
        within = model_tolerance(model.cfg, 2 * scores.abs().max())
        torch.testing.assert_close(cache["pattern", layer], hf_pattern, **within)


def test_loss_per_token_and_both(hf_and_model):
    hf_model, model = hf_and_model
    tokens = torch.randint(0, 1000, (3, 12))
    with torch.no_grad():
        per_token = model(tokens, return_type="loss", loss_per_token=True)
        logits, loss = model(tokens, return_type="both")
        hf_logits = hf_model(tokens).logits
    assert per_token.shape == (3, 11)
    expected = torch.nn.functional.cross_entropy(
        hf_logits[:, :-1].reshape(-1, 1000), tokens[:, 1:].reshape(-1), reduction="none"
    ).view(3, 11)
    within = model_tolerance(model.cfg, 2 * hf_logits.abs().max())  # twice the logits' error
    torch.testing.assert_close(per_token, expected, **within)
    torch.testing.assert_close(loss, expected.mean(), **within)
    assert model(tokens, return_type=None) is None


def test_causality(hf_and_model):
    _, model = hf_and_model
    tokens = torch.randint(0, 1000, (1, 20))
    changed = tokens.clone()
    changed[0, 12] = (changed[0, 12] + 1) % 1000
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    torch.testing.assert_close(before[:, :12], after[:, :12], atol=0, rtol=0)
    assert (before[:, 12:] - after[:, 12:]).abs().max() > 1e-3


def test_left_padding_matches_unpadded_runs(hf_and_model):
    _, model = hf_and_model
    short, long = torch.randint(0, 1000, (1, 5)), torch.randint(0, 1000, (1, 9))
    pad = torch.zeros(1, 4, dtype=torch.long)
    batch = torch.cat([torch.cat([pad, short], dim=1), long])
    mask = torch.ones_like(batch)
    mask[0, :4] = 0
    with torch.no_grad():
        padded_logits = model(batch, attention_mask=mask)
        within = model_tolerance(model.cfg, padded_logits)
        torch.testing.assert_close(padded_logits[0, 4:], model(short)[0], **within)
        torch.testing.assert_close(padded_logits[1], model(long)[0], **within)
        # The loss leaves padding out: equal to the loss of the short text alone.
        padded_loss = model(batch[:1], attention_mask=mask[:1], return_type="loss")
        within = model_tolerance(model.cfg, 2 * padded_logits.abs().max())
        torch.testing.assert_close(padded_loss, model(short, return_type="loss"), **within)


def test_start_and_stop_at_layer_compose_to_full_forward(hf_and_model):
    _, model = hf_and_model
    tokens = torch.randint(0, 1000, (2, 10))
    with torch.no_grad():
        resid = model(tokens, stop_at_layer=1)
        _, cache = model.run_with_cache(tokens)
        torch.testing.assert_close(resid, cache["resid_pre", 1])
        logits = model(resid, start_at_layer=1)
        torch.testing.assert_close(logits, model(tokens), **model_tolerance(model.cfg, logits))
        loss = model(resid, start_at_layer=1, tokens=tokens, return_type="loss")
        torch.testing.assert_close(loss, model(tokens, return_type="loss"))
        torch.testing.assert_close(model(tokens, stop_at_layer=-1), cache["resid_pre", 1])


def test_text_input_and_token_helpers(gpt2_model):
    model = gpt2_model
    text = "Hello world, the cat sat on the mat"
    tokens = model.to_tokens(text)
    assert tokens.tolist() == [[50256, 15496, 995, 11, 262, 3797, 3332, 319, 262, 2603]]
    assert model.to_tokens(text, prepend_bos=False)[0, 0] == 15496
    assert model.to_str_tokens("Hello world") == ["<|endoftext|>", "Hello", " world"]
    assert model.to_string(tokens[0, 1:]) == text
    assert model.to_string(tokens) == ["<|endoftext|>" + text]
    assert model.to_single_token(" cat") == 3797
    with pytest.raises(ValueError, match="is not a single token: it is 2 tokens"):
        model.to_single_token(" catastrophe happened")
    with torch.no_grad():
        torch.testing.assert_close(model(text), model(tokens))
        batch_logits = model(["Hello world", "The cat sat on the mat"])
        within = model_tolerance(model.cfg, batch_logits)
        torch.testing.assert_close(batch_logits[0, :3], model("Hello world")[0], **within)


def test_generation_with_and_without_kv_cache_agree(gpt2_model):
    model = gpt2_model
    prompt = model.to_tokens("The cat sat")
    cached = model.generate(prompt, max_new_tokens=12, do_sample=False, use_past_kv_cache=True)
    uncached = model.generate(prompt, max_new_tokens=12, do_sample=False, use_past_kv_cache=False)
    assert cached.shape == (1, prompt.shape[1] + 12)
    assert torch.equal(cached, uncached)
    sampled = [
        model.generate(
            prompt,
            max_new_tokens=8,
            temperature=0.7,
            top_k=50,
            top_p=0.9,
            seed=3,
            use_past_kv_cache=kv,
        )
        for kv in (True, False)
    ]
    assert torch.equal(*sampled)
    text = model.generate("The cat sat", max_new_tokens=5, do_sample=False)
    assert isinstance(text, str) and text.startswith("The cat sat")


def test_batched_generation_with_left_padding_matches_single_prompts(gpt2_model):
    model = gpt2_model
    prompts = ["Hi", "The cat sat on the"]
    batch = model.generate(prompts, max_new_tokens=6, do_sample=False, stop_at_eos=False)
    singles = [
        model.generate(p, max_new_tokens=6, do_sample=False, stop_at_eos=False) for p in prompts
    ]
    assert batch == singles


def test_hooks_fire_during_generation(gpt2_model):
    model = gpt2_model
    seen_positions = []
    with model.hooks(
        fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: seen_positions.append(x.shape[1]))]
    ):
        model.generate(model.to_tokens("The cat"), max_new_tokens=3, do_sample=False)
    assert seen_positions == [3, 1, 1]  # the prompt, then one new token a step
    assert not any(hp.has_hooks for hp in model.hook_points())


def test_dropout_is_off_and_eval_train_agree(hf_and_model):
    _, model = hf_and_model
    tokens = torch.randint(0, 1000, (1, 8))
    model.train()
    train_logits = model(tokens)
    model.eval()
    torch.testing.assert_close(train_logits, model(tokens))


def test_half_precision_runs():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_vocab=50, n_ctx=16, dtype=torch.bfloat16, seed=0
    )
    model = HookedTransformer(cfg)
    logits, cache = model.run_with_cache(torch.arange(10)[None])
    assert logits.dtype == torch.bfloat16 and cache["pattern", 0].dtype == torch.bfloat16
    reference = HookedTransformer(HookedTransformerConfig(**{**cfg.to_dict(), "dtype": "float32"}))
    reference.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    assert (logits.float() - reference(torch.arange(10)[None])).abs().max() < 0.1


# ------------------------------------------------------------------------------ bad input
def _assert_unchanged(model, tokens, logits_before):
    assert not any(hp.has_hooks for hp in model.hook_points())
    torch.testing.assert_close(model(tokens), logits_before, atol=0, rtol=0)


@pytest.mark.parametrize(
    "bad_tokens, message",
    [
        (torch.tensor([[1, 2, 1000]]), "outside the vocabulary"),
        (torch.tensor([[-1, 2]]), "outside the vocabulary"),
        (torch.zeros(1, 65, dtype=torch.long), "longer than the model's context"),
        (torch.zeros(1, 0, dtype=torch.long), "Empty input"),
        (torch.zeros(2, 3, 4, dtype=torch.long), r"\[batch, pos\]"),
        (torch.rand(1, 3), "integer tensor"),
    ],
)
def test_bad_tokens_get_clear_errors_and_leave_model_unchanged(hf_and_model, bad_tokens, message):
    _, model = hf_and_model
    tokens = torch.randint(0, 1000, (1, 6))
    with torch.no_grad():
        before = model(tokens)
        with pytest.raises((ValueError, TypeError), match=message):
            model.run_with_cache(bad_tokens)
        with pytest.raises((ValueError, TypeError), match=message):
            model.run_with_hooks(bad_tokens, fwd_hooks=[("hook_embed", lambda x, hook: None)])
        _assert_unchanged(model, tokens, before)


def test_bad_arguments_get_clear_errors(gpt2_model):
    model = gpt2_model
    with pytest.raises(ValueError, match="return_type"):
        model("hi", return_type="probs")
    with pytest.raises(ValueError, match="out of range"):
        model("hi", stop_at_layer=5)
    with pytest.raises(ValueError, match="Empty input"):
        model("", prepend_bos=False)
    with pytest.raises(ValueError, match="n_ctx"):
        model.generate("hi", max_new_tokens=200)
    no_tokenizer = HookedTransformer(
        HookedTransformerConfig(n_layers=1, d_model=8, n_heads=2, d_vocab=10, n_ctx=8)
    )
    with pytest.raises(ValueError, match="no tokenizer"):
        no_tokenizer("hello")
