"""Path patching (Wang et al. 2022, "Interpretability in the Wild", appendix B).

The effect of sender heads on the metric through chosen receivers only. Following the paper
and ARENA's IOI notebook, with ``orig`` the run being measured and ``new`` the run the
senders' values come from:

1. Run ``orig`` with the senders' outputs (``hook_z``) taken from ``new`` and every other
   head frozen to its ``orig`` output. MLPs are recomputed (so paths through MLPs count as
   direct), except MLPs that are themselves receivers, which stay frozen too. Record how much
   the residual stream read by each receiver moved: that is the senders' signal there.
2. Run ``orig`` again, adding that signal to each receiver's own input only (a head's
   ``hook_q_input`` / ``k_input`` / ``v_input``, an MLP's ``hook_mlp_in``, or the final
   residual stream read by the unembedding); everything else sees the orig senders.

For receivers in one layer (the paper's use) step 2 is exactly "patch the receivers' inputs
to their step-1 values"; the additive form also composes across layers, so selecting every
downstream receiver (all heads' q/k/v, all MLPs, the final residual) reproduces ordinary
activation patching of the senders. The noising setup of the paper is ``orig`` = clean,
``new`` = corrupted; to compare with ``get_act_patch_*`` (clean values into the corrupted run)
pass ``orig_tokens=corrupted_tokens, new_cache=clean_cache``.

Opt-in hook points the receivers need (split q/k/v inputs, ``hook_mlp_in``) are switched on
for the call and restored afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.patching.checks import check_same_shape
from interp.patching.evaluation import MetricEvaluator
from interp.patching.exact import loop_metric_value, unpatched_metric_value
from interp.patching.results import LabelledTensor, label_result

Head = tuple[int, int]
# "resid_end", (layer, head, "q" | "k" | "v") or (layer, "mlp").
Receiver = str | tuple


def _parse_receivers(model: Any, receivers: Sequence[Receiver]):
    """Receivers grouped: head inputs {(layer, "q"): [heads]}, MLP layers, and the end."""
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    head_inputs: dict[tuple[int, str], list[int]] = {}
    mlp_layers: set[int] = set()
    resid_end = False
    for receiver in receivers:
        if receiver == "resid_end":
            resid_end = True
        elif isinstance(receiver, tuple) and len(receiver) == 2 and receiver[1] == "mlp":
            if model.cfg.attn_only:
                raise ValueError("This model is attention-only: it has no MLP receivers.")
            if not 0 <= receiver[0] < n_layers:
                raise ValueError(f"MLP receiver layer {receiver[0]} is not in [0, {n_layers}).")
            mlp_layers.add(receiver[0])
        elif isinstance(receiver, tuple) and len(receiver) == 3 and receiver[2] in "qkv":
            layer, head, kind = receiver
            if not (0 <= layer < n_layers and 0 <= head < n_heads):
                raise ValueError(f"Receiver head {receiver} is outside {n_layers}x{n_heads}.")
            head_inputs.setdefault((layer, kind), []).append(head)
        else:
            raise ValueError(
                f"Unknown receiver {receiver!r}: use 'resid_end', (layer, head, 'q'|'k'|'v') "
                "or (layer, 'mlp')."
            )
    head_inputs = {key: sorted(set(heads)) for key, heads in head_inputs.items()}
    n_kv_heads = model.cfg.n_key_value_heads or n_heads
    for (layer, kind), heads in head_inputs.items():
        if kind in "kv" and n_kv_heads != n_heads:
            head_inputs[layer, kind] = _key_value_heads(layer, kind, heads, n_heads // n_kv_heads)
    return head_inputs, sorted(mlp_layers), resid_end


def _key_value_heads(layer: int, kind: str, heads: list[int], group: int) -> list[int]:
    """The key/value heads whose ``kind`` input receives, under grouped-query attention: a
    key or value input is shared by ``group`` query heads, so receivers are whole groups."""
    kv_heads = sorted({head // group for head in heads})
    for kv_head in kv_heads:
        shared = list(range(kv_head * group, (kv_head + 1) * group))
        if not set(shared) <= set(heads):
            raise ValueError(
                f"Receiver ({layer}, {heads[0] if len(heads) == 1 else heads}, {kind!r}): with "
                f"grouped-query attention, query heads {shared} of layer {layer} share one "
                f"{'key' if kind == 'k' else 'value'} input, so it reaches all of them; pass the "
                f"whole group as receivers ({[(layer, h, kind) for h in shared]})."
            )
    return kv_heads


def _mlp_input_name(model: Any, layer: int) -> str:
    """The residual stream an MLP reads: ``hook_resid_mid``, or ``hook_resid_pre`` in a
    parallel block (attention and MLP both read it)."""
    return f"blocks.{layer}.hook_resid_{'pre' if model.cfg.parallel_attn_mlp else 'mid'}"


@contextmanager
def _receiver_hook_points(model: Any, split_qkv: bool, mlp_in: bool) -> Iterator[None]:
    """Switch on the opt-in hook points the receivers need, restoring the config after."""
    saved_split, saved_mlp_in = model.cfg.use_split_qkv_input, model.cfg.use_hook_mlp_in
    try:
        if split_qkv and not saved_split:
            model.set_use_split_qkv_input(True)
        if mlp_in and not saved_mlp_in:
            model.set_use_hook_mlp_in(True)
        yield
    finally:
        if model.cfg.use_split_qkv_input != saved_split:
            model.set_use_split_qkv_input(saved_split)
        if model.cfg.use_hook_mlp_in != saved_mlp_in:
            model.set_use_hook_mlp_in(saved_mlp_in)


def path_patch_runs(
    model: Any,
    orig_tokens: Int[Tensor, "prompt pos"],
    new_cache: Any,
    patching_metric: Callable[[Tensor], Tensor],
    sender_sets: Sequence[Sequence[Head]],
    receivers: Sequence[Receiver],
    *,
    metric_positions: int | Sequence[int] | None = None,
    max_batch_size: int = 64,
    progress: bool = True,
    exact: bool = False,
    orig_cache: Any = None,
) -> Tensor:
    """The metric for each set of senders patched together through ``receivers``: [n_sets].
    Many sender sets run as one batch (two forward passes per batch; one when the only
    receiver is ``"resid_end"``: step 1's final residual is then the answer).

    The orig run's activations (every ``hook_z``, what the receivers read, receiver MLPs'
    outputs) come from ``orig_cache`` when given (e.g. ``model.run_with_cache(orig_tokens)``,
    as ARENA's functions take it), else from one run of ``orig_tokens`` here.

    A set none of whose senders can change what a receiver reads (its new outputs equal its
    orig ones, or no receiver reads its layer) scores the unpatched metric, from a plain
    forward of ``orig_tokens``. Batches of sender sets round differently from one set at a
    time. With ``exact=True`` each set runs alone, each step one forward pass of
    ``orig_tokens`` as given with its hooks, and the metric gets the full logits: the results
    equal such a hand-written loop (``run_with_hooks`` per step, the same ``orig_cache``) bit
    for bit.

    Args:
        orig_tokens: the prompts of the run being measured [prompt, pos].
        new_cache: the cache of the run the senders' outputs come from (same shape).
        sender_sets: one list of ``(layer, head)`` senders per result, patched together.
        receivers: what the senders' signal is allowed to reach: ``"resid_end"`` (the final
            residual stream), ``(layer, head, "q" | "k" | "v")`` (one input of a head) or
            ``(layer, "mlp")`` (an MLP's input).
        metric_positions: for a plain metric, the positions whose logits it reads.
        max_batch_size: sequences per forward pass.

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> corrupted_logits, corrupted_cache = model.run_with_cache(corrupted_tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), model(tokens), corrupted_logits, position=-2)
        >>> values = path_patch_runs(model, tokens, corrupted_cache, metric,
        ...                          [[(0, 0)], [(1, 0)]], receivers=["resid_end"])
        >>> [round(value, 2) for value in values.tolist()]   # L1H0 writes the answer directly
        [1.0, 0.0]
    """
    tokens = model.check_tokens(orig_tokens)
    n_prompts = tokens.shape[0]
    _check_sender_sets(model, sender_sets)
    routes = _routes(model, receivers)
    missing = [name for name in routes.z_names if name not in new_cache]
    if missing:
        raise KeyError(f"new_cache lacks {missing[:3]}...; cache every hook_z of the new run.")
    orig = _orig_activations(model, tokens, routes.orig_names(), orig_cache)
    for name in routes.z_names:
        check_same_shape(name, new_cache[name], orig[name], "new", "orig")
    evaluator = None
    if not exact:
        evaluator = MetricEvaluator(
            model, patching_metric, metric_positions, orig[routes.final_name]
        )
    results = torch.empty(len(sender_sets), device=model.device)
    live = list(range(len(sender_sets)))
    if not exact:  # sets that cannot change what a receiver reads score the orig run
        live = _live_sets(model, sender_sets, new_cache, orig, routes)
        if len(live) < len(sender_sets):
            unchanged = sorted(set(range(len(sender_sets))) - set(live))
            results[unchanged] = unpatched_metric_value(
                model, tokens, patching_metric, metric_positions
            )
    runs_per_batch = 1 if exact else max(1, max_batch_size // n_prompts)
    bar = tqdm(total=len(sender_sets), desc="path patching", disable=not progress)
    bar.update(len(sender_sets) - len(live))
    receiver_hooks = _receiver_hook_points(model, bool(routes.head_inputs), bool(routes.mlp_layers))
    with torch.no_grad(), receiver_hooks:
        for first in range(0, len(live), runs_per_batch):
            numbers = live[first : first + runs_per_batch]
            batch = [sender_sets[i] for i in numbers]
            output = _patched_output(model, tokens, batch, new_cache, orig, routes, exact)
            if exact:
                results[numbers] = loop_metric_value(patching_metric, output, metric_positions)
            else:
                results[numbers] = evaluator.evaluate(evaluator.read(output))
            bar.update(len(batch))
    bar.close()
    return results


def _check_sender_sets(model: Any, sender_sets: Sequence[Sequence[Head]]) -> None:
    """Raise if a sender head is outside the model's layers x heads."""
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    for senders in sender_sets:
        for layer, head in senders:
            if not (0 <= layer < n_layers and 0 <= head < n_heads):
                raise ValueError(f"Sender head ({layer}, {head}) is outside {n_layers}x{n_heads}.")


