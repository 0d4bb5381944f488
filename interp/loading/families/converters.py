"""The tensor converters a family's table is written with: each turns one checkpoint tensor
(Hugging Face's layout) into our parameters by name (``Convert``), e.g. a ``Linear`` weight
[out, in] as our [in, out], or a q/k/v projection split into heads.

Example:
    >>> name = "model.layers.0.self_attn.q_proj.weight"
    >>> row = Row(name, (64, 64), heads_in("blocks.0.attn.W_Q", 4))
    >>> row.checkpoint, row.shape
    ('model.layers.0.self_attn.q_proj.weight', (64, 64))
"""

from __future__ import annotations

import math

import einops
import torch
from torch import Tensor

from interp.config import HookedTransformerConfig
from interp.loading.checkpoint import Shape
from interp.loading.families.base import Convert, Row


def same(name: str) -> Convert:
    """The tensor as it is."""
    return lambda tensor: {name: tensor}


def transposed(name: str) -> Convert:
    """A ``Linear`` weight [out, in] as our [in, out]."""
    return lambda tensor: {name: tensor.T}


def zeros(name: str, shape: Shape) -> Row:
    """A row for a parameter the checkpoint does not have (a bias it lacks): zeros."""
    return Row(None, (), lambda _: {name: torch.zeros(shape)})


def heads_in(name: str, n_heads: int) -> Convert:
    """A q/k/v ``Linear`` weight [n_heads * d_head, d_model] as [n_heads, d_model, d_head]."""
    return lambda tensor: {name: einops.rearrange(tensor, "(h d) m -> h m d", h=n_heads)}


def heads_bias(name: str, n_heads: int) -> Convert:
    """A q/k/v bias [n_heads * d_head] as [n_heads, d_head]."""
    return lambda tensor: {name: einops.rearrange(tensor, "(h d) -> h d", h=n_heads)}


def heads_out(name: str, n_heads: int) -> Convert:
    """An output ``Linear`` weight [d_model, n_heads * d_head] as [n_heads, d_head, d_model]."""
    return lambda tensor: {name: einops.rearrange(tensor, "m (h d) -> h d m", h=n_heads)}


def embedding(cfg: HookedTransformerConfig, tied: bool, scale: bool = False) -> Convert:
    """``W_E`` (and ``W_U = W_E.T`` when ``tied``, taken before any scaling).

    ``scale`` folds Gemma's ``sqrt(d_model)`` embedding multiplier into ``W_E``, rounded as
    Hugging Face rounds it: the multiplier is a tensor of the model's dtype, so a bf16 model
    scales by bf16's nearest value and rounds the product to bf16, as here.
    """

    def convert(tensor: Tensor) -> dict[str, Tensor]:
        converted = {}
        if scale:
            multiplier = torch.tensor(math.sqrt(cfg.d_model), dtype=cfg.dtype).float()
            converted["embed.W_E"] = (tensor.float() * multiplier).to(cfg.dtype)
        else:
            converted["embed.W_E"] = tensor
        if tied:
            converted["unembed.W_U"] = tensor.T
        return converted

    return convert


def unembedding_rows(
    cfg: HookedTransformerConfig,
    tied: bool,
    name: str = "lm_head.weight",
    bias_name: str | None = None,
) -> list[Row]:
    """The rows of ``W_U`` (from ``name``, unless tied to the embedding) and ``b_U`` (from
    ``bias_name``, or zero). ``W_U``'s row stays the table's last named one
    (``unembedding_name``)."""
    shape = (cfg.d_vocab_out, cfg.d_model)
    head = Row(name, shape, None if tied else transposed("unembed.W_U"))
    if bias_name is None:
        return [head, zeros("unembed.b_U", (cfg.d_vocab_out,))]
    return [Row(bias_name, (cfg.d_vocab_out,), same("unembed.b_U")), head]


def shared_norm(ours: str, kind: str) -> Convert:
    """A parallel block's one norm ``kind`` ("w" or "b") as both ``ln1`` and ``ln2``."""
    return lambda tensor: {f"{ours}ln1.{kind}": tensor, f"{ours}ln2.{kind}": tensor.clone()}
