"""Forward hooks named after the transcoders' input and output, as circuit-tracer's scripts
write them (``blocks.{layer}.mlp.hook_in``, ``blocks.{layer}.mlp.hook_out``, or the set's own
``feature_input_hook`` / ``feature_output_hook``), and circuit-tracer's hook-level helpers
built on them: the activation-caching hooks and the freeze hooks of an intervention.

interp's model has no hook point at an MLP module's input or output, and a LayerNorm model's
``ln2.hook_normalized`` is after the weight and bias where circuit-tracer's transcoders read
it before them; ``ReplacementModel.transcoder_io`` reads those places, so a hook under such a
name runs there, in the order the hooks were given.

Example:
    >>> from interp.circuits import ReplacementModel
    >>> replacement = ReplacementModel.from_pretrained(
    ...     "shakespeare-char", "shakespeare-char-transcoders")
    >>> tokens = replacement.ensure_tokenized("ROMEO:")
    >>> acts, hooks = caching_hooks(replacement)
    >>> _ = run_with_transcoder_hooks(replacement, tokens, hooks)
    >>> torch.stack(acts).shape   # [n_layers, pos, d_transcoder]
    torch.Size([4, 6, 1024])
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

if TYPE_CHECKING:
    from interp.circuits.replacement_model import ReplacementModel

HookList = Sequence[tuple[str, Callable]]
_BLOCK = re.compile(r"^blocks\.(\d+)\.(.+)$")


class TranscoderHook:
    """What a hook function receives as ``hook`` at a transcoder's input or output: its
    ``name`` and ``layer()``, as a hook point's."""

    def __init__(self, name: str, layer: int) -> None:
        self.name = name
        self._layer = layer

    def layer(self) -> int:
        return self._layer


def _virtual_names(model: ReplacementModel) -> tuple[set[str], set[str]]:
    """The block-relative names read at the transcoders' input and output by
    ``transcoder_io`` rather than by a hook point."""
    inputs, outputs = set(), set()
    if model.feature_input_hook == "mlp.hook_in" or model.reads_before_ln2_affine:
        inputs.add(model.feature_input_hook)
    if model.feature_output_hook == "mlp.hook_out":
        outputs |= {"mlp.hook_out", "mlp.hook_out.hook_out_grad"}  # circuit-tracer's both
    return inputs, outputs


def run_with_transcoder_hooks(
    model: ReplacementModel,
    inputs: Any,
    fwd_hooks: HookList = (),
    bwd_hooks: HookList = (),
    **forward_kwargs: Any,
) -> Any:
    """``model.model(inputs)`` with ``fwd_hooks`` (and ``bwd_hooks``) attached, where a name
    of the transcoders' input or output runs at that place (see the module docstring)."""
    virtual_in, virtual_out = _virtual_names(model)
    ordinary: list[tuple[str, Callable]] = []
    at_inputs: dict[int, list[tuple[str, Callable]]] = defaultdict(list)
    at_outputs: dict[int, list[tuple[str, Callable]]] = defaultdict(list)
    for name, fn in fwd_hooks:
        match = _BLOCK.match(name) if isinstance(name, str) else None
        if match and match.group(2) in virtual_in:
            at_inputs[int(match.group(1))].append((name, fn))
        elif match and match.group(2) in virtual_out:
            at_outputs[int(match.group(1))].append((name, fn))
        else:
            ordinary.append((name, fn))
    if not at_inputs and not at_outputs:
        return model.model.run_with_hooks(
            inputs, fwd_hooks=ordinary, bwd_hooks=list(bwd_hooks), **forward_kwargs
        )

    def at_input(layer: int, x: Tensor) -> None:
        for name, fn in at_inputs.get(layer, ()):
            if fn(x, hook=TranscoderHook(name, layer)) is not None:
                raise ValueError(
                    f"A hook at {name!r} returned a value: the transcoders' input is read "
                    "there, not replaced; edit the residual stream before it instead."
                )

    def at_output(layer: int, out: Tensor) -> Tensor:
        for name, fn in at_outputs.get(layer, ()):
            new = fn(out, hook=TranscoderHook(name, layer))
            out = out if new is None else new
        return out

    with (
        model.transcoder_io(at_input, at_output, ordinary),
        model.model.hooks(bwd_hooks=list(bwd_hooks)),
    ):
        return model.model(inputs, **forward_kwargs)


