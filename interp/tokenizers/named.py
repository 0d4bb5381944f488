"""A tokenizer by name or object (``get_tokenizer``), and the spec saved with a model
(``tokenizer_to_dict`` / ``tokenizer_from_dict``)."""

from __future__ import annotations

from typing import Any

from interp.tokenizers.base import TokenizerBase
from interp.tokenizers.char import CharTokenizer
from interp.tokenizers.gpt2 import GPT2Tokenizer
from interp.tokenizers.hugging_face import HuggingFaceTokenizer
from interp.tokenizers.symbols import SymbolTokenizer


def get_tokenizer(name_or_tokenizer: Any = "gpt2") -> Any:
    """A tokenizer by name (``"gpt2"``), or any Hugging Face tokenizer wrapped to our interface.

    Example:
        >>> get_tokenizer("gpt2").encode("<|endoftext|>")
        [50256]
    """
    if isinstance(name_or_tokenizer, str):
        if name_or_tokenizer in ("gpt2", "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl"):
            return GPT2Tokenizer()  # a new one, so padding_side set on it stays its own
        raise ValueError(
            f"No offline tokenizer named {name_or_tokenizer!r}; use 'gpt2', a CharTokenizer, "
            "or pass a Hugging Face tokenizer object."
        )
    if isinstance(name_or_tokenizer, (TokenizerBase, HuggingFaceTokenizer)):
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
