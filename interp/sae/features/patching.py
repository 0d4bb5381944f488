"""Exact feature patching: with the error term, changing feature ``f`` at position ``p`` by
``d`` adds ``d * W_dec[f]`` to the SAE's output hook at ``p``, which is an ordinary
activation patch, batched by ``interp.patching``'s engine.

Example:
    >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> tokens = model.to_tokens("ROMEO:\\nO")
    >>> def metric(logits):   # the logit of "R" after the last token
    ...     return logits[0, -1, model.to_single_token("R")]
    >>> ablated = feature_patch(model, sae, tokens, metric, [(7, 244), (7, 856)])
    >>> ablated.shape   # the metric with each (position, feature) zeroed in turn
    torch.Size([2])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.sae.features.indices import checked_count, checked_patch_index
from interp.sae.features.logit_effects import decoder_rows
from interp.sae.sae import SAE
from interp.sae.splice import HookedSAETransformer
from interp.utils import get_act_name


def _short_hook(hook: str, layer: int | None) -> str | None:
    """The ``get_act_name`` alias of ``hook`` (``blocks.1.hook_resid_post`` -> resid_post)."""
    if layer is None:
        return None
    short = hook.rsplit(".", 1)[-1].removeprefix("hook_")
    return short if get_act_name(short, layer) == hook else None


@torch.no_grad()
def feature_patch(
    model: Any,
    sae: SAE,
    tokens: Int[Tensor, "batch pos"],
    metric: Callable[[Tensor], Tensor],
    index: Sequence[tuple[int, int]] | Int[Tensor, "n 2"],
    values: Float[Tensor, "batch pos d_sae"] | None = None,
    max_batch_size: int = 64,
) -> Float[Tensor, " n"]:
    """Exact feature patching: ``metric`` after setting feature ``f`` at position ``p`` (each
    row ``(p, f)`` of ``index``, one run a row) to ``values[:, p, f]`` (default 0: ablation),
    with the SAE spliced with its error term; runs are batched by ``interp.patching``.

    Example:
        >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> tokens = model.to_tokens("ROMEO:\\nO")
        >>> def metric(logits):   # the logit of "R" after the last token
        ...     return logits[0, -1, model.to_single_token("R")]
        >>> ablated = feature_patch(model, sae, tokens, metric, [(7, 244), (7, 856)])
        >>> ablated.shape   # the metric with each (position, feature) zeroed in turn
        torch.Size([2])
    """
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be [batch, pos], got shape {tuple(tokens.shape)}.")
    index = checked_patch_index(index, tokens.shape[1], sae.cfg.d_sae)
    max_batch_size = checked_count(max_batch_size, "max_batch_size", minimum=1)
    expected = (*tokens.shape, sae.cfg.d_sae)
    if values is not None and tuple(values.shape) != expected:
        raise ValueError(
            f"values must be [batch, pos, d_sae] = {expected} (the features' new values), "
            f"got shape {tuple(values.shape)}."
        )
    tokens = tokens.to(model.device)
    hook_in, hook_out = sae.cfg.hook_name, sae.cfg.output_hook
    _, cache = model.run_with_cache(tokens, names_filter=sorted({hook_in, hook_out}))
    acts = sae.encode(cache[hook_in])  # [batch, pos, d_sae]
    target = torch.zeros_like(acts) if values is None else values.to(acts)
    W_dec = decoder_rows(sae)
    corrupted = cache[hook_out]
    out_shape = corrupted.shape[2:]  # [d_model] or [n_heads, d_head]

    def setter(activation: Tensor, idx: Sequence[int], _: Tensor) -> Tensor:
        _, pos, feature = idx
        change = target[:, pos, feature] - acts[:, pos, feature]  # [batch]
        delta = change[:, None] * W_dec[feature]  # [batch, d_out]
        activation[:, pos] += delta.view(-1, *out_shape).to(activation)
        return activation

    short = _short_hook(hook_out, sae.cfg.hook_layer)
    if short is None or isinstance(model, HookedSAETransformer) and model.acts_to_saes:
        runs = [_patch_alone(model, tokens, metric, hook_out, setter, r) for r in index.tolist()]
        return torch.stack(runs)
    from interp.patching import generic_activation_patch

    rows = torch.cat([torch.full((len(index), 1), sae.cfg.hook_layer), index], dim=1)
    result = generic_activation_patch(
        model,
        tokens,
        {hook_out: corrupted},
        metric,
        setter,
        short,
        index_df=rows,
        max_batch_size=max_batch_size,
        progress=False,
    )
    return torch.as_tensor(result).reshape(-1)


def _patch_alone(model, tokens, metric, hook, setter, row) -> Tensor:  # noqa: ANN001
    """One patched run: a full forward with a hook adding the feature's change."""

    def patch(activation: Tensor, hook_point: Any) -> Tensor:
        return setter(activation, (None, *row), activation)

    logits = model.run_with_hooks(tokens, fwd_hooks=[(hook, patch)])
    return torch.as_tensor(metric(logits)).reshape(())
