"""Activation patching with TransformerLens's names and signatures, run batched.

``get_act_patch_resid_pre(model, corrupted_tokens, clean_cache, patching_metric)`` and its
siblings give the same numbers as ``transformer_lens.patching`` (one forward pass per index),
computed by ``interp.patching.engine`` many runs at a time. Every function also takes
``max_batch_size`` (sequences per forward pass), ``metric_positions`` (for plain metrics:
the positions whose logits the metric reads, which it then gets alone; without it, the
logits a plain metric reads are found on the corrupted run and only those are computed, see
``interp.patching.plain_metrics.infer_metric_reads``), ``progress`` (a tqdm bar) and ``exact``.

Batched runs round differently from one forward per index (other matmul shapes), by float32
rounding that a normalised metric magnifies by 1 / |clean - corrupted|; a patch that cannot
change the run (the clean and corrupted values are equal) gives exactly the unpatched metric.
``exact=True`` runs one forward per index as TransformerLens does (``interp.patching.exact``):
results equal such a loop bit for bit (``torch.equal``), at the loop's speed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import einops
import torch
from jaxtyping import Int
from torch import Tensor

from interp.patching.engine import PatchSetter, run_patches
from interp.patching.packing import PatchRun
from interp.patching.results import LabelledTensor, label_result
from interp.utils import get_act_name

DEFAULT_MAX_BATCH_SIZE = 64
# Activations with one head per key/value head ([batch, pos, n_key_value_heads, d_head]).
KEY_VALUE_HOOKS = ("attn.hook_k", "attn.hook_rot_k", "attn.hook_v")


# ------------------------------------------------------------------ patch setters (TL's)
def layer_pos_patch_setter(corrupted_activation, index, clean_activation):
    """Patch ``[:, pos]`` of a [batch, pos, ...] activation; ``index = [layer, pos]``."""
    _, pos = index
    corrupted_activation[:, pos, ...] = clean_activation[:, pos, ...]
    return corrupted_activation


def layer_pos_head_vector_patch_setter(corrupted_activation, index, clean_activation):
    """Patch ``[:, pos, head]`` of a [batch, pos, head, ...] activation; ``[layer, pos, head]``."""
    _, pos, head_index = index
    corrupted_activation[:, pos, head_index] = clean_activation[:, pos, head_index]
    return corrupted_activation


def layer_head_vector_patch_setter(corrupted_activation, index, clean_activation):
    """Patch ``[:, :, head]`` of a [batch, pos, head, ...] activation; ``[layer, head]``."""
    _, head_index = index
    corrupted_activation[:, :, head_index] = clean_activation[:, :, head_index]
    return corrupted_activation


def layer_head_pattern_patch_setter(corrupted_activation, index, clean_activation):
    """Patch ``[:, head]`` of a [batch, head, dest, src] pattern; ``index = [layer, head]``."""
    _, head_index = index
    corrupted_activation[:, head_index, :, :] = clean_activation[:, head_index, :, :]
    return corrupted_activation


def layer_head_pos_pattern_patch_setter(corrupted_activation, index, clean_activation):
    """Patch ``[:, head, dest]`` of a pattern; ``index = [layer, head, dest_pos]``."""
    _, head_index, dest_pos = index
    corrupted_activation[:, head_index, dest_pos, :] = clean_activation[:, head_index, dest_pos, :]
    return corrupted_activation


def layer_head_dest_src_pos_pattern_patch_setter(corrupted_activation, index, clean_activation):
    """Patch ``[:, head, dest, src]`` of a pattern; ``index = [layer, head, dest, src]``."""
    _, head_index, dest_pos, src_pos = index
    corrupted_activation[:, head_index, dest_pos, src_pos] = clean_activation[
        :, head_index, dest_pos, src_pos
    ]
    return corrupted_activation


# ------------------------------------------------------------------------ generic patch
def _axis_sizes(model: Any, n_pos: int, activation_name: str) -> dict[str, int]:
    """The size of each index axis; keys and values (``hook_k``, ``hook_rot_k``, ``hook_v``)
    have one head per key/value head under grouped-query attention."""
    n_heads = model.cfg.n_heads
    if get_act_name(activation_name, layer=0).endswith(KEY_VALUE_HOOKS):
        n_heads = model.cfg.n_key_value_heads or n_heads
    return {
        "layer": model.cfg.n_layers,
        "pos": n_pos,
        "src_pos": n_pos,
        "dest_pos": n_pos,
        "head": n_heads,
        "head_index": n_heads,
    }


def _index_rows(index_df: Any) -> tuple[list[tuple[int, ...]], list[str]]:
    """Rows and column names of a pandas DataFrame, an int tensor [n, k], or a list of tuples."""
    if hasattr(index_df, "columns"):
        return [tuple(int(v) for v in row) for row in index_df.to_numpy()], list(index_df.columns)
    rows = [tuple(int(v) for v in row) for row in torch.as_tensor(index_df).tolist()]
    return rows, [f"axis{i}" for i in range(len(rows[0]) if rows else 0)]


def generic_activation_patch(
    model: Any,
    corrupted_tokens: Int[Tensor, "batch pos"],
    clean_cache: Any,
    patching_metric: Callable[[Tensor], Tensor],
    patch_setter: PatchSetter,
    activation_name: str,
    index_axis_names: Sequence[str] | None = None,
    index_df: Any = None,
    return_index_df: bool = False,
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    metric_positions: int | Sequence[int] | None = None,
    progress: bool = True,
    exact: bool = False,
) -> LabelledTensor | tuple[LabelledTensor, Any]:
    """Patch ``activation_name`` from the clean cache into the corrupted run at every index
    and evaluate ``patching_metric`` on each patched run (TransformerLens's signature).

    The indices are the full grid of ``index_axis_names`` (the first is always "layer"; the
    others are "pos", "head"/"head_index", "dest_pos", "src_pos"), giving a result of that
    shape, or the rows of ``index_df`` (a DataFrame with a "layer" column first, an int tensor
    [n, k] or a list of tuples), giving a flat [n] result. ``patch_setter(corrupted_act,
    index, clean_act)`` writes the clean values into the corrupted activation [batch, ...].

    With ``exact=True`` each index is one forward pass of the corrupted tokens with the
    patch hook, as TransformerLens's loop runs it: the results equal that loop's bit for bit
    (slower). By default runs are batched, which rounds differently (see the module docstring).

    Returns a ``LabelledTensor``; with ``return_index_df``, also the index DataFrame
    (needs pandas).

    Args:
        max_batch_size: sequences per forward pass.
        metric_positions: for a plain metric, the positions whose logits it reads (it then
            gets those alone); by default they are found on the corrupted run
            (``interp.patching.metrics.infer_metric_reads``).
        progress: show a tqdm bar.

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> result = generic_activation_patch(model, corrupted_tokens, clean_cache, metric,
        ...     layer_pos_patch_setter, "resid_pre", index_axis_names=("layer", "pos"))
        >>> result.shape   # [n_layers, pos]
        torch.Size([2, 21])
        >>> [round(value, 2) for value in result[:, 10].tolist()]   # restored by position 10
        [1.0, 1.0]
    """
    if (index_axis_names is None) == (index_df is None):
        raise ValueError("Pass exactly one of index_axis_names and index_df.")
    corrupted_tokens = model.check_tokens(corrupted_tokens)
    n_pos = corrupted_tokens.shape[-1]
    if index_df is None:
        sizes = _axis_sizes(model, n_pos, activation_name)
        unknown = [name for name in index_axis_names if name not in sizes]
        if unknown:
            raise ValueError(f"Unknown index axes {unknown}; use names from {sorted(sizes)}.")
        shape = [sizes[name] for name in index_axis_names]
        rows = list(itertools.product(*(range(size) for size in shape)))
        axis_names = list(index_axis_names)
    else:
        rows, axis_names = _index_rows(index_df)
        shape = None
    runs = []
    for number, index in enumerate(rows):
        hook_name = get_act_name(activation_name, layer=index[0])
        if hook_name not in model.hook_dict:
            model.check_hook_name(hook_name)  # raises with the closest valid names
        runs.append(PatchRun(number, index, hook_name, model.hook_dict[hook_name].layer()))
    values = run_patches(
        model,
        corrupted_tokens,
        clean_cache,
        patch_setter,
        runs,
        patching_metric,
        metric_positions=metric_positions,
        max_batch_size=max_batch_size,
        progress=progress,
        description=f"patching {activation_name}",
        exact=exact,
    )
    if shape is not None:
        result = label_result(values.view(shape), axis_names, model, corrupted_tokens)
    else:
        labels = [
            " ".join(f"{n}={v}" for n, v in zip(axis_names, row, strict=True)) for row in rows
        ]
        result = LabelledTensor(values, ["index"], [labels])
    if not return_index_df:
        return result
    if index_df is None:
        import pandas as pd  # TransformerLens returns a DataFrame; only this option needs pandas

        index_df = pd.DataFrame(rows, columns=axis_names)
    return result, index_df


# ------------------------------------------------------------------- named sweeps (TL's)
# The index grids of the sweeps: the patch setter that writes one index, and the index axes.
_LAYER_POS = (layer_pos_patch_setter, ("layer", "pos"))
_LAYER_HEAD = (layer_head_vector_patch_setter, ("layer", "head"))
_LAYER_POS_HEAD = (layer_pos_head_vector_patch_setter, ("layer", "pos", "head"))
_PATTERN_HEAD = (layer_head_pattern_patch_setter, ("layer", "head_index"))
_PATTERN_DEST = (layer_head_pos_pattern_patch_setter, ("layer", "head_index", "dest_pos"))
_PATTERN_DEST_SRC = (
    layer_head_dest_src_pos_pattern_patch_setter,
    ("layer", "head_index", "dest_pos", "src_pos"),
)
# kind -> (activation name, index grid, what is patched); its sweep is get_act_patch_<kind>.
ACTIVATION_PATCH_KINDS: dict[str, tuple[str, tuple[PatchSetter, tuple[str, ...]], str]] = {
    "resid_pre": (
        "resid_pre", _LAYER_POS, "the residual stream entering each block, at each position"
    ),
    "resid_mid": (
        "resid_mid", _LAYER_POS, "the residual stream between attention and MLP, at each position"
    ),
    "resid_post": (
        "resid_post", _LAYER_POS, "the residual stream leaving each block, at each position"
    ),
    "attn_out": ("attn_out", _LAYER_POS, "each attention layer's output, at each position"),
    "mlp_out": ("mlp_out", _LAYER_POS, "each MLP layer's output, at each position"),
    "attn_head_out_all_pos": ("z", _LAYER_HEAD, "each head's output (hook_z) at all positions"),
    "attn_head_q_all_pos": ("q", _LAYER_HEAD, "each head's queries at all positions"),
    "attn_head_k_all_pos": ("k", _LAYER_HEAD, "each head's keys at all positions"),
    "attn_head_v_all_pos": ("v", _LAYER_HEAD, "each head's values at all positions"),
    "attn_head_pattern_all_pos": ("pattern", _PATTERN_HEAD, "each head's attention pattern"),
    "attn_head_out_by_pos": (
        "z", _LAYER_POS_HEAD, "each head's output (hook_z) at each position"
    ),
    "attn_head_q_by_pos": ("q", _LAYER_POS_HEAD, "each head's query at each position"),
    "attn_head_k_by_pos": ("k", _LAYER_POS_HEAD, "each head's key at each position"),
    "attn_head_v_by_pos": ("v", _LAYER_POS_HEAD, "each head's value at each position"),
    "attn_head_pattern_by_pos": (
        "pattern", _PATTERN_DEST, "each head's attention pattern row (destination)"
    ),
    "attn_head_pattern_dest_src_pos": (
        "pattern", _PATTERN_DEST_SRC, "each single attention weight"
    ),
}  # fmt: skip


# The docstring examples' clean and corrupted runs (``pytest --doctest-modules``): on the
# shipped attn-only-2l, its repeated tokens with one token of the first copy changed, so that
# the induction head predicts the other token; on shakespeare-char for kinds that need MLPs.
EXAMPLE_SETUP = """\
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)"""
EXAMPLE_SETUP_MLP = """\
        >>> model = interp.load_model("shakespeare-char")   # attn-only-2l has no MLPs
        >>> clean_logits, clean_cache = model.run_with_cache("To be, or not")
        >>> corrupted_tokens = model.to_tokens("To go, or not")
        >>> metric = interp.patching.KLDivergence(clean_logits)   # 0: the clean prediction"""


