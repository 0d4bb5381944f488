"""The offline GPT-2 tokenizer against Hugging Face's BPE on the same vocabulary files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from interp import get_tokenizer
from interp.tokenizers import (
    CharTokenizer,
    SymbolTokenizer,
    tokenizer_from_dict,
    tokenizer_to_dict,
)
from tests.conftest import make_hf_gpt2_tokenizer

SHAKESPEARE = Path(__file__).resolve().parents[3] / "shared" / "data" / "tinyshakespeare.txt"


def test_gpt2_ids_from_the_issue():
    tokenizer = get_tokenizer("gpt2")
    assert tokenizer.encode("Hello world, the cat sat on the mat") == [
        15496,
        995,
        11,
        262,
        3797,
        3332,
        319,
        262,
        2603,
    ]
    assert tokenizer.encode("<|endoftext|>") == [50256]
    assert tokenizer.vocab_size == 50257
    assert tokenizer.bos_token_id == tokenizer.eos_token_id == 50256


@pytest.fixture(scope="module")
def hf_reference():
    return make_hf_gpt2_tokenizer()


def test_matches_hugging_face_bpe_on_varied_text(hf_reference):
    tokenizer = get_tokenizer("gpt2")
    texts = [
        "  leading spaces, trailing spaces   ",
        "Numbers 1234567 and 3.14159; contractions: it's, they'll, we'd, I'm, you've",
        "Unicode: naïve café 日本語 emoji 🤖 Ω≈ç√",
        "Code:\n\tdef f(x):\n\t\treturn x**2  # comment\n\n\n",
        "MixedCASE wOrDs ALLCAPS",
    ]
    if SHAKESPEARE.exists():
        texts.append(SHAKESPEARE.read_text()[:20000])
    for text in texts:
        ids = tokenizer.encode(text)
        assert ids == hf_reference.encode(text)
        assert tokenizer.decode(ids) == text


def test_token_strings():
    tokenizer = get_tokenizer("gpt2")
    assert [tokenizer.token_str(i) for i in tokenizer.encode("Hello world")] == ["Hello", " world"]


def test_char_tokenizer_round_trip_and_errors():
    tokenizer = CharTokenizer("\n !abcdefghijklmnopqrstuvwxyz")
    ids = tokenizer.encode("hello world!\n")
    assert tokenizer.decode(ids) == "hello world!\n"
    assert tokenizer.token_str(ids[0]) == "h"
    with pytest.raises(ValueError, match=r"\['Z'\]"):
        tokenizer.encode("Zebra")
    assert tokenizer_from_dict(tokenizer_to_dict(tokenizer)).chars == tokenizer.chars
    with pytest.raises(ValueError, match="repeated"):
        CharTokenizer("aab")


def test_unknown_names_and_hugging_face_objects(hf_reference):
    with pytest.raises(ValueError, match="No offline tokenizer"):
        get_tokenizer("llama")
    wrapped = get_tokenizer(hf_reference)
    assert wrapped.encode("Hello world") == [15496, 995]
    assert wrapped.token_str(995) == " world"


def test_symbol_tokenizer_for_synthetic_models():
    tokenizer = SymbolTokenizer(512, bos_token_id=511)
    assert tokenizer.encode("<|bos|> 7 300\n7") == [511, 7, 300, 7]
    assert tokenizer.decode([511, 7, 300]) == "<|bos|> 7 300"
    assert tokenizer.token_str(511) == "<|bos|>" and tokenizer.token_str(42) == "42"
    for bad in ("512", "cat", "-1"):
        with pytest.raises(ValueError, match="not a symbol"):
            tokenizer.encode(bad)
    rebuilt = tokenizer_from_dict(tokenizer_to_dict(tokenizer))
    assert (rebuilt.vocab_size, rebuilt.bos_token_id) == (512, 511)


@pytest.fixture(scope="module")
def hf_padded(hf_reference):
    """The reference with EOS as its pad token, as TransformerLens sets it up."""
    hf_reference.pad_token = hf_reference.eos_token
    return hf_reference


@pytest.mark.parametrize("side", ["right", "left"])
def test_gpt2_call_equals_hugging_face(hf_padded, side):
    tokenizer = get_tokenizer("gpt2")
    texts = ["Hello world, the cat", "Hi", " naïve 🤖 <|endoftext|>"]
    ours = tokenizer(texts, return_tensors="pt", padding=True, padding_side=side)
    theirs = hf_padded(texts, return_tensors="pt", padding=True, padding_side=side)
    assert ours.input_ids.equal(theirs["input_ids"])
    assert ours["attention_mask"].equal(theirs["attention_mask"])
    assert dict(tokenizer(texts[0])) == dict(hf_padded(texts[0]))
    assert dict(tokenizer(texts, truncation=True, max_length=2)) == dict(
        hf_padded(texts, truncation=True, max_length=2)
    )
    with pytest.raises(ValueError, match="pass padding=True"):
        tokenizer(texts, return_tensors="pt")


def test_gpt2_attributes_and_decoding_equal_hugging_face(hf_padded):
    tokenizer = get_tokenizer("gpt2")
    for name in ("bos_token", "bos_token_id", "eos_token", "eos_token_id", "pad_token"):
        assert getattr(tokenizer, name) == getattr(hf_padded, name), name
    assert tokenizer.pad_token_id == hf_padded.pad_token_id
    assert len(tokenizer) == len(hf_padded) and tokenizer.vocab_size == hf_padded.vocab_size
    assert tokenizer.padding_side == hf_padded.padding_side == "right"
    every_id = list(range(len(tokenizer)))
    assert tokenizer.convert_ids_to_tokens(every_id) == hf_padded.convert_ids_to_tokens(every_id)
    assert tokenizer.convert_ids_to_tokens(995) == "Ġworld"
    ids = torch.tensor([[50256, 15496, 995, 50256], [12520, 97, 244, 11]])
    assert tokenizer.batch_decode(ids) == hf_padded.batch_decode(ids)
    assert tokenizer.batch_decode(ids, skip_special_tokens=True) == hf_padded.batch_decode(
        ids, skip_special_tokens=True
    )
    assert tokenizer.decode(15496) == hf_padded.decode(15496)
    for bad in (50257, -1):
        with pytest.raises(ValueError, match=rf"Token id {bad} is outside .* \[0, 50257\)"):
            tokenizer.decode([15496, bad])
        with pytest.raises(ValueError, match=rf"Token id {bad} is outside"):
            tokenizer.convert_ids_to_tokens(bad)
    with pytest.raises(ValueError, match="padding_side must be 'left' or 'right', got 'top'"):
        tokenizer.padding_side = "top"


def test_char_and_symbol_tokenizers_speak_the_same_interface():
    chars = CharTokenizer("ab ")
    assert chars(["ab", "a"], return_tensors="pt", padding=True).input_ids.tolist() == [
        [0, 1],
        [0, 0],
    ]
    assert chars.bos_token is None and chars.pad_token == "a" and len(chars) == 3
    symbols = SymbolTokenizer(10, bos_token_id=9)
    encoded = symbols(["<|bos|> 1 2", "3"], padding=True, padding_side="left")
    assert encoded == {
        "input_ids": [[9, 1, 2], [9, 9, 3]],
        "attention_mask": [[1, 1, 1], [0, 0, 1]],
    }
    assert symbols.bos_token == "<|bos|>" and symbols.batch_decode([[9, 1]]) == ["<|bos|> 1"]
    assert symbols.decode([9, 1, 2], skip_special_tokens=True) == "1 2"
    with pytest.raises(ValueError, match=r"Token id 10 is outside .* \[0, 10\)"):
        symbols.decode([10])


def test_wrapped_hugging_face_tokenizer_passes_calls_through():
    hf = make_hf_gpt2_tokenizer()
    wrapped = get_tokenizer(hf)
    assert hf.pad_token == "<|endoftext|>"  # given EOS as its pad token, as TransformerLens does
    wrapped.padding_side = "left"
    assert hf.padding_side == "left"
    assert wrapped(["a b", "a"], padding=True)["input_ids"] == [[64, 275], [50256, 64]]
    assert wrapped.convert_ids_to_tokens([995]) == ["Ġworld"] and len(wrapped) == 50257
    with pytest.raises(ValueError, match=r"Token id 50257 is outside .* \[0, 50257\)"):
        wrapped.decode([50257])


def test_each_gpt2_tokenizer_keeps_its_own_padding_side():
    first, second = get_tokenizer("gpt2"), get_tokenizer("gpt2")
    first.padding_side = "left"
    assert second.padding_side == "right" and get_tokenizer("gpt2").padding_side == "right"
    assert first.encode("Hello world") == second.encode("Hello world") == [15496, 995]