@dataclass(frozen=True)
class _Routes:
    """Where path patching reads and writes, from the receivers: the head inputs
    {(layer, "q"): [heads]}, MLP layers and end of the residual stream that receive, and the
    hooks of every head's output (``z_names``), of what each receiver reads in step 1
    (``read_names``, hook -> layer), of the receiver MLPs' outputs and of the final residual."""

    head_inputs: dict[tuple[int, str], list[int]]
    mlp_layers: list[int]
    resid_end: bool
    z_names: list[str]
    read_names: dict[str, int]
    mlp_out_names: list[str]
    final_name: str

    @property
    def only_resid_end(self) -> bool:
        """Whether the end of the residual stream is the only receiver (one step then)."""
        return self.resid_end and not self.head_inputs and not self.mlp_layers

    def orig_names(self) -> list[str]:
        """The orig run's activations path patching uses."""
        return sorted({*self.z_names, *self.read_names, *self.mlp_out_names, self.final_name})


def _routes(model: Any, receivers: Sequence[Receiver]) -> _Routes:
    """The ``_Routes`` of ``receivers`` in ``model``."""
    head_inputs, mlp_layers, resid_end = _parse_receivers(model, receivers)
    n_layers = model.cfg.n_layers
    z_names = [f"blocks.{layer}.attn.hook_z" for layer in range(n_layers)]
    # What each receiver reads, by the hook that holds it in step 1.
    read_names = {f"blocks.{layer}.hook_resid_pre": layer for layer, _ in head_inputs}
    read_names |= {_mlp_input_name(model, layer): layer for layer in mlp_layers}
    final_name = f"blocks.{n_layers - 1}.hook_resid_post"
    if resid_end and (head_inputs or mlp_layers):
        read_names[final_name] = n_layers - 1
    mlp_out_names = [f"blocks.{layer}.hook_mlp_out" for layer in mlp_layers]
    return _Routes(
        head_inputs, mlp_layers, resid_end, z_names, read_names, mlp_out_names, final_name
    )