def example_setup(kind: str) -> str:
    """The docstring example's setup for a patch of ``kind`` (one that reads an MLP or its
    residual stream needs a model with MLPs)."""
    return EXAMPLE_SETUP_MLP if kind in ("resid_mid", "mlp_out") else EXAMPLE_SETUP


def _sweep(kind: str) -> Callable[..., LabelledTensor]:
    """``get_act_patch_<kind>``: ``generic_activation_patch`` over the kind's index grid."""
    activation_name, (patch_setter, index_axis_names), what = ACTIVATION_PATCH_KINDS[kind]
    name = f"get_act_patch_{kind}"

    def sweep(
        model: Any,
        corrupted_tokens: Int[Tensor, "batch pos"],
        clean_cache: Any,
        patching_metric: Callable[[Tensor], Tensor],
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        metric_positions: int | Sequence[int] | None = None,
        progress: bool = True,
        exact: bool = False,
    ) -> LabelledTensor:
        return generic_activation_patch(
            model,
            corrupted_tokens,
            clean_cache,
            patching_metric,
            patch_setter,
            activation_name,
            index_axis_names=index_axis_names,
            max_batch_size=max_batch_size,
            metric_positions=metric_positions,
            progress=progress,
            exact=exact,
        )

    shape = ", ".join(
        "n_" + a + "s" if a in ("layer", "head", "head_index") else a for a in index_axis_names
    )
    shape = shape.replace("n_head_indexs", "n_heads")
    sweep.__name__ = sweep.__qualname__ = name
    sweep.__doc__ = f"""Patch {what} from the clean run into the corrupted run, one index at a
    time (batched), and return the metric for each: a ``LabelledTensor`` [{shape}] with axes
    {index_axis_names}.

    Same numbers as ``transformer_lens.patching.{name}`` up to float32 rounding; with
    ``exact=True``, bit for bit (one forward per index, as it runs them). Keyword options:
    ``max_batch_size``, ``metric_positions``, ``progress``, ``exact`` (see
    ``generic_activation_patch``).

    Example:
{example_setup(kind)}
        >>> result = interp.patching.{name}(model, corrupted_tokens, clean_cache, metric)
        >>> result.axis_names
        {tuple(index_axis_names)!r}
    """
    return sweep


