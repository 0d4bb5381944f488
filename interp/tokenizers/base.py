"""What every offline tokenizer shares: Hugging Face's interface as TransformerLens scripts use it
(``TokenizerBase``), the ``Encoding`` a call returns, and checks of token ids and padding sides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import Tensor


def check_token_ids(ids: Any, n_vocab: int) -> list[int]:
    """``ids`` (an int, a sequence, a tensor or an array of any shape) as a flat list of
    ints, or a ValueError naming the first id outside ``[0, n_vocab)``.

    Example:
        >>> check_token_ids(torch.tensor([[1, 2]]), 50257)
        [1, 2]
    """
    if isinstance(ids, Tensor) and (ids.dtype == torch.bool or ids.is_floating_point()):
        raise TypeError(f"Token ids must be integers, got a {ids.dtype} tensor.")
    flat = torch.as_tensor(ids).flatten().tolist() if not isinstance(ids, int) else [ids]
    for token_id in flat:
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise TypeError(f"Token ids must be integers, got {token_id!r}.")
        if not 0 <= token_id < n_vocab:
            raise ValueError(
                f"Token id {token_id} is outside the tokenizer's vocabulary [0, {n_vocab}); "
                "check that the ids come from this tokenizer."
            )
    return flat


class Encoding(dict):
    """What calling a tokenizer returns: ``input_ids`` and ``attention_mask``, read as keys
    or attributes (Hugging Face's ``BatchEncoding``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class TokenizerBase:
    """Hugging Face's tokenizer interface, built on four methods a tokenizer defines:
    ``_encode(text) -> ids``, ``_decode(ids) -> text``, ``convert_id_to_token(id)`` (the
    vocabulary's own string) and the ``vocab_size``/``bos/eos/pad_token_id`` attributes.
    Nothing here adds special tokens, so ``add_special_tokens`` changes nothing.

    Example:
        >>> from interp.tokenizers import get_tokenizer
        >>> tok = get_tokenizer("gpt2")   # shipped offline: GPT-2's BPE with tiktoken
        >>> tok(["Hello world", "Hi"], return_tensors="pt", padding=True)["attention_mask"]
        tensor([[1, 1],
                [1, 0]])
    """

    name = "tokenizer"
    vocab_size: int
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = None
    _padding_side: Literal["left", "right"] = "right"

    def _encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def _decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    def convert_id_to_token(self, token_id: int) -> str:
        return self._decode([token_id])

    @property
    def name_or_path(self) -> str:
        return self.name

    @property
    def padding_side(self) -> Literal["left", "right"]:
        """Where ``__call__`` and ``model.to_tokens`` pad a batch when not told: "right"."""
        return self._padding_side

    @padding_side.setter
    def padding_side(self, side: Literal["left", "right"]) -> None:
        self._padding_side = check_padding_side(side)

    def _token(self, token_id: int | None) -> str | None:
        return None if token_id is None else self.convert_id_to_token(token_id)

    @property
    def bos_token(self) -> str | None:
        return self._token(self.bos_token_id)

    @property
    def eos_token(self) -> str | None:
        return self._token(self.eos_token_id)

    @property
    def pad_token(self) -> str | None:
        return self._token(self.pad_token_id)

    @property
    def all_special_ids(self) -> list[int]:
        ids = (self.bos_token_id, self.eos_token_id, self.pad_token_id)
        return sorted({i for i in ids if i is not None})

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a string, got {type(text).__name__}.")
        return self._encode(text)

    def decode(self, ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
        """The text of ``ids`` (an int, a list, a 1-D tensor); an id outside the vocabulary
        is an error."""
        ids = check_token_ids(ids, len(self))
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.all_special_ids]
        return self._decode(ids)

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False, **kwargs: Any):
        """``decode`` of each row of a [batch, pos] tensor or a list of id lists."""
        return [self.decode(row, skip_special_tokens) for row in sequences]

    def token_str(self, token_id: int) -> str:
        """One token's text (``decode([token_id])``)."""
        return self.decode([token_id])

    def convert_ids_to_tokens(self, ids: int | Any, skip_special_tokens: bool = False):
        """The vocabulary's string of each id (GPT-2 writes a leading space as ``Ġ``)."""
        if isinstance(ids, int) or (isinstance(ids, Tensor) and ids.ndim == 0):
            return self.convert_id_to_token(check_token_ids(ids, len(self))[0])
        ids = check_token_ids(ids, len(self))
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.all_special_ids]
        return [self.convert_id_to_token(i) for i in ids]

    def __call__(
        self,
        text: str | Sequence[str],
        padding: bool | str = False,
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        add_special_tokens: bool = True,
        padding_side: Literal["left", "right"] | None = None,
        return_attention_mask: bool = True,
        **kwargs: Any,
    ) -> Encoding:
        """``input_ids`` and ``attention_mask`` of one text or a batch, as Hugging Face's
        tokenizers return them: lists, or tensors with ``return_tensors="pt"``;
        ``padding=True`` pads to the longest text, on ``padding_side``; ``truncation=True``
        keeps the first ``max_length`` tokens."""
        if return_tensors not in (None, "pt"):
            raise ValueError(f"return_tensors={return_tensors!r}: only None and 'pt' exist here.")
        if padding not in (True, False, "longest", "do_not_pad"):
            raise ValueError(
                f"padding={padding!r}: use True/'longest' (pad to the longest text) or False."
            )
        side = check_padding_side(padding_side or self.padding_side)
        texts = [text] if isinstance(text, str) else list(text)
        ids = [self.encode(t, add_special_tokens) for t in texts]
        if truncation and max_length is not None:
            ids = [row[:max_length] for row in ids]
        masks = [[1] * len(row) for row in ids]
        if padding in (True, "longest"):
            longest = max((len(row) for row in ids), default=0)
            pad = self.pad_token_id if self.pad_token_id is not None else 0
            ids = [_pad(row, pad, longest, side) for row in ids]
            masks = [_pad(mask, 0, longest, side) for mask in masks]
        if return_tensors == "pt":
            if len({len(row) for row in ids}) > 1:
                raise ValueError(
                    "Texts of different lengths cannot be one tensor: pass padding=True."
                )
            ids, masks = torch.tensor(ids, dtype=torch.long), torch.tensor(masks)
        elif isinstance(text, str):
            ids, masks = ids[0], masks[0]
        out = Encoding(input_ids=ids)
        if return_attention_mask:
            out["attention_mask"] = masks
        return out


def check_padding_side(side: Any) -> Literal["left", "right"]:
    if side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {side!r}.")
    return side


def _pad(row: list[int], value: int, length: int, side: str) -> list[int]:
    padding = [value] * (length - len(row))
    return row + padding if side == "right" else padding + row
