"""Tokens in and out of a HookedTransformer: text to ids, ids to text, and the checks that
give a bad input a clear error before it reaches the forward.

``TokenizationMixin`` holds TransformerLens's token methods (``to_tokens``,
``to_str_tokens``, ``to_string``, ``to_single_token``, ``to_single_str_token``,
``get_token_position``); ``HookedTransformer`` inherits them, so the model class stays about
the forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from interp.tokenizers import check_padding_side, check_token_ids

PaddingSide = Literal["left", "right"]


class TokenError(ValueError, AssertionError):
    """A string that is not one token, or a token not in a prompt. TransformerLens raises
    AssertionError for these; this is also one, so a ported ``except`` still catches it."""


class TokenizationMixin:
    """TransformerLens's token methods; the class using it has ``cfg``, ``tokenizer`` and
    ``device``."""

    # ------------------------------------------------------------------------ checks
    def check_tokens(self, tokens: Any, past_len: int = 0) -> Int[Tensor, "batch pos"]:
        """Token ids as a long [batch, pos] tensor on the model's device, or a clear error:
        not an integer tensor (bool and float are refused; int8/16/32 and uint8 are
        converted), empty, longer than n_ctx (counting ``past_len`` cached positions), or an
        id outside [0, d_vocab).

        Example:
            >>> model.check_tokens(torch.tensor([1, 2, 3])).shape
            torch.Size([1, 3])
        """
        if not isinstance(tokens, Tensor):
            raise TypeError(f"Expected text or a tensor of token ids, got {type(tokens).__name__}.")
        if tokens.dtype == torch.bool or tokens.is_floating_point() or tokens.is_complex():
            raise TypeError(
                f"Token ids must be an integer tensor (torch.long), got {tokens.dtype}; "
                "convert them with tokens.long(), or pass a residual stream "
                "[batch, pos, d_model] with start_at_layer."
            )
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.ndim != 2:
            raise ValueError(f"Token ids must be [batch, pos], got shape {tuple(tokens.shape)}.")
        if tokens.numel() == 0:
            raise ValueError(
                f"Empty input (token shape {tuple(tokens.shape)}): pass at least one token."
            )
        if past_len + tokens.shape[1] > self.cfg.n_ctx:
            raise ValueError(
                f"Sequence of {past_len + tokens.shape[1]} tokens is longer than the model's "
                f"context n_ctx={self.cfg.n_ctx}; truncate it (tokens[:, :{self.cfg.n_ctx}], or "
                "model.to_tokens(text), which keeps the first n_ctx tokens)."
            )
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.cfg.d_vocab:
            bad = low if low < 0 else high
            raise ValueError(
                f"Token id {bad} is outside the vocabulary [0, {self.cfg.d_vocab}); "
                "check that the tokens come from this model's tokenizer."
            )
        return tokens.to(self.device, torch.long)

    def check_attention_mask(
        self, attention_mask: Any, batch: int, n_pos: int, past_len: int = 0
    ) -> Int[Tensor, "batch pos"]:
        """``attention_mask`` as a long [batch, pos] tensor of 1 (token) and 0 (padding) on
        the model's device, or a clear error: not a tensor, a dtype other than bool, integer
        or float, a value other than 0 and 1, a shape other than [batch, n_pos] (or
        [batch, past_len + n_pos] with a key/value cache). A row may be all padding (a chunk
        of left padding fed through a key/value cache).

        Example:
            >>> model.check_attention_mask(torch.tensor([[0, 1, 1]]), batch=1, n_pos=3)
            tensor([[0, 1, 1]])
        """
        expected = f"[batch={batch}, pos={n_pos}]"
        if past_len:
            expected += f" or [batch={batch}, past + new pos={past_len + n_pos}]"
        if not isinstance(attention_mask, Tensor):
            raise TypeError(
                f"attention_mask must be a tensor {expected} of 1 (token) and 0 (padding), "
                f"got {type(attention_mask).__name__}."
            )
        if attention_mask.is_complex():
            raise TypeError(
                f"attention_mask must hold 1 (token) and 0 (padding) as bool, integer or "
                f"float, got {attention_mask.dtype}."
            )
        if attention_mask.ndim == 1 and batch == 1:
            attention_mask = attention_mask[None]
        shape = tuple(attention_mask.shape)
        if attention_mask.ndim != 2 or shape[1] not in (n_pos, past_len + n_pos):
            raise ValueError(
                f"attention_mask has shape {shape}; expected {expected}, one row per prompt "
                "and one column per token."
            )
        if shape[0] != batch:
            raise ValueError(
                f"attention_mask has {shape[0]} rows but the batch has {batch} prompts; "
                f"expected shape {expected}."
            )
        values = attention_mask.unique().tolist()
        bad = [v for v in values if v not in (0, 1)]
        if bad:
            raise ValueError(
                f"attention_mask may hold only 1 (token) and 0 (padding), got "
                f"{', '.join(map(repr, bad[:5]))}; build it as (tokens != pad_id).long()."
            )
        return attention_mask.to(self.device, torch.long)

    def _require_tokenizer(self) -> Any:
        if self.tokenizer is None:
            raise ValueError(
                f"This model has no tokenizer, so it cannot read text; pass token ids "
                f"(0..{self.cfg.d_vocab - 1}), or give it a tokenizer of its "
                f"{self.cfg.d_vocab}-token vocabulary: HookedTransformer.from_pretrained(..., "
                "tokenizer=...) or HookedTransformer(cfg, tokenizer=...)."
            )
        return self.tokenizer

    # ------------------------------------------------------------------- text to ids
    def _tokenize(
        self,
        text: str | Sequence[str],
        prepend_bos: bool | None = None,
        padding_side: PaddingSide | None = None,
        truncate: bool = False,
    ) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch pos"] | None]:
        """Token ids [batch, pos] (on the CPU) of one text or a batch, padded on
        ``padding_side`` (the tokenizer's by default), and the mask when padding was needed.
        ``truncate`` keeps the first n_ctx tokens of each text, BOS included."""
        tokenizer = self._require_tokenizer()
        texts = [text] if isinstance(text, str) else text
        if not isinstance(texts, (list, tuple)) or not texts:
            raise ValueError(
                f"Expected a string or a non-empty list of strings, got {type(text).__name__}."
            )
        not_text = [t for t in texts if not isinstance(t, str)]
        if not_text:
            raise ValueError(
                f"Expected a string or a non-empty list of strings; the list holds "
                f"{type(not_text[0]).__name__} {not_text[0]!r}."
            )
        side = check_padding_side(padding_side or getattr(tokenizer, "padding_side", "right"))
        if prepend_bos is None:
            prepend_bos = self.cfg.default_prepend_bos and tokenizer.bos_token_id is not None
        if prepend_bos and tokenizer.bos_token_id is None:
            raise ValueError("This tokenizer has no BOS token; pass prepend_bos=False.")
        bos = [tokenizer.bos_token_id] if prepend_bos else []
        ids = [bos + tokenizer.encode(t, add_special_tokens=False) for t in texts]
        if truncate:
            ids = [row[: self.cfg.n_ctx] for row in ids]
        longest = max(len(row) for row in ids)
        if longest == 0:
            raise ValueError("Empty input: the text has no tokens.")
        pad, lengths = tokenizer.pad_token_id, [len(row) for row in ids]

        def padded(row: list[int], value: int) -> list[int]:
            filler = [value] * (longest - len(row))
            return row + filler if side == "right" else filler + row

        tokens = torch.tensor([padded(row, pad) for row in ids], dtype=torch.long)
        if min(lengths) == longest:
            return tokens, None
        return tokens, torch.tensor([padded([1] * n, 0) for n in lengths])

    def to_tokens(
        self,
        input: str | Sequence[str],
        prepend_bos: bool | None = None,
        padding_side: PaddingSide | None = None,
        move_to_device: bool = True,
        truncate: bool = True,
    ) -> Int[Tensor, "batch pos"]:
        """Token ids [batch, pos], BOS first by default (``cfg.default_prepend_bos``), a batch
        padded on ``padding_side`` (default ``model.tokenizer.padding_side``, "right"), each
        text cut to its first n_ctx tokens unless ``truncate=False`` (as TransformerLens).

        Example:
            >>> shakespeare = interp.load_model("shakespeare-char")   # one token a character
            >>> shakespeare.to_tokens("Hello")   # no BOS: default_prepend_bos is False
            tensor([[20, 43, 50, 50, 53]])
            >>> model.to_tokens("12 305 12")   # attn-only-2l: BOS, then numbered symbols
            tensor([[511,  12, 305,  12]])
        """
        tokens, _ = self._tokenize(input, prepend_bos, padding_side, truncate)
        return tokens.to(self.device) if move_to_device else tokens

    def to_single_token(self, string: str) -> int:
        """The id of a string that is exactly one token (e.g. ``" Mary"``).

        Example:
            >>> shakespeare = interp.load_model("shakespeare-char")   # one token a character
            >>> shakespeare.to_single_token("M")
            25
        """
        if not isinstance(string, str):
            raise TypeError(f"to_single_token takes a string, got {type(string).__name__}.")
        ids = self._require_tokenizer().encode(string, add_special_tokens=False)
        if len(ids) != 1:
            raise TokenError(
                f"Input string: {string!r} is not a single token: it is {len(ids)} tokens "
                f"{ids}; pass one token's text (mind the leading space, e.g. ' Mary')."
            )
        return ids[0]

    def get_token_position(
        self,
        single_token: str | int | Tensor,
        input: str | Int[Tensor, " pos"] | Int[Tensor, "1 pos"],
        mode: Literal["first", "last"] = "first",
        prepend_bos: bool | None = None,
        padding_side: PaddingSide | None = None,
    ) -> int:
        """The position of ``single_token`` (its text or id) in a prompt (text, or tokens
        [pos] or [1, pos]); its first or last occurrence by ``mode``.

        Example:
            >>> model.get_token_position("12", "12 305 12")   # position 0 is BOS
            1
            >>> model.get_token_position("12", "12 305 12", mode="last")
            3
        """
        if mode not in ("first", "last"):
            raise ValueError(f"mode must be 'first' or 'last', not {mode!r}.")
        if isinstance(input, str):
            tokens = self.to_tokens(input, prepend_bos, padding_side)[0]
        elif isinstance(input, Tensor) and (
            input.ndim == 1 or (input.ndim == 2 and input.shape[0] == 1)
        ):
            tokens = input.flatten()
        else:
            shape = tuple(input.shape) if isinstance(input, Tensor) else type(input).__name__
            raise ValueError(
                f"get_token_position searches one prompt: text, or tokens [pos] or [1, pos]; "
                f"got {shape}."
            )
        if isinstance(single_token, str):
            token_id = self.to_single_token(single_token)
        elif isinstance(single_token, Tensor) and single_token.numel() == 1:
            token_id = int(single_token.item())
        elif isinstance(single_token, int) and not isinstance(single_token, bool):
            token_id = single_token
        else:
            raise TypeError(
                f"single_token must be a token's text, an id, or a 1-element tensor, got "
                f"{single_token!r}."
            )
        positions = (tokens == token_id).nonzero().flatten()
        if len(positions) == 0:
            raise TokenError(
                f"The token {token_id} ({single_token!r}) does not occur in the prompt "
                f"(of {len(tokens)} tokens)."
            )
        return int(positions[0] if mode == "first" else positions[-1])

    # ------------------------------------------------------------------- ids to text
    def to_str_tokens(
        self,
        input: str | Sequence[str] | Tensor | np.ndarray | Sequence[int],
        prepend_bos: bool | None = None,
        padding_side: PaddingSide | None = None,
    ) -> list[str] | list[list[str]]:
        """Each token's text: of a text (tokenized as ``to_tokens``), or of token ids (an
        int, a list, a tensor or array of shape [pos] or [1, pos]). A list of texts or ids
        [batch > 1, pos] gives a list of lists. An id outside the vocabulary is an error.

        Example:
            >>> shakespeare = interp.load_model("shakespeare-char")   # one token a character
            >>> shakespeare.to_str_tokens("Hello")
            ['H', 'e', 'l', 'l', 'o']
            >>> model.to_str_tokens("12 305 12")
            ['<|bos|>', '12', '305', '12']
        """
        tokenizer = self._require_tokenizer()
        if isinstance(input, str):
            ids = self.to_tokens(input, prepend_bos, padding_side)[0]
        elif isinstance(input, (list, tuple)) and input and isinstance(input[0], str):
            return [self.to_str_tokens(text, prepend_bos, padding_side) for text in input]
        else:
            ids = torch.as_tensor(input) if not isinstance(input, Tensor) else input
            if ids.ndim == 2 and ids.shape[0] != 1:
                return [self.to_str_tokens(row) for row in ids]
            if ids.ndim > 2:
                raise ValueError(
                    f"to_str_tokens takes token ids [pos] or [batch, pos], got shape "
                    f"{tuple(ids.shape)}."
                )
            ids = ids.flatten()
        return [tokenizer.token_str(i) for i in check_token_ids(ids, len(tokenizer))]

    def to_string(self, tokens: Int[Tensor, "... pos"] | Sequence[int]) -> str | list[str]:
        """Decode token ids; [batch, pos] gives one string per row. An id outside the
        vocabulary is an error naming it.

        Example:
            >>> shakespeare = interp.load_model("shakespeare-char")   # one token a character
            >>> shakespeare.to_string(torch.tensor([20, 43, 50, 50, 53]))
            'Hello'
        """
        tokenizer = self._require_tokenizer()
        tokens = torch.as_tensor(tokens) if not isinstance(tokens, Tensor) else tokens
        if tokens.ndim > 2:
            raise ValueError(
                f"to_string takes token ids [pos] or [batch, pos], got shape {tuple(tokens.shape)}."
            )
        if tokens.ndim == 2:
            return [tokenizer.decode(row) for row in tokens]
        return tokenizer.decode(tokens)

    def to_single_str_token(self, int_token: int) -> str:
        """The text of one token id.

        Example:
            >>> shakespeare = interp.load_model("shakespeare-char")   # one token a character
            >>> shakespeare.to_single_str_token(25)
            'M'
        """
        if isinstance(int_token, bool) or not isinstance(int_token, int):
            raise TypeError(
                f"to_single_str_token takes one token id (an int), got {int_token!r}; "
                "use to_str_tokens for several."
            )
        return self.to_str_tokens([int_token])[0]
