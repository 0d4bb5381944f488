"""An SAE's feature activations on token data: text cut into windows, and the features'
activations on them (the forward stops at the SAE's input hook, so the layers after it
never run).

Example:
    >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> from interp.training.text import default_text
    >>> text = default_text()[:3000]                     # tiny-shakespeare's first lines
    >>> tokens = text_windows(model, text)              # [n_windows, n_ctx]
    >>> feature_acts(model, sae, tokens[:8]).shape      # [8, n_ctx, d_sae]
    torch.Size([8, 128, 1024])
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.sae.sae import SAE


def text_windows(
    model: Any, text: str, seq_len: int | None = None
) -> Int[Tensor, "n_windows seq_len"]:
    """``text`` tokenized and cut into non-overlapping windows of ``seq_len`` tokens
    (default ``n_ctx``); each window starts with BOS when the model prepends one.

    Example:
        >>> text_windows(interp.load_model("shakespeare-char"), "ROMEO:\\n" * 100, 64).shape
        torch.Size([10, 64])
    """
    seq_len = seq_len or model.cfg.n_ctx
    bos = bool(model.cfg.default_prepend_bos) and model.tokenizer.bos_token_id is not None
    tokens = model.to_tokens(text, prepend_bos=False, truncate=False)[0].cpu()
    width = seq_len - int(bos)
    if width < 1 or len(tokens) < width:
        raise ValueError(
            f"The text is {len(tokens)} tokens; windows of {seq_len} need at least {width}."
        )
    windows = tokens[: len(tokens) // width * width].view(-1, width)
    if bos:
        column = torch.full((len(windows), 1), model.tokenizer.bos_token_id, dtype=tokens.dtype)
        windows = torch.cat([column, windows], dim=1)
    return windows


@torch.no_grad()
def feature_acts(
    model: Any, sae: SAE, tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos d_sae"]:
    """The SAE's feature activations on ``tokens`` (the forward stops at its input hook).

    Example:
        >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> feature_acts(model, sae, model.to_tokens("ROMEO:"))[0, -1].topk(3).indices
        tensor([185, 863, 439])
    """
    hook = sae.cfg.hook_name
    _, cache = model.run_with_cache(tokens.to(model.device), names_filter=[hook], return_type=None)
    return sae.encode(cache[hook])
