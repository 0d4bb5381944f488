"""``SymbolTokenizer``: the abstract tokens of synthetic-data models, written as numbers."""

from __future__ import annotations

from typing import Any

from interp.tokenizers.base import TokenizerBase


class SymbolTokenizer(TokenizerBase):
    """Abstract symbols ``0 .. vocab_size - 1`` written as numbers, for models trained on
    synthetic token sequences (``attn-only-2l``'s random tokens); BOS is written ``<|bos|>``.

    Example:
        >>> tok = SymbolTokenizer(512, bos_token_id=511)
        >>> tok.encode("<|bos|> 7 300 7"), tok.decode([511, 7, 300])
        ([511, 7, 300, 7], '<|bos|> 7 300')
    """

    name = "symbols"
    bos_text = "<|bos|>"

    def __init__(self, vocab_size: int, bos_token_id: int | None = None) -> None:
        self.vocab_size = vocab_size
        self.bos_token_id = bos_token_id
        self.pad_token_id = bos_token_id if bos_token_id is not None else 0

    def _encode(self, text: str) -> list[int]:
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

    def _decode(self, ids: list[int]) -> str:
        return " ".join(map(self.convert_id_to_token, ids))

    def convert_id_to_token(self, token_id: int) -> str:
        return self.bos_text if token_id == self.bos_token_id else str(token_id)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "symbols", "vocab_size": self.vocab_size, "bos_token_id": self.bos_token_id}
