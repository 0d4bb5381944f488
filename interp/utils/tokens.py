"""Token-level helpers with TransformerLens's names: attention masks, BOS removal and
dataset packing.

They take either one of our tokenizers (``interp.get_tokenizer``) or a Hugging Face one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor
from torch.utils.data import Dataset

from interp.utils.tensors import get_cumsum_along_dim


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """``text``'s token ids without special tokens, for our tokenizers or Hugging Face's."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def get_attention_mask(
    tokenizer: Any,
    tokens: Int[Tensor, "batch pos"],
    prepend_bos: bool,
    padding_side: str | None = None,
) -> Int[Tensor, "batch pos"]:
    """1 for real tokens, 0 for padding: the run of ``pad_token_id`` at the start of each row
    (``padding_side="left"``) or at its end (``"right"``; the tokenizer's side by default).
    With left padding and ``prepend_bos``, a BOS that shares the pad id stays attended.

    Example:
        >>> tok = interp.get_tokenizer("gpt2")   # pad = bos = 50256
        >>> get_attention_mask(tok, torch.tensor([[50256, 50256, 15496]]), True, "left").tolist()
        [[0, 1, 1]]
    """
    attention_mask = torch.ones_like(tokens)
    if tokenizer is None:
        return attention_mask
    if padding_side is None:
        padding_side = getattr(tokenizer, "padding_side", "right")
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}.")
    is_not_pad = tokens.ne(tokenizer.pad_token_id)
    if padding_side == "right":
        attention_mask[get_cumsum_along_dim(is_not_pad, -1, reverse=True) == 0] = 0
        return attention_mask
    is_leading_pad = get_cumsum_along_dim(is_not_pad, -1) == 0
    attention_mask[is_leading_pad] = 0
    if prepend_bos and tokenizer.bos_token_id == tokenizer.pad_token_id:
        last_pad = is_leading_pad.sum(-1) - 1  # the BOS, read as the last leading pad
        attention_mask[torch.arange(tokens.shape[0]), last_pad] = 1
    return attention_mask


class TokenDataset(Dataset):
    """Rows of token ids, indexed like the Hugging Face dataset TransformerLens returns:
    ``dataset[i]`` is ``{"tokens": row}`` (so a ``DataLoader`` yields ``batch["tokens"]``)
    and ``dataset["tokens"]`` is the whole ``[n_rows, max_length]`` tensor."""

    def __init__(self, tokens: Int[Tensor, "n_rows max_length"]) -> None:
        self.tokens = tokens

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, index: int | str) -> Any:
        if index == "tokens":
            return self.tokens
        if isinstance(index, str):
            raise KeyError(f"This dataset has one column, 'tokens'; got {index!r}.")
        return {"tokens": self.tokens[index]}

    def __repr__(self) -> str:
        return f"TokenDataset(tokens: {tuple(self.tokens.shape)})"