def _live_sets(
    model: Any,
    sender_sets: Sequence[Sequence[Head]],
    new_cache: Any,
    orig: dict[str, Tensor],
    routes: _Routes,
) -> list[int]:
    """The sender sets (by index) of which some sender can change what a receiver reads."""
    parallel = model.cfg.parallel_attn_mlp
    return [
        i
        for i, senders in enumerate(sender_sets)
        if any(
            _sender_reaches(
                sender,
                new_cache,
                orig,
                routes.head_inputs,
                routes.mlp_layers,
                routes.resid_end,
                parallel,
            )
            for sender in senders
        )
    ]


def _patched_output(
    model: Any,
    tokens: Int[Tensor, "prompt pos"],
    batch: list[Sequence[Head]],
    new_cache: Any,
    orig: dict[str, Tensor],
    routes: _Routes,
    exact: bool,
) -> Tensor:
    """The final output of the two steps for a batch of sender sets, one run of the prompts
    each (rows run-major)."""
    n_prompts, n_runs = tokens.shape[0], len(batch)
    repeated = tokens if n_runs == 1 else tokens.repeat(n_runs, 1)

    def tiled(name: str) -> Tensor:
        return orig[name].repeat(n_runs, *([1] * (orig[name].ndim - 1)))

    # Step 1: senders new, other heads (and receiver MLPs) frozen; record the signal.
    step1_hooks = _frozen_head_hooks(batch, routes.z_names, new_cache, tiled, n_prompts)
    step1_hooks += [
        (name, lambda act, hook, name=name: tiled(name)) for name in routes.mlp_out_names
    ]
    signal: dict[str, Tensor] = {}

    def record(act: Tensor, hook: Any) -> None:
        signal[hook.name] = act - tiled(hook.name)

    step1_hooks += [(name, record) for name in routes.read_names]
    with model.hooks(fwd_hooks=step1_hooks):
        output = _final_output(model, repeated, exact and routes.only_resid_end)
    if not routes.only_resid_end:
        # Step 2: the orig run, with the signal added to each receiver's own input.
        step2_hooks = _receiver_hooks(
            model,
            signal,
            routes.head_inputs,
            routes.mlp_layers,
            routes.resid_end,
            routes.final_name,
        )
        with model.hooks(fwd_hooks=step2_hooks):
            output = _final_output(model, repeated, exact)
    return output


