"""Exact activation patching, batched: many patched runs of the corrupted prompts at once.

TransformerLens runs one full forward pass per patched index. Here every patch is one row
group of a batch, and three facts about a causal transformer cut the work without changing
any result:

1. Before the patched layer, a patched run *is* the corrupted run. The corrupted run is done
   once (with a cache); each patched run enters the batch at its own layer, starting from the
   cached corrupted ``resid_pre`` of that layer ("wavefront": one block call per layer serves
   runs that entered at that layer or earlier).
2. A patch that first changes the activation at position ``s`` leaves every position before
   ``s`` equal to the corrupted run, at every later layer. Runs only compute positions ``s:``,
   attending to the corrupted run's cached keys and values for the positions before ``s``.
   A patch that changes nothing (the clean and corrupted activations are equal there, e.g.
   before the first token where the prompts differ) needs no forward pass at all.
3. Only the positions the metric reads are unembedded (``PatchingMetric.positions`` or
   ``metric_positions``).

Runs are grouped into batches of at most ``max_batch_size`` sequences (runs x prompts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.caching import position_axis
from interp.kv_cache import KeyValueCacheEntry
from interp.patching.metrics import PatchingMetric

PatchSetter = Callable[[Tensor, Sequence[int], Tensor], Tensor]
# A batch that is mostly padding wastes less than many tiny block calls: below this many
# (padded) tokens a batch may grow regardless of padding.
_MIN_BATCH_TOKENS = 256
_MAX_PADDING_RATIO = 1.25


def first_changed_position(patched: Tensor, original: Tensor, axis: int) -> int | None:
    """The first position at which ``patched`` differs from ``original`` (None: nowhere)."""
    changed = (patched != original).movedim(axis, 0)
    changed_at = changed.reshape(changed.shape[0], -1).any(dim=1)  # [pos]
    where = changed_at.nonzero()
    return int(where[0, 0]) if len(where) else None


@dataclass
class PatchRun:
    """One patched run: patch ``hook_name`` (in block ``layer``) at ``index``."""

    number: int  # position in the caller's list of indices
    index: tuple[int, ...]
    hook_name: str
    layer: int
    first_changed: int = 0


class MetricEvaluator:
    """Turns final residual streams of patched runs into one metric value per run.

    Batch-aware metrics (``PatchingMetric``) see all rows of a batch at their positions;
    other callables are called once per run (TransformerLens style) with that run's logits,
    restricted to ``metric_positions`` when given.
    """

    def __init__(
        self,
        model: Any,
        metric: Callable[[Tensor], Tensor],
        metric_positions: int | Sequence[int] | None,
        corrupted_final: Float[Tensor, "prompt pos d_model"],
    ) -> None:
        self.model = model
        self.metric = metric
        self.batched = isinstance(metric, PatchingMetric)
        n_pos = corrupted_final.shape[1]
        positions = metric.positions if self.batched else metric_positions
        if isinstance(positions, int):
            positions = (positions,)
        if positions is not None:
            bad = [p for p in positions if not -n_pos <= p < n_pos]
            if bad:
                raise ValueError(
                    f"Metric positions {bad} are outside the {n_pos}-token prompt; use "
                    "positions in [-n_pos, n_pos), e.g. -1 for the last token."
                )
            positions = tuple(p % n_pos for p in positions)
        self.positions = positions
        self.corrupted_final = corrupted_final
        self.n_prompts = corrupted_final.shape[0]

    def logits(self, resid: Float[Tensor, "rows pos d_model"]) -> Float[Tensor, "rows pos d_vocab"]:
        return self.model.unembed(self.model.ln_final(resid))

    def evaluate(self, suffix: Float[Tensor, "rows suffix d_model"], start: int) -> Tensor:
        """Metric per run for final residuals that hold positions ``start:`` of each row
        (earlier positions equal the corrupted run's); returns [n_runs] float32."""
        n_runs = suffix.shape[0] // self.n_prompts
        if self.positions is None:
            resid = torch.cat([self.corrupted_final[:, :start].repeat(n_runs, 1, 1), suffix], dim=1)
        else:
            resid = torch.stack(
                [
                    suffix[:, p - start]
                    if p >= start
                    else self.corrupted_final[:, p].repeat(n_runs, 1)
                    for p in self.positions
                ],
                dim=1,
            )  # [rows, n_positions, d_model]
        if self.batched:
            values = self.metric.score(self.logits(resid))
            if values.shape != (resid.shape[0],):
                raise ValueError(
                    f"{type(self.metric).__name__}.score returned shape {tuple(values.shape)} "
                    f"for {resid.shape[0]} rows; a PatchingMetric returns one value per row."
                )
            return values.float().view(n_runs, self.n_prompts).mean(dim=1)
        runs = resid.view(n_runs, self.n_prompts, *resid.shape[1:])
        return torch.stack([self.per_run_value(self.logits(run)) for run in runs])

    def per_run_value(self, logits: Tensor) -> Tensor:
        value = torch.as_tensor(self.metric(logits), device=logits.device)
        if value.numel() == 1:
            return value.reshape(()).float()
        if value.shape == (self.n_prompts,):
            return value.float().mean()
        raise ValueError(
            f"The patching metric returned shape {tuple(value.shape)}; return a scalar (or one "
            f"value per prompt, [{self.n_prompts}]) for logits of shape {tuple(logits.shape)}."
        )


def corrupted_run_cache(
    model: Any, tokens: Int[Tensor, "prompt pos"], first_layer: int, extra_names: Sequence[str]
) -> dict[str, Tensor]:
    """One corrupted forward, keeping what patched runs restart from: ``resid_pre``, keys and
    values of every block from ``first_layer`` on, the final residual, and ``extra_names``."""
    n_layers = model.cfg.n_layers
    names = {f"blocks.{n_layers - 1}.hook_resid_post", *extra_names}
    for layer in range(first_layer, n_layers):
        names |= {
            f"blocks.{layer}.hook_resid_pre",
            f"blocks.{layer}.attn.hook_k",
            f"blocks.{layer}.attn.hook_v",
        }
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens, names_filter=sorted(names), return_type=None, return_cache_object=False
        )
    return cache