# Each kind's sweep, also under its TransformerLens name (importable from interp.patching).
_SWEEPS = {kind: _sweep(kind) for kind in ACTIVATION_PATCH_KINDS}
get_act_patch_resid_pre = _SWEEPS["resid_pre"]
get_act_patch_resid_mid = _SWEEPS["resid_mid"]
get_act_patch_resid_post = _SWEEPS["resid_post"]
get_act_patch_attn_out = _SWEEPS["attn_out"]
get_act_patch_mlp_out = _SWEEPS["mlp_out"]
get_act_patch_attn_head_out_all_pos = _SWEEPS["attn_head_out_all_pos"]
get_act_patch_attn_head_q_all_pos = _SWEEPS["attn_head_q_all_pos"]
get_act_patch_attn_head_k_all_pos = _SWEEPS["attn_head_k_all_pos"]
get_act_patch_attn_head_v_all_pos = _SWEEPS["attn_head_v_all_pos"]
get_act_patch_attn_head_pattern_all_pos = _SWEEPS["attn_head_pattern_all_pos"]
get_act_patch_attn_head_out_by_pos = _SWEEPS["attn_head_out_by_pos"]
get_act_patch_attn_head_q_by_pos = _SWEEPS["attn_head_q_by_pos"]
get_act_patch_attn_head_k_by_pos = _SWEEPS["attn_head_k_by_pos"]
get_act_patch_attn_head_v_by_pos = _SWEEPS["attn_head_v_by_pos"]
get_act_patch_attn_head_pattern_by_pos = _SWEEPS["attn_head_pattern_by_pos"]
get_act_patch_attn_head_pattern_dest_src_pos = _SWEEPS["attn_head_pattern_dest_src_pos"]

