"""TransformerLens 2.x's attention buffers, in the state dicts it saves and loads.

TransformerLens's attention registers buffers that a state dict holds beside the weights:
``mask`` (True where a query may attend to a key: causal, within the window on a local layer;
[n_ctx, n_ctx] bool), ``IGNORE`` (the score masked keys get, -inf; -1e5 in older versions) and,
on rotary models, ``rotary_sin`` / ``rotary_cos`` ([n_ctx, rotary_dim], in the model's dtype).
interp computes all of them from the config at run time, but its state dicts have them too,
so that state dicts go both ways as TransformerLens 2.18's do:

- ``model.load_state_dict(tl_state_dict)`` (strict) accepts them after checking that they are
  what this model computes (a custom mask or a non-negative ``IGNORE`` could not be honoured:
  that is an error, raised before any weight is copied); a state dict without them loads too
  (interp's own files, converted Hugging Face weights), where TransformerLens would call them
  missing;
- ``model.state_dict()`` holds them, in TransformerLens's names, shapes and dtypes, for
  contexts up to ``MAX_N_CTX`` positions: beyond that the masks would cost more than 64 MB a
  layer (TransformerLens itself caps such models' n_ctx at 8192 by default), and the state
  dict holds the weights only. Checkpoint writers use ``weights_state_dict``, which never
  computes them.

Example:
    >>> saved = model.state_dict()   # as TransformerLens 2.x saves one: its buffers too
    >>> "blocks.0.attn.mask" in saved, "blocks.0.attn.mask" in weights_state_dict(model)
    (True, False)
    >>> model.load_state_dict(saved)   # strict: the buffers are checked, then dropped
    <All keys matched successfully>
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
from jaxtyping import Bool
from torch import Tensor, nn

TL_BUFFERS = ("mask", "IGNORE", "rotary_sin", "rotary_cos")
MAX_N_CTX = 8192  # TransformerLens 2.18's default n_ctx for long-context models
IGNORE_AT_MOST = -1e4  # masked scores: -inf (TransformerLens 2.x) or -1e5 (1.x) both mask

_WEIGHTS_ONLY: ContextVar[bool] = ContextVar("interp_weights_only_state_dict", default=False)


def allowed_keys(attn: Any, n: int, device: torch.device) -> Bool[Tensor, "n n"]:
    """TransformerLens's ``mask`` of ``attn`` over ``n`` positions: True where query ``i``
    may attend to key ``j``: ``j <= i``, and ``i - j < window_size`` on a local layer. A
    bidirectional model stores the causal mask too (TransformerLens registers it and never
    applies it)."""
    positions = torch.arange(n, device=device)
    distance = positions[:, None] - positions[None, :]  # [query, key]
    allowed = distance >= 0
    if attn.window_size is not None:
        allowed = allowed & (distance < attn.window_size)
    return allowed


def tl_buffers(attn: Any) -> dict[str, Tensor]:
    """The buffers TransformerLens 2.18's attention saves for ``attn``'s layer, on its
    weights' device: ``mask``, ``IGNORE`` (float32, as TransformerLens keeps it whatever the
    model's dtype) and, for rotary layers, ``rotary_sin`` and ``rotary_cos``."""
    weight = attn.W_Q
    device, n = weight.device, attn.cfg.n_ctx
    buffers = {
        "mask": allowed_keys(attn, n, device),
        "IGNORE": torch.tensor(-torch.inf, device=device),
    }
    if attn.rotary is not None:
        shape = (n, attn.rotary.rotary_dim)
        if device.type == "meta":
            sin = cos = torch.empty(shape, dtype=weight.dtype, device=device)
        else:
            positions = torch.arange(n, device=device)[None]
            cos, sin = (t[0, :, 0] for t in attn.rotary.cos_sin(positions, weight.dtype))
        buffers["rotary_sin"], buffers["rotary_cos"] = sin, cos
    return buffers


