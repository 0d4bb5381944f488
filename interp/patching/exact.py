"""Patched runs exactly as TransformerLens's loop runs them: one forward pass per index.

``transformer_lens.patching`` runs, for each index, ``model.run_with_hooks(corrupted_tokens,
fwd_hooks=[(name, patch_hook)])`` and calls the metric on the logits. ``run_patches_exactly``
does the same, so its results equal such a hand-written loop bit for bit (``torch.equal``):
the same batch shape (the corrupted tokens as given), the same hook on the same hook point,
hence the same kernels (a hook on ``hook_pattern`` or ``hook_attn_scores`` makes attention
take its explicit path, in the loop and here alike), full logits, the same metric call.

One economy keeps that equality: per hook point, one forward with a hook that only records
the corrupted activation. That run is what the loop runs for an index whose patch writes the
values already there (e.g. the BOS position, where clean and corrupted prompts agree), so
such an index gets its metric without a forward pass of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.patching.checks import check_same_shape
from interp.patching.metrics import PatchingMetric, check_scores
from interp.patching.packing import PatchRun
from interp.patching.plain_metrics import metric_value

# TransformerLens's setter: (corrupted activation [prompt, ...], index, clean activation) ->
# the patched activation.
PatchSetter = Callable[[Tensor, Sequence[int], Tensor], Tensor]


def loop_metric_value(
    metric: Callable[[Tensor], Tensor],
    logits: Float[Tensor, "prompt pos d_vocab"],
    metric_positions: int | Sequence[int] | None = None,
) -> Float[Tensor, ""]:
    """The metric of one run's full logits as a loop computes it: ``metric(logits)`` (only
    ``metric_positions`` of them when given), reduced by ``metric_value``, a 0-d float32
    tensor of its own.

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> round(loop_metric_value(metric, model(corrupted_tokens)).item(), 3)   # unpatched
        0.0
    """
    if metric_positions is not None:
        positions = [metric_positions] if isinstance(metric_positions, int) else metric_positions
        logits = logits[:, list(positions)]
    value = metric(logits)
    if isinstance(metric, PatchingMetric):
        value = check_scores(metric, value, logits.shape[0])
    value = metric_value(value, logits.shape[0], logits.shape)
    return value.detach().to(logits.device, torch.float32, copy=True)


def unpatched_metric_value(
    model: Any,
    tokens: Int[Tensor, "prompt pos"],
    metric: Callable[[Tensor], Tensor],
    metric_positions: int | Sequence[int] | None = None,
) -> Float[Tensor, ""]:
    """The metric of the corrupted run, computed as the caller computes it: one plain
    forward of ``tokens`` as given (so a normalised metric built from ``model(tokens)`` is
    exactly 0 here).

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> round(unpatched_metric_value(model, corrupted_tokens, metric).item(), 3)
        0.0
    """
    with torch.no_grad():
        return loop_metric_value(metric, model(tokens), metric_positions)


def run_patches_exactly(
    model: Any,
    tokens: Int[Tensor, "prompt pos"],
    clean_cache: Any,
    patch_setter: PatchSetter,
    runs: list[PatchRun],
    metric: Callable[[Tensor], Tensor],
    metric_positions: int | Sequence[int] | None = None,
    progress: bool = True,
    description: str = "patching",
) -> Float[Tensor, " n_runs"]:
    """The metric after each patched run, [len(runs)], each run one full forward pass of
    ``tokens`` with the patch hook on its hook point: equal, bit for bit, to TransformerLens's
    loop (see the module docstring). ``patch_setter`` is TransformerLens's setter contract.

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> from interp.patching.activation import layer_pos_patch_setter
        >>> runs = [PatchRun(i, (layer, 10), f"blocks.{layer}.hook_resid_pre", layer)
        ...         for i, layer in enumerate(range(2))]   # position 10 entering each block
        >>> values = run_patches_exactly(model, corrupted_tokens, clean_cache,
        ...                              layer_pos_patch_setter, runs, metric, progress=False)
        >>> [round(value, 2) for value in values.tolist()]
        [1.0, 1.0]
    """
    results = torch.empty(len(runs), device=model.device)
    by_hook: dict[str, list[PatchRun]] = {}
    for run in runs:
        by_hook.setdefault(run.hook_name, []).append(run)
    bar = tqdm(total=len(runs), desc=description, disable=not progress)
    with torch.no_grad():
        for hook_name, hook_runs in by_hook.items():
            recorded: dict[str, Tensor] = {}

            def record(activation: Tensor, hook: Any, recorded: dict = recorded) -> None:
                recorded["corrupted"] = activation.clone()

            with model.hooks(fwd_hooks=[(hook_name, record)]):
                unchanged_value = loop_metric_value(metric, model(tokens), metric_positions)
            corrupted = recorded["corrupted"]
            clean = clean_cache[hook_name].to(corrupted)
            check_same_shape(hook_name, clean, corrupted)
            for run in hook_runs:
                index = list(run.index)
                if torch.equal(patch_setter(corrupted.clone(), index, clean), corrupted):
                    results[run.number] = unchanged_value  # the recording run, to the bit
                else:
                    results[run.number] = _patched_run_value(
                        model, tokens, hook_name, patch_setter, index, clean, metric,
                        metric_positions,
                    )  # fmt: skip
                bar.update()
    bar.close()
    return results


def _patched_run_value(
    model: Any,
    tokens: Int[Tensor, "prompt pos"],
    hook_name: str,
    patch_setter: PatchSetter,
    index: list[int],
    clean: Tensor,
    metric: Callable[[Tensor], Tensor],
    metric_positions: int | Sequence[int] | None,
) -> Float[Tensor, ""]:
    """One loop iteration: the forward pass with the patch hook, then the metric."""

    def patch(activation: Tensor, hook: Any) -> Tensor:
        return patch_setter(activation, index, clean)

    with model.hooks(fwd_hooks=[(hook_name, patch)]):
        logits = model(tokens)
    return loop_metric_value(metric, logits, metric_positions)