def group_runs(
    runs: list[PatchRun], n_pos: int, n_prompts: int, max_batch_size: int
) -> list[list[PatchRun]]:
    """Batches of runs: similar first-changed positions together (little padding), at most
    ``max_batch_size`` sequences each."""
    batches: list[list[PatchRun]] = []
    current: list[PatchRun] = []
    current_tokens = 0
    for run in sorted(runs, key=lambda r: -r.first_changed):
        length = n_pos - run.first_changed
        if current:
            padded = (len(current) + 1) * length * n_prompts
            actual = (current_tokens + length) * n_prompts
            too_many = (len(current) + 1) * n_prompts > max_batch_size
            if too_many or padded > max(_MIN_BATCH_TOKENS, _MAX_PADDING_RATIO * actual):
                batches.append(current)
                current, current_tokens = [], 0
        current.append(run)
        current_tokens += length
    if current:
        batches.append(current)
    return batches


def run_patches(
    model: Any,
    corrupted_tokens: Int[Tensor, "prompt pos"],
    clean_cache: Any,
    patch_setter: PatchSetter,
    runs: list[PatchRun],
    patching_metric: Callable[[Tensor], Tensor],
    metric_positions: int | Sequence[int] | None = None,
    max_batch_size: int = 64,
    progress: bool = True,
    description: str = "patching",
) -> Float[Tensor, " n_runs"]:
    """The metric after each patched run, [len(runs)], exactly as if each ran alone.

    ``patch_setter(corrupted_activation [prompt, ...], index, clean_activation)`` returns the
    patched activation (TransformerLens's setter contract); it is applied to the cached
    corrupted activation once per run.

    Example:
        >>> runs = [PatchRun(i, (layer, pos), f"blocks.{layer}.hook_resid_pre", layer) ...]
        >>> run_patches(model, corrupted_tokens, clean_cache, layer_pos_patch_setter, runs, metric)
    """
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}.")
    tokens = model.check_tokens(corrupted_tokens)
    n_prompts, n_pos = tokens.shape
    n_layers = model.cfg.n_layers
    hook_names = sorted({run.hook_name for run in runs})
    missing = [name for name in hook_names if name not in clean_cache]
    if missing:
        raise KeyError(
            f"The clean cache has no {missing}; run the clean prompt with run_with_cache "
            "keeping these activations (or without a names_filter)."
        )
    first_layer = min((run.layer for run in runs), default=n_layers - 1)
    corrupted = corrupted_run_cache(model, tokens, first_layer, hook_names)
    evaluator = MetricEvaluator(
        model,
        patching_metric,
        metric_positions,
        corrupted[f"blocks.{n_layers - 1}.hook_resid_post"],
    )
    results = torch.empty(len(runs), device=model.device)
    with torch.no_grad():
        baseline = evaluator.evaluate(evaluator.corrupted_final, start=0)[0]

    def patched_activation(run: PatchRun) -> Tensor:
        corrupted_act = corrupted[run.hook_name]
        clean_act = clean_cache[run.hook_name].to(corrupted_act)
        if clean_act.shape != corrupted_act.shape:
            raise ValueError(
                f"The clean {run.hook_name} has shape {tuple(clean_act.shape)} but the corrupted "
                f"run's is {tuple(corrupted_act.shape)}; clean and corrupted prompts must have "
                "the same number of prompts and tokens."
            )
        return patch_setter(corrupted_act.clone(), list(run.index), clean_act)

    live_runs = []
    for run in runs:
        axis = position_axis(run.hook_name)
        first = first_changed_position(patched_activation(run), corrupted[run.hook_name], axis)
        if first is None:  # the patch changes nothing: the result is the corrupted run's
            results[run.number] = baseline
        else:
            run.first_changed = first
            live_runs.append(run)

    bar = tqdm(total=len(runs), desc=description, disable=not progress)
    bar.update(len(runs) - len(live_runs))
    with torch.no_grad():
        for batch in group_runs(live_runs, n_pos, n_prompts, max_batch_size):
            batch.sort(key=lambda r: r.layer)
            start = min(run.first_changed for run in batch)
            final = _run_wavefront(model, corrupted, batch, start, n_prompts, patched_activation)
            results[[run.number for run in batch]] = evaluator.evaluate(final, start)
            bar.update(len(batch))
    bar.close()
    return results