BLOCK_PATCH_TYPES = ("resid_pre", "attn_out", "mlp_out")
HEAD_PATCH_TYPES = ("out", "q", "k", "v", "pattern")


def _stack(results: list[Tensor], names: tuple[str, ...], model: Any, tokens: Tensor):
    first = results[0]
    assert isinstance(first, LabelledTensor)
    stacked = torch.stack([r.as_subclass(Tensor) for r in results])
    return LabelledTensor(stacked, ("patch_type", *first.axis_names), (names, *first.axis_labels))


def per_query_head(result: Tensor, like: LabelledTensor, model: Any) -> LabelledTensor:
    """A key or value result [..., n_key_value_heads] spread to [..., n_heads] (each key/value
    head's value repeated for the query heads that share it, as ``W_K`` expands), labelled
    like ``like``, so it stacks with the per-query-head results."""
    repeats = model.cfg.n_heads // result.shape[-1]
    values = result.as_subclass(Tensor).repeat_interleave(repeats, dim=-1)
    return LabelledTensor(values, like.axis_names, like.axis_labels)


def _head_results(
    positions: str, model: Any, corrupted_tokens: Tensor, clean_cache: Any, metric, options
) -> list[LabelledTensor]:
    """The ``attn_head_<type>_<positions>`` sweeps of every ``HEAD_PATCH_TYPES`` type, in that
    order, with the k and v results spread to query heads (``per_query_head``)."""
    results = [
        _SWEEPS[f"attn_head_{patch_type}_{positions}"](
            model, corrupted_tokens, clean_cache, metric, **options
        )
        for patch_type in HEAD_PATCH_TYPES
    ]
    results[2:4] = [per_query_head(result, results[0], model) for result in results[2:4]]
    return results


