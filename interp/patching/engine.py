"""Exact activation patching, batched: many patched runs of the corrupted prompts at once.

TransformerLens runs one full forward pass per patched index. Here many patched runs share
each forward pass, and four facts about a causal transformer cut the work without changing
any result (beyond float32 rounding: matmuls over a packed batch round differently from the
same matmuls over one run; ``exact=True`` runs ``interp.patching.exact`` instead, equal to
TransformerLens's loop bit for bit):

1. Before the patched layer, a patched run *is* the corrupted run. The corrupted run is done
   once (with a cache); each patched run enters at its own layer, from the cached corrupted
   ``resid_pre`` ("wavefront": one block call per layer serves every run that entered at that
   layer or earlier).
2. A patch that first changes the activation at position ``s`` leaves every position before
   ``s`` equal to the corrupted run, at every later layer. A run computes only positions
   ``s:``, attending to the corrupted run's cached keys and values before ``s``. A patch that
   changes nothing (e.g. before the first token where the prompts differ) needs no forward
   pass at all: its value is the unpatched metric, from a plain forward of the corrupted
   tokens, exactly as a loop gets it.
3. Runs are packed end to end along the position axis, not padded to a common length: a
   batch is [prompt, packed_pos, d_model], and an attention mask keeps each run to its own
   positions and to the corrupted prefix before its ``s`` (and, on "local" layers, to the
   sliding window). Each packed position keeps its position in the prompt, which rotary
   embeddings rotate by. No position is computed for nothing.
4. Only what the metric reads is computed at the end: in the last block only the metric's
   positions get queries, attention output and MLP (the others only supply keys and values),
   and only those positions, and only the metric's ``vocab`` columns, are unembedded.

A batch holds at most ``max_batch_size`` sequences (runs x prompts) and about
``interp.patching.packing.MAX_PACKED_LENGTH`` packed positions. Hooks the caller left attached
to the model would see this packed layout, not the prompts', so with any attached, each
patched run is one full forward pass instead, as in TransformerLens (with a warning; the
``exact`` path).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.cache.kv_cache import KeyValueCacheEntry
from interp.hooks.caching import position_axis
from interp.patching.checks import check_same_shape
from interp.patching.evaluation import MetricEvaluator
from interp.patching.exact import PatchSetter, loop_metric_value, run_patches_exactly
from interp.patching.packing import PackedBatch, PatchRun, pack_runs, write_packed_attention_rows


def first_changed_position(patched: Tensor, original: Tensor, axis: int) -> int | None:
    """The first position at which ``patched`` differs from ``original`` (None: nowhere)."""
    changed = (patched != original).movedim(axis, 0)
    changed_at = changed.reshape(changed.shape[0], -1).any(dim=1)  # [pos]
    where = changed_at.nonzero()
    return int(where[0, 0]) if len(where) else None


def cached_key_name(model: Any, layer: int) -> str:
    """The hook holding block ``layer``'s keys as attention stores them in a key/value cache:
    after rotary embeddings (and the key norm) on rotary models."""
    rotary = model.cfg.positional_embedding_type == "rotary"
    return f"blocks.{layer}.attn.hook_{'rot_k' if rotary else 'k'}"


def batching_obstacle(model: Any) -> str | None:
    """Why patched runs of ``model`` cannot be packed into batches exactly (None: they can).

    Packed runs restart from the corrupted run's cached keys, read at ``cached_key_name``;
    a key norm without rotary embeddings has no hook holding its normalised keys.
    """
    callers_hooks = sorted(point.name for point in model.hook_points() if point.has_hooks)
    if callers_hooks:
        return (
            f"Hooks are attached at {callers_hooks[:3]}{'...' if len(callers_hooks) > 3 else ''}"
            ". They act in every patched run, and may depend on positions or batch rows, so "
            "patching runs one forward pass per index, as TransformerLens does (slower). "
            "Attach them only around your own calls (model.hooks(...)) for batched patching."
        )
    if model.cfg.tp_size > 1:
        return (
            f"tp_size={model.cfg.tp_size}: the cached keys and values batched runs restart "
            "from are each rank's share, so patching runs one forward pass per index (slower)."
        )
    if model.cfg.attention_dir == "bidirectional":
        return (
            "attention_dir='bidirectional': a patch changes every position, not only those "
            "after it, so patching runs one forward pass per index (slower)."
        )
    if model.cfg.use_qk_norm and model.cfg.positional_embedding_type != "rotary":
        return (
            "use_qk_norm without rotary embeddings: no hook holds the normalised keys that "
            "batched runs restart from, so patching runs one forward pass per index (slower)."
        )
    return None


def corrupted_run_cache(
    model: Any,
    tokens: Int[Tensor, "prompt pos"],
    first_layer: int,
    extra_names: Sequence[str],
    clean_names: Sequence[str],
) -> tuple[Float[Tensor, "prompt pos d_vocab"] | None, dict[str, Tensor]]:
    """One corrupted forward, keeping what patched runs restart from: ``resid_pre``, keys and
    values of every block from ``first_layer`` on, the final residual, and ``extra_names``.
    Also returns the logits when they are the plain forward's (None otherwise).

    Attention takes its explicit path (not the fused kernel) where a pattern or scores hook
    is attached, and the two round differently. The clean run took the explicit path where
    its cache (``clean_names``) holds those; the corrupted run does the same, so positions
    where the prompts agree are bit-identical and patches there are seen to change nothing.
    Its logits then differ from a plain forward's in the last bits, and are not returned.
    """
    n_layers = model.cfg.n_layers
    names = {f"blocks.{n_layers - 1}.hook_resid_post", *extra_names}
    explicit = {n for n in clean_names if n.endswith(("hook_pattern", "hook_attn_scores"))}
    names |= explicit
    for layer in range(first_layer, n_layers):
        names |= {
            f"blocks.{layer}.hook_resid_pre",
            cached_key_name(model, layer),
            f"blocks.{layer}.attn.hook_v",
        }
    # Caching hooks elsewhere leave every kernel as a plain forward's (only pattern, scores
    # and norm hooks change them), so without those the logits are the plain ones.
    plain = not explicit and not any(n.endswith(("hook_scale", "hook_normalized")) for n in names)
    with torch.no_grad():
        logits, cache = model.run_with_cache(
            tokens,
            names_filter=sorted(names),
            return_type="logits" if plain else None,
            return_cache_object=False,
        )
    return logits, cache


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
    exact: bool = False,
) -> Float[Tensor, " n_runs"]:
    """The metric after each patched run, [len(runs)], as if each ran alone.

    ``patch_setter(corrupted_activation [prompt, ...], index, clean_activation)`` returns the
    patched activation (TransformerLens's setter contract); it is applied to the cached
    corrupted activation once per run.

    A patch that writes the values already there (bit for bit) cannot change the run: its
    value is the unpatched metric, from a plain forward of ``corrupted_tokens`` as a
    one-forward-per-index loop computes it (exactly 0 for a metric normalised by those
    logits). Other runs are packed into batches, and matmuls over other shapes round
    differently: results differ from the loop's by float32 rounding, magnified by a
    normalised metric's 1 / |clean - corrupted|. With ``exact``, each run is the loop's own
    forward pass (``interp.patching.exact``): results equal the loop bit for bit, slower.

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> from interp.patching.activation import layer_pos_patch_setter
        >>> runs = [PatchRun(i, (layer, 10), f"blocks.{layer}.hook_resid_pre", layer)
        ...         for i, layer in enumerate(range(2))]   # position 10 entering each block
        >>> values = run_patches(model, corrupted_tokens, clean_cache, layer_pos_patch_setter,
        ...                      runs, metric, progress=False)
        >>> [round(value, 2) for value in values.tolist()]
        [1.0, 1.0]
    """
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}.")
    tokens = model.check_tokens(corrupted_tokens)
    n_prompts, n_pos = tokens.shape
    n_layers = model.cfg.n_layers
    hook_names = _patched_hook_names(runs, clean_cache)
    obstacle = batching_obstacle(model)
    if exact or obstacle is not None:
        if obstacle is not None and not exact:
            warnings.warn(obstacle, stacklevel=3)
        return run_patches_exactly(
            model, tokens, clean_cache, patch_setter, runs, patching_metric, metric_positions,
            progress, description,
        )  # fmt: skip
    first_layer = min((run.layer for run in runs), default=n_layers - 1)
    plain_logits, corrupted = corrupted_run_cache(
        model, tokens, first_layer, hook_names, list(clean_cache.keys())
    )
    evaluator = MetricEvaluator(
        model,
        patching_metric,
        metric_positions,
        corrupted[f"blocks.{n_layers - 1}.hook_resid_post"],
    )
    results = torch.empty(len(runs), device=model.device)
    with torch.no_grad():
        if plain_logits is None:
            plain_logits = model(tokens)
        baseline = loop_metric_value(patching_metric, plain_logits, metric_positions)
    del plain_logits

    def patched_activation(run: PatchRun) -> Tensor:
        corrupted_act = corrupted[run.hook_name]
        clean_act = clean_cache[run.hook_name].to(corrupted_act)
        check_same_shape(run.hook_name, clean_act, corrupted_act)
        return patch_setter(corrupted_act.clone(), list(run.index), clean_act)

    live_runs = []
    for run in runs:
        axis = position_axis(run.hook_name)
        first = first_changed_position(patched_activation(run), corrupted[run.hook_name], axis)
        if first is None:  # the patch changes nothing: the result is the unpatched run's
            results[run.number] = baseline
        else:
            run.first_changed = first
            live_runs.append(run)

    bar = tqdm(total=len(runs), desc=description, disable=not progress)
    bar.update(len(runs) - len(live_runs))
    with torch.no_grad():
        for batch in pack_runs(live_runs, n_pos, n_prompts, max_batch_size):
            final = _run_wavefront(model, corrupted, batch, evaluator, patched_activation)
            results[[run.number for run in batch.runs]] = evaluator.evaluate(final)
            bar.update(len(batch.runs))
    bar.close()
    return results


def _patched_hook_names(runs: list[PatchRun], clean_cache: Any) -> list[str]:
    """The hooks ``runs`` patch, sorted, after checking the clean cache holds each."""
    hook_names = sorted({run.hook_name for run in runs})
    missing = [name for name in hook_names if name not in clean_cache]
    if missing:
        raise KeyError(
            f"The clean cache has no {missing}; run the clean prompt with run_with_cache "
            "keeping these activations (or without a names_filter)."
        )
    return hook_names


def _run_wavefront(
    model: Any,
    corrupted: dict[str, Tensor],
    batch: PackedBatch,
    evaluator: MetricEvaluator,
    patched_activation: Callable[[PatchRun], Tensor],
) -> Float[Tensor, "rows n_read d_model"]:
    """Every run of ``batch`` through the blocks, each joining at its own layer with its
    patch; returns their final residuals at the positions the metric reads."""
    last_layer = model.cfg.n_layers - 1
    residual = None  # [prompt, packed, d_model] of the runs joined so far
    n_joined = 0
    masks: dict[int | None, Tensor] = {}  # allowed_keys of the joined runs, by window size
    positions = None  # [1, packed]: each packed position's position in its prompt
    outputs = None
    for layer in range(batch.runs[0].layer, last_layer + 1):
        entering = [i for i, run in enumerate(batch.runs) if run.layer == layer]
        hooks = []
        if entering:
            joining = [_joining_residual(batch, i, corrupted, patched_activation) for i in entering]
            residual = torch.cat(joining if residual is None else [residual, *joining], dim=1)
            n_joined += len(entering)
            masks = {}
            positions = batch.positions(n_joined, residual.device)
            hooks = _patch_hooks(batch, entering, patched_activation)
        block = model.blocks[layer]
        window = block.attn.window_size  # None on a global layer
        if window not in masks:
            masks[window] = batch.allowed_keys(n_joined, residual.device, window)
        past_kv = None
        if batch.n_prefix > 0:  # the corrupted prefix, the same for every run
            past_kv = KeyValueCacheEntry(
                corrupted[cached_key_name(model, layer)][:, : batch.n_prefix],
                corrupted[f"blocks.{layer}.attn.hook_v"][:, : batch.n_prefix],
            )
        if layer == last_layer and _only_outputs_matter(hooks, evaluator):
            outputs = batch.metric_outputs(evaluator.read_positions)
        output_positions = (
            None if outputs is None else torch.tensor(outputs, device=residual.device)
        )
        with model.hooks(fwd_hooks=hooks):
            residual = block(
                residual,
                _shortformer_pos_embed(model, positions),
                past_kv,
                allowed_keys=masks[window],
                output_positions=output_positions,
                positions=positions,
            )
    return batch.metric_residuals(residual, outputs, evaluator)


def _shortformer_pos_embed(model: Any, positions: Tensor) -> Tensor | None:
    """A shortformer model's position embeddings of the packed positions (added to queries
    and keys in every block); None for other models."""
    if model.cfg.positional_embedding_type != "shortformer":
        return None
    return model.pos_embed.W_pos[positions]  # [1, packed, d_model]


def _only_outputs_matter(hooks: list, evaluator: MetricEvaluator) -> bool:
    """Whether the last block may compute only the positions the metric reads: the metric
    reads fixed positions, and no patch acts inside the block, where it would see fewer
    positions than the run has."""
    return evaluator.positions is not None and not hooks


def _joining_residual(
    batch: PackedBatch,
    run_number: int,
    corrupted: dict[str, Tensor],
    patched_activation: Callable[[PatchRun], Tensor],
) -> Float[Tensor, "prompt suffix d_model"]:
    """The residual a run enters its layer with, positions ``first_changed:``: the corrupted
    run's, or its patched value when the patch is on this ``hook_resid_pre``."""
    run = batch.runs[run_number]
    name = f"blocks.{run.layer}.hook_resid_pre"
    resid_pre = patched_activation(run) if run.hook_name == name else corrupted[name]
    return resid_pre[:, run.first_changed :]