def _run_wavefront(
    model: Any,
    corrupted: dict[str, Tensor],
    batch: list[PatchRun],
    start: int,
    n_prompts: int,
    patched_activation: Callable[[PatchRun], Tensor],
) -> Float[Tensor, "rows suffix d_model"]:
    """Positions ``start:`` of every run in ``batch`` (sorted by layer) through the blocks;
    each run joins at its own layer, where its patch replaces its rows' activation."""
    residual = None
    for layer in range(batch[0].layer, model.cfg.n_layers):
        entering = [run for run in batch if run.layer == layer]
        hooks = []
        if entering:
            joining = corrupted[f"blocks.{layer}.hook_resid_pre"][:, start:]
            joining = joining.repeat(len(entering), 1, 1)
            n_before = 0 if residual is None else residual.shape[0]
            residual = joining if residual is None else torch.cat([residual, joining])
            hooks = _patch_hooks(entering, n_before, start, n_prompts, patched_activation)
        past_kv = None
        if start > 0:
            n_runs = residual.shape[0] // n_prompts
            past_kv = KeyValueCacheEntry(  # the corrupted prefix, the same for every run
                _tile_runs(corrupted[f"blocks.{layer}.attn.hook_k"][:, :start], n_runs),
                _tile_runs(corrupted[f"blocks.{layer}.attn.hook_v"][:, :start], n_runs),
            )
        with model.hooks(fwd_hooks=hooks):
            residual = model.blocks[layer](residual, None, past_kv)
    return residual


def _tile_runs(per_prompt: Tensor, n_runs: int) -> Tensor:
    """[prompt, ...] tiled run-major to [n_runs * prompt, ...]."""
    return per_prompt.repeat(n_runs, *([1] * (per_prompt.ndim - 1)))


def _patch_hooks(
    entering: list[PatchRun],
    first_row: int,
    start: int,
    n_prompts: int,
    patched_activation: Callable[[PatchRun], Tensor],
) -> list[tuple[str, Callable]]:
    """Hooks that overwrite the rows of the runs joining at this layer with their patches."""
    rows_by_hook: dict[str, list[int]] = {}
    values_by_hook: dict[str, list[Tensor]] = {}
    for offset, run in enumerate(entering):
        row = first_row + offset * n_prompts
        axis = position_axis(run.hook_name)
        patched = patched_activation(run)
        suffix = patched.narrow(axis, start, patched.shape[axis] - start)
        rows_by_hook.setdefault(run.hook_name, []).extend(range(row, row + n_prompts))
        values_by_hook.setdefault(run.hook_name, []).append(suffix)

    def make_hook(rows: list[int], values: Tensor) -> Callable:
        def patch_rows(activation: Tensor, hook: Any) -> Tensor:
            # Written in place, as TransformerLens does: no gradients flow here.
            activation[rows] = values.to(activation.dtype)
            return activation

        return patch_rows

    return [
        (name, make_hook(rows_by_hook[name], torch.cat(values_by_hook[name])))
        for name in rows_by_hook
    ]
