"""Character-level text data: the shipped tiny-shakespeare, its train/held-out split, random
training windows, the held-out loss and sampling past ``n_ctx``.

The alphabet is the text's set of characters, the first 90% trains and the last 10% is held
out (nanoGPT's split).

Example:
    >>> train_text, val_text = split_text(default_text())
    >>> len(train_text), len(val_text)   # nanoGPT's 90% / 10% split
    (1003854, 111540)
    >>> round(text_loss(interp.load_model("shakespeare-char"), val_text[:2000]), 1)   # held out
    1.5
"""

from __future__ import annotations

import gzip
from importlib import resources

import torch
from jaxtyping import Int
from torch import Tensor

from interp.model import HookedTransformer
from interp.model.sampling import sample_next_token

VAL_FRACTION = 0.1


def default_text() -> str:
    """The tiny-shakespeare text (public domain, 1.1 MB) shipped with the package.

    Example:
        >>> default_text()[:14]
        'First Citizen:'
    """
    data = resources.files("interp.shipped").joinpath("data/tinyshakespeare.txt.gz")
    return gzip.decompress(data.read_bytes()).decode("utf-8")


def split_text(text: str, val_fraction: float = VAL_FRACTION) -> tuple[str, str]:
    """The first ``1 - val_fraction`` of the text for training, the rest held out.

    Example:
        >>> split_text("abcdefghij")
        ('abcdefghi', 'j')
    """
    n_train = int(len(text) * (1 - val_fraction))
    return text[:n_train], text[n_train:]


def text_batch(
    tokens: Int[Tensor, " n_tokens"], batch_size: int, n_ctx: int, generator: torch.Generator
) -> Int[Tensor, "batch n_ctx"]:
    """``batch_size`` windows of ``n_ctx`` tokens at random offsets of ``tokens``.

    Example:
        >>> text_batch(torch.arange(100), 2, 5, torch.Generator().manual_seed(0))
        tensor([[44, 45, 46, 47, 48],
                [15, 16, 17, 18, 19]])
    """
    starts = torch.randint(len(tokens) - n_ctx + 1, (batch_size,), generator=generator)
    return torch.stack([tokens[start : start + n_ctx] for start in starts.tolist()])


@torch.no_grad()
def text_loss(model: HookedTransformer, text: str, batch_size: int = 64) -> float:
    """Mean next-token loss over all of ``text``: windows of ``n_ctx`` tokens that overlap by
    one, so every token after the first is predicted exactly once.

    Example:
        >>> held_out = split_text(default_text())[1][:2000]   # all of it takes seconds
        >>> round(text_loss(interp.load_model("shakespeare-char"), held_out), 1)
        1.5
    """
    tokens = torch.tensor(model.tokenizer.encode(text))
    stride = model.cfg.n_ctx - 1
    windows = [
        tokens[start : start + model.cfg.n_ctx] for start in range(0, len(tokens) - 1, stride)
    ]
    total, count = 0.0, 0
    for first in range(0, len(windows), batch_size):
        chunk = windows[first : first + batch_size]
        full = [w for w in chunk if len(w) == model.cfg.n_ctx]
        partial = [w for w in chunk if len(w) != model.cfg.n_ctx]
        for group in ([torch.stack(full)] if full else []) + [w[None] for w in partial]:
            losses = model(group.to(model.device), return_type="loss", loss_per_token=True)
            total += losses.double().sum().item()
            count += losses.numel()
    return total / count


@torch.no_grad()
def sample_text(
    model: HookedTransformer,
    prompt: str,
    n_tokens: int,
    seed: int = 0,
    temperature: float = 0.8,
    top_k: int | None = None,
) -> str:
    """``prompt`` continued by ``n_tokens`` sampled tokens; unlike ``model.generate`` the text
    may outgrow ``n_ctx``, since each step sees only the last ``n_ctx`` tokens (nanoGPT's
    ``sample.py``).

    Example:
        >>> prompt = default_text()[:125]   # n_ctx is 128
        >>> text = sample_text(interp.load_model("shakespeare-char"), prompt, 5, seed=0)
        >>> text.startswith(prompt), len(text)   # longer than n_ctx
        (True, 130)
    """
    generator = torch.Generator(model.device).manual_seed(seed)
    tokens = model.to_tokens(prompt)  # [1, pos]
    for _ in range(n_tokens):
        logits = model(tokens[:, -model.cfg.n_ctx :])[:, -1]  # [1, d_vocab]
        next_token = sample_next_token(logits, True, temperature, top_k, None, generator)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
    return model.to_string(tokens[0])