def _pack(texts: Sequence[str], tokenizer: Any, max_length: int, add_bos_token: bool) -> np.ndarray:
    """Documents joined by EOS and cut into rows of ``max_length`` (BOS first if asked); the
    tail that does not fill a row is dropped, and a short input is padded to one row."""
    seq_len = max_length - 1 if add_bos_token else max_length
    if seq_len <= 0:
        raise ValueError(f"max_length={max_length} leaves no room for tokens; pass at least 2.")
    eos = tokenizer.eos_token_id
    pieces = []
    for index, text in enumerate(texts):
        if index:
            pieces.append([eos])
        pieces.append(encode_text(tokenizer, text))
    tokens = np.concatenate([np.asarray(p, dtype=np.int64) for p in pieces]) if pieces else []
    if len(tokens) == 0:
        return np.zeros((0, max_length), dtype=np.int64)
    n_rows = max(1, len(tokens) // seq_len)
    if len(tokens) < seq_len:
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
        tokens = np.concatenate([tokens, np.full(seq_len - len(tokens), pad, dtype=np.int64)])
    rows = tokens[: n_rows * seq_len].reshape(n_rows, seq_len)
    if add_bos_token:
        rows = np.concatenate([np.full((n_rows, 1), tokenizer.bos_token_id), rows], axis=1)
    return rows


def tokenize_and_concatenate(
    dataset: Any,
    tokenizer: Any,
    streaming: bool = False,
    max_length: int = 1024,
    column_name: str = "text",
    add_bos_token: bool = True,
    num_proc: int | None = 10,
) -> Any:
    """Tokenize every document, join them with EOS, and cut the stream into rows of
    ``max_length`` tokens (each starting with BOS when ``add_bos_token``), as TransformerLens.

    ``dataset`` is a Hugging Face ``Dataset``/``IterableDataset`` (the result is one too, with
    a single ``"tokens"`` column in torch format, chunked per ``map`` batch as TransformerLens
    does), a list of strings, or a dict holding ``column_name`` (the result is a
    ``TokenDataset``). ``num_proc`` is passed to ``Dataset.map`` unless ``streaming``.

    Example:
        >>> gpt2 = interp.get_tokenizer("gpt2")   # shipped with interp
        >>> rows = tokenize_and_concatenate(["a story", "another"], gpt2, max_length=4)
        >>> rows["tokens"]   # [n_rows, 4], each row [BOS, t, t, t]; the rest is dropped
        tensor([[50256,    64,  1621, 50256]])
    """
    if tokenizer.eos_token_id is None:
        raise ValueError(
            "tokenize_and_concatenate joins documents with the EOS token, but this tokenizer "
            "has no eos_token_id; use a tokenizer with one (e.g. get_tokenizer('gpt2'))."
        )
    if add_bos_token and tokenizer.bos_token_id is None:
        raise ValueError(
            "add_bos_token=True but the tokenizer has no bos_token_id; pass add_bos_token=False."
        )
    if isinstance(dataset, dict):
        if column_name not in dataset:
            raise KeyError(
                f"column_name={column_name!r} is not in the dict; its keys are {sorted(dataset)}."
            )
        dataset = dataset[column_name]
    if isinstance(dataset, str):
        dataset = [dataset]
    if isinstance(dataset, (list, tuple)):
        if not all(isinstance(text, str) for text in dataset):
            raise TypeError("tokenize_and_concatenate takes a list of strings (documents).")
        return TokenDataset(torch.from_numpy(_pack(dataset, tokenizer, max_length, add_bos_token)))
    if not hasattr(dataset, "map"):
        raise TypeError(
            f"Cannot tokenize a {type(dataset).__name__}: pass a Hugging Face Dataset, a list "
            "of strings, or a dict with a text column."
        )
    dataset = dataset.select_columns([column_name])

    def tokenize_batch(batch: dict[str, list[str]]) -> dict[str, np.ndarray]:
        return {"tokens": _pack(batch[column_name], tokenizer, max_length, add_bos_token)}

    options = {} if streaming else {"num_proc": num_proc}
    tokenized = dataset.map(tokenize_batch, batched=True, remove_columns=[column_name], **options)
    if not streaming:
        tokenized.set_format(type="torch", columns=["tokens"])
    return tokenized


def get_tokens_with_bos_removed(
    tokenizer: Any, tokens: Int[Tensor, "... seq"], padding_side: str | None = None
) -> Int[Tensor, "... seq_minus_1"]:
    """``tokens`` without each row's BOS token (TransformerLens's function).

    Right padding: the BOS is the first token. Left padding: it is the first BOS after the
    pads (when BOS and pad share an id, the last of the leading run). A tokenizer without a
    BOS token leaves ``tokens`` as they are. ``padding_side`` defaults to the tokenizer's.

    Example:
        >>> from types import SimpleNamespace
        >>> tok = SimpleNamespace(bos_token_id=1, pad_token_id=0, padding_side="left")
        >>> get_tokens_with_bos_removed(tok, torch.tensor([[0, 1, 5, 6], [1, 7, 8, 9]]))
        tensor([[0, 5, 6],
                [7, 8, 9]])
    """
    bos = tokenizer.bos_token_id
    if bos is None:
        return tokens
    if (padding_side or tokenizer.padding_side) == "right":
        return tokens[..., 1:]
    if bos == tokenizer.pad_token_id:
        # the BOS ends the leading run of pad-or-BOS ids: [pad, pad, bos, x] -> position 2
        leading = get_cumsum_along_dim(tokens.ne(tokenizer.pad_token_id), -1, reverse=False) == 0
        bos_position = leading.sum(-1) - 1  # [...]
    else:
        bos_position = tokens.eq(bos).int().argmax(-1)  # [...], the first BOS
    positions = torch.arange(tokens.shape[-1], device=tokens.device)
    keep = positions != bos_position.unsqueeze(-1)  # [..., seq]
    return tokens[keep].view(*tokens.shape[:-1], tokens.shape[-1] - 1)