def get_act_patch_block_every(
    model: Any, corrupted_tokens: Int[Tensor, "batch pos"], clean_cache: Any, metric, **options
) -> LabelledTensor:
    """``resid_pre``, ``attn_out`` and ``mlp_out`` patching stacked: [3, n_layers, pos].
    ``options`` are the sweeps' (``max_batch_size``, ``metric_positions``, ``progress``,
    ``exact``).

    Example:
        >>> model = interp.load_model("shakespeare-char")   # attn-only-2l has no MLPs
        >>> clean_logits, clean_cache = model.run_with_cache("To be, or not")
        >>> corrupted_tokens = model.to_tokens("To go, or not")
        >>> metric = interp.patching.KLDivergence(clean_logits)   # 0: the clean prediction
        >>> result = get_act_patch_block_every(model, corrupted_tokens, clean_cache, metric)
        >>> result.labels("patch_type")
        ['resid_pre', 'attn_out', 'mlp_out']
        >>> result.shape   # [3, n_layers, pos]
        torch.Size([3, 4, 13])
    """
    results = [
        _SWEEPS[kind](model, corrupted_tokens, clean_cache, metric, **options)
        for kind in BLOCK_PATCH_TYPES
    ]
    return _stack(results, BLOCK_PATCH_TYPES, model, corrupted_tokens)


def get_act_patch_attn_head_all_pos_every(
    model: Any, corrupted_tokens: Int[Tensor, "batch pos"], clean_cache: Any, metric, **options
) -> LabelledTensor:
    """Head output, q, k, v and pattern patching (all positions) stacked: [5, n_layers, n_heads].
    Under grouped-query attention a k or v entry is its key/value head's (``per_query_head``).
    ``options`` are the sweeps' (``max_batch_size``, ``metric_positions``, ``progress``,
    ``exact``).

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> result = get_act_patch_attn_head_all_pos_every(
        ...     model, corrupted_tokens, clean_cache, metric)
        >>> result.shape, result.labels("patch_type")   # [5, n_layers, n_heads]
        (torch.Size([5, 2, 1]), ['out', 'q', 'k', 'v', 'pattern'])
        >>> [round(value, 2) for value in result[:, 1, 0].tolist()]   # L1H0 reads 7's value
        [1.0, 0.0, 0.0, 1.0, 0.0]
    """
    results = _head_results("all_pos", model, corrupted_tokens, clean_cache, metric, options)
    results[4] = LabelledTensor(results[4], results[0].axis_names, results[0].axis_labels)
    return _stack(results, HEAD_PATCH_TYPES, model, corrupted_tokens)


def get_act_patch_attn_head_by_pos_every(
    model: Any, corrupted_tokens: Int[Tensor, "batch pos"], clean_cache: Any, metric, **options
) -> LabelledTensor:
    """Head output, q, k, v and pattern (by destination) patching at each position stacked:
    [5, n_layers, pos, n_heads]. Under grouped-query attention a k or v entry is its
    key/value head's (``per_query_head``). ``options`` are the sweeps' (``max_batch_size``,
    ``metric_positions``, ``progress``, ``exact``).

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> result = get_act_patch_attn_head_by_pos_every(
        ...     model, corrupted_tokens, clean_cache, metric)
        >>> result.shape   # [5, n_layers, pos, n_heads]
        torch.Size([5, 2, 21, 1])
    """
    results = _head_results("by_pos", model, corrupted_tokens, clean_cache, metric, options)
    pattern = einops.rearrange(results[4].as_subclass(Tensor), "layer head pos -> layer pos head")
    results[4] = LabelledTensor(pattern, results[0].axis_names, results[0].axis_labels)
    return _stack(results, HEAD_PATCH_TYPES, model, corrupted_tokens)
