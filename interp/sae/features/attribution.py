"""Feature attribution: activation x gradient of a metric for every feature of every SAE,
from one forward and one backward pass; and the rank correlation that compares it with
exact feature patching.

Example:
    >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> tokens = model.to_tokens("ROMEO:\\nO")
    >>> def metric(logits):   # the logit of "R" after the last token
    ...     return logits[0, -1, model.to_single_token("R")]
    >>> attr, acts = feature_attribution(model, [sae], tokens, metric)[sae.cfg.hook_name]
    >>> top = attr[0, -1].topk(3).indices                        # the 3 largest estimates
    >>> from interp.sae.features import feature_patch
    >>> exact = metric(model(tokens)) - feature_patch(model, sae, tokens, metric,
    ...                                               [(7, int(f)) for f in top])
    >>> attr[0, -1, top].round(decimals=2), exact.detach().round(decimals=2)
    (tensor([1.07, 0.83, 0.42]), tensor([0.79, 1.03, 0.63]))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from interp.sae.features.logit_effects import decoder_rows
from interp.sae.sae import SAE


def feature_attribution(
    model: Any,
    saes: SAE | Sequence[SAE],
    tokens: Int[Tensor, "batch pos"],
    metric: Callable[[Tensor], Tensor],
) -> dict[str, tuple[Tensor, Tensor]]:
    """Activation x gradient of ``metric(logits)`` for every feature of every SAE, from one
    forward and one backward pass of the model: feature ``f`` of an SAE spliced with its
    error term adds ``act_f * W_dec[f]`` at its output hook, so its attribution is
    ``act_f * (d metric / d output) . W_dec[f]``, the linear estimate of
    ``metric(clean) - metric(feature zeroed)`` that ``feature_patch`` computes exactly.

    Returns ``{hook_name: (attribution, activations)}``, each [batch, pos, d_sae].

    Example:
        >>> model = interp.load_model("shakespeare-char")
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> tokens, answer = model.to_tokens("ROMEO:\\nO"), model.to_single_token("R")
        >>> attr, acts = feature_attribution(model, [sae], tokens,
        ...     lambda logits: logits[0, -1, answer])[sae.cfg.hook_name]
        >>> attr.shape   # [batch, pos, d_sae]
        torch.Size([1, 8, 1024])
    """
    saes = [saes] if isinstance(saes, SAE) else list(saes)
    outputs = {sae.cfg.output_hook for sae in saes}
    inputs = {sae.cfg.hook_name for sae in saes}
    deltas: dict[str, Tensor] = {}
    seen: dict[str, Tensor] = {}

    def hook(activation: Tensor, hook: Any) -> Tensor:
        seen[hook.name] = activation.detach()
        if hook.name not in outputs:
            return activation
        deltas[hook.name] = torch.zeros_like(activation, requires_grad=True)
        return activation + deltas[hook.name]

    with torch.enable_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=[(n, hook) for n in outputs | inputs])
        value = metric(logits)
        if value.numel() != 1:
            raise ValueError(f"The metric must return one number; got shape {tuple(value.shape)}.")
        names = sorted(deltas)
        grads = torch.autograd.grad(value.sum(), [deltas[n] for n in names])
        grads = dict(zip(names, grads, strict=True))
    result = {}
    with torch.no_grad():
        for sae in saes:
            acts = sae.encode(seen[sae.cfg.hook_name])
            grad = grads[sae.cfg.output_hook].flatten(2).to(acts)  # [batch, pos, d_out]
            result[sae.cfg.hook_name] = (acts * (grad @ decoder_rows(sae).T), acts)
    return result


def spearman(a: Tensor, b: Tensor) -> float:
    """Spearman rank correlation of two 1-D tensors (average ranks for ties).

    Example:
        >>> spearman(torch.tensor([1., 2, 3]), torch.tensor([1., 5, 9]))
        1.0
    """

    def ranks(x: Tensor) -> Tensor:
        x = x.double().flatten()
        order = x.argsort()
        r = torch.empty_like(x)
        r[order] = torch.arange(len(x), dtype=torch.float64)
        for value in x.unique():  # ties: the mean rank
            tied = x == value
            r[tied] = r[tied].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / (ra.norm() * rb.norm()))