def caching_hooks(
    model: ReplacementModel,
    sparse: bool = False,
    apply_activation_function: bool = True,
    append: bool = False,
) -> tuple[list, list[tuple[str, Callable]]]:
    """circuit-tracer's ``_get_activation_caching_hooks``: (a list the hooks fill with each
    layer's activations [pos, d_transcoder] of a batch-1 forward, first positions zeroed;
    with ``append`` a list a layer, one entry a forward; the hooks, at the transcoders'
    input)."""
    n_layers = model.cfg.n_layers
    cache: list = [[] for _ in range(n_layers)] if append else [None] * n_layers

    def record(layer: int) -> Callable:
        def fn(acts: Tensor, hook: Any) -> None:
            encoded = model.transcoders.encode_layer(
                acts, layer, apply_activation_function=apply_activation_function
            )
            encoded = encoded.detach().squeeze(0)
            if not append:
                encoded[model.zero_positions] = 0
            if sparse:
                encoded = encoded.to_sparse()
            if append:
                cache[layer].append(encoded)
            else:
                cache[layer] = encoded

        return fn

    hooks = [
        (f"blocks.{layer}.{model.feature_input_hook}", record(layer)) for layer in range(n_layers)
    ]
    return cache, hooks


def freeze_hooks(
    model: ReplacementModel, inputs: Any, constrained_layers: Sequence[int] | None = None
) -> tuple[Tensor, list[tuple[str, Callable]]]:
    """circuit-tracer's ``setup_intervention_with_freeze``: one forward of ``inputs``
    records what an intervention freezes, and returns (its transcoder activations
    [n_layers, pos, d_transcoder], the hooks that freeze it): every attention pattern; with
    ``constrained_layers``, the MLP outputs of those layers (their skip path still carrying
    direct effects) and, when they cover every layer, every norm's scale."""
    n_layers = model.cfg.n_layers
    names = [name for name in model.model.hook_dict if name.endswith("hook_pattern")]
    constrained = list(constrained_layers) if constrained_layers else []
    if constrained:
        if set(range(n_layers)) <= set(constrained):
            names += [name for name in model.model.hook_dict if name.endswith("hook_scale")]
        names += [f"blocks.{layer}.{model.feature_output_hook}" for layer in constrained]
    skip_layers = constrained if model.skip_transcoder else []
    input_names = {layer: f"blocks.{layer}.{model.feature_input_hook}" for layer in skip_layers}
    frozen: dict[str, Tensor] = {}

    def keep(acts: Tensor, hook: Any) -> None:
        frozen[hook.name] = acts.detach().clone()

    activations, activation_hooks = caching_hooks(model)
    reading = [(name, keep) for name in [*names, *input_names.values()]]
    with torch.no_grad():
        run_with_transcoder_hooks(model, inputs, [*reading, *activation_hooks])

    def freeze(acts: Tensor, hook: Any) -> Tensor:
        cached = frozen[hook.name]
        if acts.shape != cached.shape:
            raise ValueError(
                f"{hook.name}: the intervened run's activation has shape {tuple(acts.shape)}, "
                f"the frozen one {tuple(cached.shape)}; intervene on the same inputs."
            )
        return cached

    hooks: list[tuple[str, Callable]] = [(name, freeze) for name in names]
    skip_diffs: dict[int, Tensor] = {}

    def skip_diff(layer: int) -> Callable:
        def fn(acts: Tensor, hook: Any) -> None:  # the skip's direct effect on this run
            frozen_skip = model.transcoders.compute_skip(layer, frozen[input_names[layer]])
            skip_diffs[layer] = model.transcoders.compute_skip(layer, acts) - frozen_skip

        return fn

    def add_skip_diff(layer: int) -> Callable:
        return lambda acts, hook: acts + skip_diffs[layer]

    for layer in skip_layers:
        hooks.append((input_names[layer], skip_diff(layer)))
        hooks.append((f"blocks.{layer}.{model.feature_output_hook}", add_skip_diff(layer)))
    return torch.stack(activations), hooks