def _sender_reaches(
    sender: Head,
    new_cache: Any,
    orig: dict[str, Tensor],
    head_inputs: dict[tuple[int, str], list[int]],
    mlp_layers: list[int],
    resid_end: bool,
    parallel: bool,
) -> bool:
    """Whether patching ``sender`` can change what some receiver reads: its new output
    differs from its orig one (bit for bit), and a receiver reads it (a head input in a
    later layer, an MLP in its layer or after, unless parallel, or the final residual)."""
    layer, head = sender
    name = f"blocks.{layer}.attn.hook_z"
    if torch.equal(new_cache[name][:, :, head].to(orig[name]), orig[name][:, :, head]):
        return False
    return (
        resid_end
        or any(receiver_layer > layer for receiver_layer, _ in head_inputs)
        or any(mlp > layer or (mlp == layer and not parallel) for mlp in mlp_layers)
    )


def _orig_activations(
    model: Any, tokens: Int[Tensor, "prompt pos"], names: list[str], orig_cache: Any
) -> dict[str, Tensor]:
    """The orig run's ``names``: from ``orig_cache`` when given, else from one run here."""
    if orig_cache is not None:
        missing = [name for name in names if name not in orig_cache]
        if missing:
            raise KeyError(
                f"orig_cache lacks {missing[:3]}; cache the orig run without a names_filter "
                "(model.run_with_cache(orig_tokens)) or leave orig_cache out."
            )
        return {name: orig_cache[name] for name in names}
    with torch.no_grad():
        _, orig = model.run_with_cache(
            tokens, names_filter=names, return_type=None, return_cache_object=False
        )
    return orig