def check_tl_buffers(attn: Any, state_dict: Mapping[str, Any], prefix: str) -> None:
    """Raise ValueError if ``state_dict`` holds a TransformerLens buffer under ``prefix`` that
    ``attn`` would not compute the same way (so loading it would be silently ignored)."""
    where = f"{prefix}{{}}"
    mask = state_dict.get(prefix + "mask")
    if mask is not None:
        if not isinstance(mask, Tensor) or mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
            shape = tuple(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__
            raise ValueError(
                f"{where.format('mask')} is {shape}; TransformerLens's attention mask is a "
                "square [n_ctx, n_ctx] tensor."
            )
        expected = allowed_keys(attn, mask.shape[0], mask.device)
        if not attn.bidirectional and not mask.is_meta and not torch.equal(mask.bool(), expected):
            rule = "causal" + (f", window_size={attn.window_size}" if attn.window_size else "")
            raise ValueError(
                f"{where.format('mask')} is not the {rule} mask this layer applies; interp "
                "computes the mask from the config and cannot load another one. Load the "
                "state dict without it (and mask keys with a hook on hook_attn_scores), or "
                "check cfg.window_size / cfg.attn_types match the model that saved it."
            )
    ignore = state_dict.get(prefix + "IGNORE")
    if ignore is not None:
        if not isinstance(ignore, Tensor) or ignore.numel() != 1:
            raise ValueError(f"{where.format('IGNORE')} must be a scalar tensor (e.g. -inf).")
        if not ignore.is_meta and float(ignore) > IGNORE_AT_MOST:
            raise ValueError(
                f"{where.format('IGNORE')} is {float(ignore)}: masked keys would still be "
                "attended to, which interp (it masks with -inf) cannot reproduce; "
                "TransformerLens saves -inf."
            )
    for name in ("rotary_sin", "rotary_cos"):
        table = state_dict.get(prefix + name)
        if table is None:
            continue
        if attn.rotary is None:
            raise ValueError(
                f"{where.format(name)} belongs to a rotary model, but this layer has "
                f"positional_embedding_type={attn.cfg.positional_embedding_type!r}: the "
                "state dict is of another architecture."
            )
        if not isinstance(table, Tensor) or table.ndim != 2:
            raise ValueError(f"{where.format(name)} must be [n_ctx, rotary_dim].")
        if table.shape[1] != attn.rotary.rotary_dim:
            raise ValueError(
                f"{where.format(name)} has rotary_dim {table.shape[1]}; this layer rotates "
                f"{attn.rotary.rotary_dim} dimensions (cfg.rotary_dim)."
            )


def pop_tl_buffers(state_dict: dict[str, Any], prefix: str) -> None:
    """Remove ``prefix``'s TransformerLens buffers from ``state_dict`` (checked already)."""
    for name in TL_BUFFERS:
        state_dict.pop(prefix + name, None)


def save_tl_buffers(attn: Any, destination: dict[str, Any], prefix: str) -> None:
    """Add ``attn``'s TransformerLens buffers to a state dict being written, unless the
    context is longer than ``MAX_N_CTX`` or ``weights_state_dict`` is writing it."""
    if _WEIGHTS_ONLY.get() or attn.cfg.n_ctx > MAX_N_CTX:
        return
    for name, tensor in tl_buffers(attn).items():
        destination[prefix + name] = tensor


@contextmanager
def _weights_only() -> Iterator[None]:
    token = _WEIGHTS_ONLY.set(True)
    try:
        yield
    finally:
        _WEIGHTS_ONLY.reset(token)


def weights_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """``model.state_dict()`` without TransformerLens's attention buffers (never computed):
    the tensors a checkpoint of ``model`` holds.

    Example:
        >>> weights = weights_state_dict(model)   # what a checkpoint file holds
        >>> sorted(set(model.state_dict()) - set(weights))[:2]
        ['blocks.0.attn.IGNORE', 'blocks.0.attn.mask']
    """
    with _weights_only():
        return model.state_dict()


def tl_buffer_keys(model: nn.Module) -> set[str]:
    """The state-dict keys of every TransformerLens attention buffer ``model`` may hold."""
    from interp.components.attention import Attention

    return {
        f"{path}.{name}" if path else name
        for path, module in model.named_modules()
        if isinstance(module, Attention)
        for name in TL_BUFFERS
    }


def check_model_tl_buffers(model: nn.Module, state_dict: Mapping[str, Any]) -> None:
    """``check_tl_buffers`` for every attention layer of ``model``."""
    from interp.components.attention import Attention

    for path, module in model.named_modules():
        if isinstance(module, Attention):
            check_tl_buffers(module, state_dict, f"{path}." if path else "")
