"""Attribution patching: the first-order estimate of every activation patch at once.

For an activation ``a`` and a patch that replaces its corrupted value by the clean one,
``metric(patched) ~= metric(corrupted) + (a_clean - a_corrupted) . d metric / d a``, the gradient
taken on the corrupted run. The clean activations come from ``clean_cache`` (one forward pass
the caller already made), and one forward plus one backward pass on the corrupted prompts
gives the gradient of every activation, so every layer, position and head is estimated from
those two passes.

Results are *estimated patched metric values* in the same shapes and labels as the exact
``get_act_patch_*`` functions, so the two plot side by side; they are exact wherever the
metric is linear in the patched activation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.patching.activation import (
    BLOCK_PATCH_TYPES,
    HEAD_PATCH_TYPES,
    example_setup,
    per_query_head,
)
from interp.patching.engine import check_same_shape
from interp.patching.metrics import PatchingMetric
from interp.patching.plain_metrics import metric_value
from interp.patching.results import LabelledTensor, label_result
from interp.utils import get_act_name

# kind -> (activation name, einsum of the change and the gradient: "axes->axes kept", axis names)
ATTRIBUTION_KINDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "resid_pre": ("resid_pre", "bpd->p", ("layer", "pos")),
    "resid_mid": ("resid_mid", "bpd->p", ("layer", "pos")),
    "resid_post": ("resid_post", "bpd->p", ("layer", "pos")),
    "attn_out": ("attn_out", "bpd->p", ("layer", "pos")),
    "mlp_out": ("mlp_out", "bpd->p", ("layer", "pos")),
    "attn_head_out_all_pos": ("z", "bphd->h", ("layer", "head")),
    "attn_head_q_all_pos": ("q", "bphd->h", ("layer", "head")),
    "attn_head_k_all_pos": ("k", "bphd->h", ("layer", "head")),
    "attn_head_v_all_pos": ("v", "bphd->h", ("layer", "head")),
    "attn_head_pattern_all_pos": ("pattern", "bhqk->h", ("layer", "head_index")),
    "attn_head_out_by_pos": ("z", "bphd->ph", ("layer", "pos", "head")),
    "attn_head_q_by_pos": ("q", "bphd->ph", ("layer", "pos", "head")),
    "attn_head_k_by_pos": ("k", "bphd->ph", ("layer", "pos", "head")),
    "attn_head_v_by_pos": ("v", "bphd->ph", ("layer", "pos", "head")),
    "attn_head_pattern_by_pos": ("pattern", "bhqk->hq", ("layer", "head_index", "dest_pos")),
}


def _metric_value(metric: Callable, logits: Tensor, metric_positions) -> Float[Tensor, ""]:
    """The metric of one run as a scalar that carries the gradient: batch-aware metrics are
    averaged over prompts."""
    if isinstance(metric, PatchingMetric):
        values = metric(logits)
        if not isinstance(values, Tensor) or values.shape != (logits.shape[0],):
            got = f"shape {tuple(values.shape)}" if isinstance(values, Tensor) else values
            raise ValueError(
                f"{type(metric).__name__} returned {got} for {logits.shape[0]} prompts; a "
                "PatchingMetric returns one value per prompt, a [batch] tensor."
            )
        return values.float().mean()
    if metric_positions is not None:
        positions = [metric_positions] if isinstance(metric_positions, int) else metric_positions
        logits = logits[:, list(positions)]
    returned = metric(logits)
    value = metric_value(returned, logits.shape[0], logits.shape)
    if not value.requires_grad:
        what = "a tensor without gradient" if isinstance(returned, Tensor) else "a number"
        raise ValueError(
            f"Attribution patching differentiates the metric, but it returned {what} "
            f"({type(returned).__name__} {returned!r:.40}); return a tensor computed from the "
            "logits (no .item(), .detach() or NumPy), or use the exact get_act_patch_* functions."
        )
    return value


def attribution_patch(
    model: Any,
    corrupted_tokens: Int[Tensor, "batch pos"],
    clean_cache: Any,
    patching_metric: Callable[[Tensor], Tensor],
    kinds: Sequence[str] | None = None,
    *,
    metric_positions: int | Sequence[int] | None = None,
) -> dict[str, LabelledTensor]:
    """Attribution-patching estimates for several kinds of patch from one forward and one
    backward pass on the corrupted prompts: ``{kind: LabelledTensor}``, each shaped like
    ``get_act_patch_<kind>`` (default: every kind in ``ATTRIBUTION_KINDS``).

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> kinds = ["resid_pre", "attn_head_out_all_pos"]
        >>> estimates = attribution_patch(model, corrupted_tokens, clean_cache, metric, kinds)
        >>> estimates["resid_pre"].shape, estimates["attn_head_out_all_pos"].shape
        (torch.Size([2, 21]), torch.Size([2, 1]))
    """
    kinds = list(ATTRIBUTION_KINDS) if kinds is None else list(kinds)
    unknown = [kind for kind in kinds if kind not in ATTRIBUTION_KINDS]
    if unknown:
        raise ValueError(f"Unknown kinds {unknown}; choose from {list(ATTRIBUTION_KINDS)}.")
    tokens = model.check_tokens(corrupted_tokens)
    n_layers = model.cfg.n_layers
    hook_names = {
        (ATTRIBUTION_KINDS[kind][0], layer): get_act_name(ATTRIBUTION_KINDS[kind][0], layer)
        for kind in kinds
        for layer in range(n_layers)
    }
    for name in hook_names.values():
        model.check_hook_name(name)
        if name not in clean_cache:
            raise KeyError(f"The clean cache has no {name!r}; cache it (or everything).")
    corrupted: dict[str, Tensor] = {}

    def keep(activation: Tensor, hook: Any) -> None:
        corrupted[hook.name] = activation

    def track_gradients(embedding: Tensor, hook: Any) -> Tensor:
        return embedding.detach().requires_grad_(True)  # grads flow even with frozen weights

    with torch.enable_grad():
        names = sorted(set(hook_names.values()))
        hooks = [("hook_embed", track_gradients)] + [(name, keep) for name in names]
        logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
        for name in names:
            check_same_shape(name, clean_cache[name], corrupted[name])
        baseline = _metric_value(patching_metric, logits, metric_positions)
        gradients = torch.autograd.grad(baseline, [corrupted[name] for name in names])
    gradient_of = dict(zip(names, gradients, strict=True))

    estimates = {}
    for kind in kinds:
        activation_name, reduction, axis_names = ATTRIBUTION_KINDS[kind]
        per_layer = []
        axes, kept = reduction.split("->")
        for layer in range(n_layers):
            name = hook_names[activation_name, layer]
            change = clean_cache[name].to(gradient_of[name]) - corrupted[name].detach()
            per_layer.append(torch.einsum(f"{axes},{axes}->{kept}", change, gradient_of[name]))
        values = baseline.detach() + torch.stack(per_layer).float()
        estimates[kind] = label_result(values, axis_names, model, tokens)
    return estimates


def _attribution_function(kind: str) -> Callable[..., LabelledTensor]:
    def estimate(
        model: Any,
        corrupted_tokens: Int[Tensor, "batch pos"],
        clean_cache: Any,
        patching_metric: Callable[[Tensor], Tensor],
        *,
        metric_positions: int | Sequence[int] | None = None,
    ) -> LabelledTensor:
        return attribution_patch(
            model, corrupted_tokens, clean_cache, patching_metric, [kind],
            metric_positions=metric_positions,
        )[kind]  # fmt: skip

    estimate.__name__ = estimate.__qualname__ = f"get_attr_patch_{kind}"
    estimate.__doc__ = f"""The attribution-patching estimate of ``get_act_patch_{kind}``: same
    shape and labels, from one forward and one backward pass.

    Example:
{example_setup(kind)}
        >>> exact = interp.patching.get_act_patch_{kind}(
        ...     model, corrupted_tokens, clean_cache, metric)
        >>> estimate = interp.patching.get_attr_patch_{kind}(
        ...     model, corrupted_tokens, clean_cache, metric)
        >>> estimate.shape == exact.shape, estimate.axis_names == exact.axis_names
        (True, True)
    """
    return estimate


get_attr_patch_resid_pre = _attribution_function("resid_pre")
get_attr_patch_resid_mid = _attribution_function("resid_mid")
get_attr_patch_resid_post = _attribution_function("resid_post")
get_attr_patch_attn_out = _attribution_function("attn_out")
get_attr_patch_mlp_out = _attribution_function("mlp_out")
get_attr_patch_attn_head_out_all_pos = _attribution_function("attn_head_out_all_pos")
get_attr_patch_attn_head_q_all_pos = _attribution_function("attn_head_q_all_pos")
get_attr_patch_attn_head_k_all_pos = _attribution_function("attn_head_k_all_pos")
get_attr_patch_attn_head_v_all_pos = _attribution_function("attn_head_v_all_pos")
get_attr_patch_attn_head_pattern_all_pos = _attribution_function("attn_head_pattern_all_pos")
get_attr_patch_attn_head_out_by_pos = _attribution_function("attn_head_out_by_pos")
get_attr_patch_attn_head_q_by_pos = _attribution_function("attn_head_q_by_pos")
get_attr_patch_attn_head_k_by_pos = _attribution_function("attn_head_k_by_pos")
get_attr_patch_attn_head_v_by_pos = _attribution_function("attn_head_v_by_pos")
get_attr_patch_attn_head_pattern_by_pos = _attribution_function("attn_head_pattern_by_pos")


def _stacked(estimates: dict[str, LabelledTensor], kinds: Sequence[str], names) -> LabelledTensor:
    first = estimates[kinds[0]]
    values = torch.stack([estimates[kind].as_subclass(Tensor) for kind in kinds])
    return LabelledTensor(values, ("patch_type", *first.axis_names), (names, *first.axis_labels))


def _spread_key_value_heads(estimates: dict[str, LabelledTensor], kinds, model: Any) -> None:
    """The k and v estimates (one per key/value head under grouped-query attention) spread
    to every query head, as ``get_act_patch_attn_head_*_every`` does, so the kinds stack."""
    out, _, k, v, _ = kinds
    for kind in (k, v):
        estimates[kind] = per_query_head(estimates[kind], estimates[out], model)


def get_attr_patch_block_every(model, corrupted_tokens, clean_cache, metric, **options):
    """Estimates of ``get_act_patch_block_every``: [3, n_layers, pos] (resid_pre, attn_out,
    mlp_out), from one forward and one backward pass.

    Example:
        >>> model = interp.load_model("shakespeare-char")   # attn-only-2l has no MLPs
        >>> clean_logits, clean_cache = model.run_with_cache("To be, or not")
        >>> corrupted_tokens = model.to_tokens("To go, or not")
        >>> metric = interp.patching.KLDivergence(clean_logits)   # 0: the clean prediction
        >>> get_attr_patch_block_every(model, corrupted_tokens, clean_cache, metric).shape
        torch.Size([3, 4, 13])
    """
    kinds = BLOCK_PATCH_TYPES
    estimates = attribution_patch(model, corrupted_tokens, clean_cache, metric, kinds, **options)
    return _stacked(estimates, kinds, BLOCK_PATCH_TYPES)


def get_attr_patch_attn_head_all_pos_every(model, corrupted_tokens, clean_cache, metric, **options):
    """Estimates of ``get_act_patch_attn_head_all_pos_every``: [5, n_layers, n_heads].

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> get_attr_patch_attn_head_all_pos_every(
        ...     model, corrupted_tokens, clean_cache, metric).shape   # [5, n_layers, n_heads]
        torch.Size([5, 2, 1])
    """
    kinds = [f"attn_head_{kind}_all_pos" for kind in HEAD_PATCH_TYPES]
    estimates = attribution_patch(model, corrupted_tokens, clean_cache, metric, kinds, **options)
    _spread_key_value_heads(estimates, kinds, model)
    return _stacked(estimates, kinds, HEAD_PATCH_TYPES)


def get_attr_patch_attn_head_by_pos_every(model, corrupted_tokens, clean_cache, metric, **options):
    """Estimates of ``get_act_patch_attn_head_by_pos_every``: [5, n_layers, pos, n_heads]
    (the pattern's destination position as ``pos``).

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> get_attr_patch_attn_head_by_pos_every(
        ...     model, corrupted_tokens, clean_cache, metric).shape   # [5, n_layers, pos, n_heads]
        torch.Size([5, 2, 21, 1])
    """
    kinds = [f"attn_head_{kind}_by_pos" for kind in HEAD_PATCH_TYPES]
    estimates = attribution_patch(model, corrupted_tokens, clean_cache, metric, kinds, **options)
    _spread_key_value_heads(estimates, kinds, model)
    pattern = estimates[kinds[-1]]
    first = estimates[kinds[0]]
    estimates[kinds[-1]] = LabelledTensor(
        pattern.permute(0, 2, 1), first.axis_names, first.axis_labels
    )
    return _stacked(estimates, kinds, HEAD_PATCH_TYPES)