def _final_output(model: Any, tokens: Int[Tensor, "rows pos"], full_logits: bool) -> Tensor:
    """The run's full logits, or (for the batched evaluator) its final residual stream."""
    if full_logits:
        return model(tokens)
    return model(tokens, stop_at_layer=model.cfg.n_layers)


def _frozen_head_hooks(
    batch: Sequence[Sequence[Head]],
    z_names: list[str],
    new_cache: Any,
    tiled: Callable[[str], Tensor],
    n_prompts: int,
) -> list[tuple[str, Callable]]:
    """Step 1's ``hook_z`` hooks: every head's orig output, but each run's senders' from
    ``new_cache`` (rows ``run * n_prompts`` on are run ``run``'s)."""
    hooks = []
    for layer, name in enumerate(z_names):
        z = tiled(name)
        for run, senders in enumerate(batch):
            rows = slice(run * n_prompts, (run + 1) * n_prompts)
            for sender_layer, head in senders:
                if sender_layer == layer:
                    z[rows, :, head] = new_cache[name][:, :, head].to(z)
        hooks.append((name, lambda act, hook, z=z: z))
    return hooks


def _receiver_hooks(
    model: Any,
    signal: dict[str, Tensor],
    head_inputs: dict[tuple[int, str], list[int]],
    mlp_layers: list[int],
    resid_end: bool,
    final_name: str,
) -> list[tuple[str, Callable]]:
    """Step 2's hooks: each receiver's input plus the senders' signal from step 1."""
    hooks = []
    for (layer, kind), heads in head_inputs.items():
        delta = signal[f"blocks.{layer}.hook_resid_pre"]

        def add_to_heads(act: Tensor, hook: Any, delta=delta, heads=heads) -> Tensor:
            act[:, :, heads] += delta[:, :, None]
            return act

        hooks.append((f"blocks.{layer}.hook_{kind}_input", add_to_heads))
    for layer in mlp_layers:
        delta = signal[_mlp_input_name(model, layer)]
        hooks.append((f"blocks.{layer}.hook_mlp_in", lambda act, hook, delta=delta: act + delta))
    if resid_end:
        delta = signal[final_name]
        hooks.append((final_name, lambda act, hook, delta=delta: act + delta))
    return hooks


