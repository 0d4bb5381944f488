"""``CharTokenizer``: one token a character of a fixed alphabet (the shipped character-level
models' tokenizer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interp.tokenizers.base import TokenizerBase


class CharTokenizer(TokenizerBase):
    """One token per character of a fixed alphabet (nanoGPT's shakespeare_char scheme).

    Example:
        >>> tok = CharTokenizer("abc ")
        >>> tok.encode("cab a")
        [2, 0, 1, 3, 0]
    """

    name = "char"

    def __init__(self, chars: str | Sequence[str]) -> None:
        self.chars = list(chars)
        if len(set(self.chars)) != len(self.chars):
            raise ValueError("CharTokenizer's alphabet has repeated characters.")
        self._id_of = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)
        self.pad_token_id = 0

    def _encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - self._id_of.keys())
        if unknown:
            raise ValueError(
                f"Characters {unknown} are not in this model's alphabet of "
                f"{self.vocab_size} characters; remove or replace them."
            )
        return [self._id_of[c] for c in text]

    def _decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "char", "chars": "".join(self.chars)}