def _patch_hooks(
    batch: PackedBatch,
    entering: list[int],
    patched_activation: Callable[[PatchRun], Tensor],
) -> list[tuple[str, Callable]]:
    """Hooks that write the patches of the runs joining at this layer (other than those on
    ``hook_resid_pre``, already in their residual) into their packed positions."""
    segments_by_hook: dict[str, list[tuple[int, int, Tensor]]] = {}
    for i in entering:
        run = batch.runs[i]
        if run.hook_name != f"blocks.{run.layer}.hook_resid_pre":
            segment = (batch.offsets[i], run.first_changed, patched_activation(run))
            segments_by_hook.setdefault(run.hook_name, []).append(segment)

    def make_hook(segments: list[tuple[int, int, Tensor]], axis: int) -> Callable:
        def patch_segments(activation: Tensor, hook: Any) -> Tensor:
            # Written in place, as TransformerLens does: no gradients flow here.
            for offset, first, patched in segments:
                patched = patched.to(activation.dtype)
                length = patched.shape[axis] - first
                if axis == 1:  # [prompt, pos, ...]
                    activation[:, offset : offset + length] = patched[:, first:]
                else:  # scores or pattern [prompt, head, query_pos, key_pos]: keys are packed
                    write_packed_attention_rows(activation, patched, offset, first, batch.n_prefix)
            return activation

        return patch_segments

    return [
        (name, make_hook(segments, position_axis(name)))
        for name, segments in segments_by_hook.items()
    ]
