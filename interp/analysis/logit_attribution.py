"""Direct logit attribution: each head's and MLP layer's direct effect on a logit difference.

The final residual stream is a sum of component outputs, and the final layer norm (with its
cached scale) is linear in that sum, so the logit difference splits exactly into one term per
component plus a constant from ``ln_final.b`` and ``b_U``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.analysis.labels import head_label_grid

if TYPE_CHECKING:
    from interp.cache import ActivationCache
    from interp.model import HookedTransformer

TokensLike = str | int | Int[Tensor, " batch"]


@dataclass
class DirectLogitAttribution:
    """The result of ``direct_logit_attribution``.

    ``attributions[c, b]`` is component ``labels[c]``'s direct effect on example b's logit
    difference; ``attributions.sum(0) + bias_term == logit_diff``. On models whose logits
    are soft-capped (``output_logits_soft_cap``, Gemma 2) ``logit_diff`` is taken before the
    cap, which is not linear.
    """

    attributions: Float[Tensor, "component batch"]
    labels: list[str]
    bias_term: Float[Tensor, " batch"]
    logit_diff: Float[Tensor, " batch"]
    n_layers: int
    n_heads: int

    @property
    def head_attributions(self) -> Float[Tensor, "n_layers n_heads batch"]:
        """The heads' attributions as a grid (``head_labels[l][h]`` names entry l, h)."""
        n_heads_total = self.n_layers * self.n_heads
        return self.attributions[:n_heads_total].reshape(self.n_layers, self.n_heads, -1)

    @property
    def head_labels(self) -> list[list[str]]:
        return head_label_grid(self.n_layers, self.n_heads)

    @property
    def mlp_attributions(self) -> Float[Tensor, "n_layers batch"] | None:
        """Each MLP layer's attribution (``"{l}_mlp_out"``); None for attention-only models."""
        rows = [i for i, label in enumerate(self.labels) if label.endswith("_mlp_out")]
        return self.attributions[rows] if rows else None

    def table(self) -> list[dict[str, Any]]:
        """One row per (component, example): ``{"component", "batch", "attribution"}``.

        Example:
            >>> prompt, answer, wrong = tokens[:, :-1], tokens[:, -1], tokens[:, -2]
            >>> rows = direct_logit_attribution(model, prompt, answer, wrong).table()
            >>> sorted(rows[0])
            ['attribution', 'batch', 'component']
            >>> max(rows, key=lambda row: row["attribution"])["component"]   # the induction head
            'L1H0'
        """
        values = self.attributions.tolist()
        return [
            {"component": label, "batch": batch, "attribution": value}
            for label, per_batch in zip(self.labels, values, strict=True)
            for batch, value in enumerate(per_batch)
        ]


@torch.no_grad()
def direct_logit_attribution(
    model: HookedTransformer,
    tokens: Int[Tensor, "batch pos"] | str | list[str],
    correct_tokens: TokensLike,
    incorrect_tokens: TokensLike | None = None,
    pos: int = -1,
    cache: ActivationCache | None = None,
) -> DirectLogitAttribution:
    """Attribute the logit of ``correct_tokens`` (minus ``incorrect_tokens``) at position
    ``pos`` to every head, every MLP layer, the embeddings and the attention output biases.

    Components are labelled ``"L0H0"``..., ``"{l}_mlp_out"``, ``"embed"``, ``"pos_embed"``
    (not on rotary models), ``"bias"``. Tokens are ids, ``[batch]`` tensors or single-token strings.

    Example:
        >>> # The repeated sequence's last token against the one before it, from position -1:
        >>> dla = direct_logit_attribution(model, tokens[:, :-1], tokens[:, -1], tokens[:, -2])
        >>> dla.labels   # an attention-only model: no "{l}_mlp_out"
        ['L0H0', 'L1H0', 'embed', 'pos_embed', 'bias']
        >>> dla.head_attributions.mean(-1).shape   # [n_layers, n_heads], mean over prompts
        torch.Size([2, 1])
        >>> round(dla.head_attributions[1, 0, 0].item())   # L1H0 copies the answer
        12
        >>> bool((dla.attributions.sum(0) + dla.bias_term - dla.logit_diff).abs().max() < 1e-3)
        True
    """
    if isinstance(tokens, (str, list)):
        tokens = model.to_tokens(tokens)
    tokens = tokens if tokens.ndim == 2 else tokens[None]
    if cache is None:
        _, cache = model.run_with_cache(tokens)  # the full forward, to cache ln_final's scale
    if not cache.has_batch_dim:
        raise ValueError("direct_logit_attribution needs a cache with its batch axis.")
    stack, labels = cache.get_full_resid_decomposition(
        expand_neurons=False, pos_slice=pos, return_labels=True
    )
    attributions = cache.logit_attrs(stack, correct_tokens, incorrect_tokens, pos_slice=pos)
    final_resid = cache["resid_post", -1][:, pos]  # [batch, d_model]
    # Before any soft cap (Gemma 2): the cap is not linear, so the components sum to these.
    logits = model.ln_final(final_resid) @ model.W_U + model.b_U  # [batch, d_vocab]
    bias_logits = _unembed_bias(model)  # [d_vocab]
    logit_diff, bias_term = (
        _pick(logits, correct_tokens, model),
        _pick(bias_logits.expand_as(logits), correct_tokens, model),
    )
    if incorrect_tokens is not None:
        logit_diff = logit_diff - _pick(logits, incorrect_tokens, model)
        bias_term = bias_term - _pick(bias_logits.expand_as(logits), incorrect_tokens, model)
    return DirectLogitAttribution(
        attributions=attributions,
        labels=labels,
        bias_term=bias_term,
        logit_diff=logit_diff,
        n_layers=model.cfg.n_layers,
        n_heads=model.cfg.n_heads,
    )


def _unembed_bias(model: HookedTransformer) -> Float[Tensor, " d_vocab"]:
    """The logits a zero-centred final stream would give: ``ln_final.b @ W_U + b_U``."""
    ln_bias = getattr(model.ln_final, "b", None)
    bias = model.b_U.clone()
    if ln_bias is not None:
        bias = bias + ln_bias @ model.W_U
    return bias


def _pick(
    logits: Float[Tensor, "batch d_vocab"], tokens: TokensLike, model: HookedTransformer
) -> Float[Tensor, " batch"]:
    """Each example's logit of its token (one id or string for all, or one per example)."""
    if isinstance(tokens, str):
        tokens = model.to_single_token(tokens)
    ids = torch.as_tensor(tokens, device=logits.device).expand(logits.shape[0])
    return logits.gather(-1, ids[:, None])[:, 0]