def path_patch(
    model: Any,
    orig_tokens: Int[Tensor, "prompt pos"],
    new_cache: Any,
    patching_metric: Callable[[Tensor], Tensor],
    senders: Sequence[Head],
    receivers: Sequence[Receiver],
    **options: Any,
) -> Tensor:
    """The metric with ``senders`` (patched together from ``new_cache``) acting on the orig
    run only through ``receivers``; a scalar.

    Receivers: ``"resid_end"`` (the final residual stream), ``(layer, head, "q"|"k"|"v")``
    (one head's query, key or value input; under grouped-query attention a key or value
    input is shared by a group of heads, given whole), ``(layer, "mlp")`` (an MLP's input).
    ``options`` are ``path_patch_runs``'s (``metric_positions``, ``max_batch_size``,
    ``progress``, ``exact``, ``orig_cache``).

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> corrupted_logits, corrupted_cache = model.run_with_cache(corrupted_tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), model(tokens), corrupted_logits, position=-2)
        >>> value = path_patch(model, tokens, corrupted_cache, metric, senders=[(1, 0)],
        ...                    receivers=["resid_end"])
        >>> round(value.item(), 2)   # the corrupted answer, through L1H0's direct path alone
        0.0
    """
    return path_patch_runs(
        model, orig_tokens, new_cache, patching_metric, [list(senders)], receivers, **options
    )[0]


def _every_head(model: Any) -> list[list[Head]]:
    return [
        [(layer, head)] for layer in range(model.cfg.n_layers) for head in range(model.cfg.n_heads)
    ]


def get_path_patch_head_to_final_resid_post(
    model: Any,
    orig_tokens: Int[Tensor, "prompt pos"],
    new_cache: Any,
    patching_metric: Callable[[Tensor], Tensor],
    **options: Any,
) -> LabelledTensor:
    """Each head as the sender, the final residual stream as the receiver (its direct effect,
    MLPs recomputed): a ``LabelledTensor`` [n_layers, n_heads] (ARENA's function).
    ``options`` are ``path_patch_runs``'s (``exact=True``: bit for bit ARENA's loop).

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> corrupted_logits, corrupted_cache = model.run_with_cache(corrupted_tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), model(tokens), corrupted_logits, position=-2)
        >>> result = get_path_patch_head_to_final_resid_post(model, tokens, corrupted_cache, metric)
        >>> result.axis_names, result.shape   # [n_layers, n_heads]
        (('layer', 'head'), torch.Size([2, 1]))
    """
    values = path_patch_runs(
        model, orig_tokens, new_cache, patching_metric, _every_head(model), ["resid_end"], **options
    )
    shape = (model.cfg.n_layers, model.cfg.n_heads)
    return label_result(values.view(shape), ("layer", "head"), model, orig_tokens)


def get_path_patch_head_to_heads(
    model: Any,
    orig_tokens: Int[Tensor, "prompt pos"],
    new_cache: Any,
    patching_metric: Callable[[Tensor], Tensor],
    receiver_heads: Sequence[Head],
    receiver_input: str | Sequence[str] = "q",
    **options: Any,
) -> LabelledTensor:
    """Each head as the sender, the ``receiver_input`` ("q", "k", "v" or several) of
    ``receiver_heads`` as the receivers: a ``LabelledTensor`` [n_layers, n_heads]. Senders in or
    after the receivers' layer cannot reach them and score the orig run's value.
    ``options`` are ``path_patch_runs``'s (``exact=True``: bit for bit a loop of two
    ``run_with_hooks`` per head).

    Example:
        >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
        >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
        >>> corrupted_logits, corrupted_cache = model.run_with_cache(corrupted_tokens)
        >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
        ...     torch.tensor([211, 7]), model(tokens), corrupted_logits, position=-2)
        >>> result = get_path_patch_head_to_heads(model, tokens, corrupted_cache, metric,
        ...     receiver_heads=[(1, 0)], receiver_input="v")   # senders into L1H0's values
        >>> result.shape   # [n_layers, n_heads]: every sender head
        torch.Size([2, 1])
    """
    kinds = [receiver_input] if isinstance(receiver_input, str) else list(receiver_input)
    receivers = [(layer, head, kind) for layer, head in receiver_heads for kind in kinds]
    values = path_patch_runs(
        model, orig_tokens, new_cache, patching_metric, _every_head(model), receivers, **options
    )
    shape = (model.cfg.n_layers, model.cfg.n_heads)
    return label_result(values.view(shape), ("layer", "head"), model, orig_tokens)
