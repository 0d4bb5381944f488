"""Feature interventions: run the model with transcoder features set to chosen values
(circuit-tracer 0.5.0's ``feature_intervention`` and ``feature_intervention_generate``).

An intervention ``(layer, pos, feature, value)`` (``pos`` an int, a slice or positions;
``feature`` an int or features) sets the feature's activation to ``value``: at layer
``layer``'s transcoder output hook, ``(value - activation) * decoder vector`` is added to
the MLP's real output (a cross-layer transcoder's feature adds its decoder vector into
every layer it writes to). The MLPs themselves still run, so an intervention's effect flows
through the later layers' MLPs, norms and attention.

- ``freeze_attention=True`` (the default): every attention pattern keeps its value on the
  unchanged prompt (a clean forward first records them). Norm scales and MLPs are not
  frozen.
- ``constrained_layers`` (layers): direct effects only in those layers: their MLP outputs
  keep their clean values (plus the change of the skip connection, for skip transcoders),
  the deltas are computed from the clean activations, and features write only into those
  layers; when they are every layer, every norm scale is frozen too. Attention is frozen.
- The activation a delta is taken from is the one on the current (intervened) forward,
  with the ignored positions (position 0) at zero, as ``attribute`` sees them.

Returned activations: ``[n_layers, pos, d_transcoder]`` transcoder activations on the
intervened forward (pre-activations with ``apply_activation_function=False``; sparse with
``sparse=True``), position 0 zeroed.

``feature_intervention_generate`` passes its keyword arguments to ``model.generate`` (with
its key/value cache): the first forward (the prompt) runs as ``feature_intervention``
(frozen attention, constraints); each later forward runs one new token, where only the
open-ended interventions (``pos`` a slice with no stop, e.g. ``slice(1, None)``) act, at
that token, unfrozen. It returns the generation, the logits each step sampled from
``[max_new_tokens, d_vocab]`` and the activations of the prompt and of every token fed
back ``[n_layers, pos + max_new_tokens - 1, d_transcoder]``.

Example:
    >>> from interp.circuits import ReplacementModel, attribute
    >>> tcs = "shakespeare-char-transcoders"
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
    >>> logits, acts = replacement.feature_intervention("ROMEO:", [(1, 4, 123, 0.0)])
    >>> logits.shape, acts.shape   # [1, pos, d_vocab], [n_layers, pos, d_transcoder]
    (torch.Size([1, 6, 65]), torch.Size([4, 6, 1024]))
    >>> text, step_logits, acts = replacement.feature_intervention_generate(
    ...     "ROMEO:", [(1, slice(1, None), 123, 5.0)], max_new_tokens=5, do_sample=False)
    >>> step_logits.shape   # [steps, d_vocab]
    torch.Size([5, 65])
"""

from __future__ import annotations

import contextlib
import numbers
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.circuits.cross_layer import CrossLayerTranscoder

if TYPE_CHECKING:
    from interp.circuits.replacement_model import ReplacementModel

Intervention = tuple[int, int | slice | Tensor, int | Tensor, float | Tensor]
Item = tuple[Any, Any, Any]  # (pos, feature, value) of one layer


# ------------------------------------------------------------------ transcoder maths
def pre_activations(model: ReplacementModel, layer: int, x: Tensor) -> Tensor:
    """Layer ``layer``'s feature pre-activations of the transcoder input ``x``."""
    tcs = model.transcoders
    if isinstance(tcs, CrossLayerTranscoder):
        return x.to(tcs.W_enc.dtype) @ tcs.W_enc[layer].T + tcs.b_enc[layer]
    sae = tcs[layer]
    pre = sae.process_sae_in(x, hooked=False) @ sae.W_enc + sae.b_enc
    if sae.cfg.activation == "topk" and sae.cfg.rescale_acts_by_decoder_norm:
        pre = pre * sae.W_dec.norm(dim=-1)
    return pre


def activate(model: ReplacementModel, layer: int, pre: Tensor) -> Tensor:
    """The activation function of layer ``layer``'s transcoder (as its ``encode``)."""
    tcs = model.transcoders
    if isinstance(tcs, CrossLayerTranscoder):
        return torch.relu(pre) if tcs.threshold is None else pre * (pre > tcs.threshold[layer])
    sae = tcs[layer]
    if sae.cfg.activation == "relu":
        return torch.relu(pre)
    if sae.cfg.activation == "jumprelu":
        return torch.relu(pre) * (pre > sae.threshold).to(pre.dtype)
    values, indices = torch.topk(pre, k=sae.cfg.k, dim=-1, sorted=False)
    return torch.zeros_like(pre).scatter_(-1, indices, values.relu())


# ------------------------------------------------------------------------- checks
def _index(value: Any) -> int | None:
    """``value`` as an int if it is one (an int or a 0-d integer tensor), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, Tensor) and value.ndim == 0 and not value.is_floating_point():
        return int(value)
    return None


def _check_indices(
    intervention: Any, name: str, value: Any, size: int, allow_negative: bool
) -> None:
    """``value`` (an int, or a 1-D integer tensor or list of them) within ``[0, size)``, or
    ``[-size, size)`` with ``allow_negative``; else an error naming ``intervention``."""
    values = value.tolist() if isinstance(value, Tensor) else value
    values = values if isinstance(values, list) else [values]
    for item in values:
        index = _index(item)
        if index is None:
            raise TypeError(
                f"Intervention {intervention!r}: {name} {value!r} must be an int, an integer "
                "tensor or a list of ints."
            )
        if not (-size if allow_negative else 0) <= index < size:
            where = "of the prompt's" if name == "position" else "of the transcoders'"
            raise ValueError(
                f"Intervention {intervention!r}: {name} {index} is out of range: there are "
                f"{size} {name}s {where} (0 to {size - 1})."
            )


def check_interventions(
    model: ReplacementModel, interventions: Sequence[Intervention], n_pos: int
) -> dict[int, list[Item]]:
    """The interventions grouped by layer, each checked: layer, position (within the
    ``n_pos`` prompt positions) and feature in range, value a number or tensor."""
    n_layers, d_transcoder = model.cfg.n_layers, model.transcoders.d_transcoder
    if isinstance(interventions, (str, bytes)) or not isinstance(interventions, Sequence):
        raise TypeError(
            "interventions must be a list of (layer, pos, feature, value) tuples; got "
            f"{type(interventions).__name__}."
        )
    by_layer: dict[int, list[Item]] = defaultdict(list)
    for intervention in interventions:
        if not isinstance(intervention, (tuple, list)) or len(intervention) != 4:
            raise ValueError(
                f"Intervention {intervention!r}: expected a (layer, pos, feature, value) tuple."
            )
        layer, pos, feature, value = intervention
        index = _index(layer)
        if index is None or not 0 <= index < n_layers:
            raise ValueError(
                f"Intervention {intervention!r}: layer {layer!r} is not a layer of the model "
                f"(0 to {n_layers - 1})."
            )
        if not isinstance(pos, slice):
            _check_indices(tuple(intervention), "position", pos, n_pos, allow_negative=True)
        _check_indices(tuple(intervention), "feature", feature, d_transcoder, False)
        if isinstance(value, bool) or not isinstance(value, (numbers.Real, Tensor)):
            raise TypeError(f"Intervention {intervention!r}: value {value!r} must be a number.")
        if not torch.isfinite(torch.as_tensor(value)).all():
            raise ValueError(f"Intervention {intervention!r}: value {value!r} is not finite.")
        by_layer[index].append((pos, feature, value))
    return dict(by_layer)


def _check_layers(model: ReplacementModel, layers: Any) -> list[int] | None:
    if layers is None:
        return None
    n_layers = model.cfg.n_layers
    checked = [_index(layer) for layer in layers]
    if any(layer is None or not 0 <= layer < n_layers for layer in checked):
        raise ValueError(
            f"constrained_layers={layers!r}: each must be a layer of the model (0 to "
            f"{n_layers - 1})."
        )
    return checked or None  # an empty range constrains nothing, as in circuit-tracer


def _tokens(model: ReplacementModel, inputs: Any, prepend_bos: bool | None = None) -> Tensor:
    """``inputs`` (text, or ids [pos] / [1, pos]) as ids [1, pos]."""
    if isinstance(inputs, str):
        tokens = model.model.to_tokens(inputs, prepend_bos=prepend_bos)
    else:
        tokens = model.model.check_tokens(inputs)
    if tokens.shape[0] != 1:
        raise ValueError(
            f"Interventions run one prompt; got a batch of {tokens.shape[0]} "
            f"(tokens of shape {tuple(tokens.shape)})."
        )
    return tokens


def open_ended(interventions: Sequence[Intervention]) -> list[Intervention]:
    """The interventions whose position is an open slice (``slice(k, None)``), at position 0:
    those that act on each generated token."""
    return [
        (layer, 0, feature, value)
        for layer, pos, feature, value in interventions
        if isinstance(pos, slice) and pos.stop is None
    ]


# ----------------------------------------------------------------------- the hooks
class _Clean:
    """What the unchanged prompt's forward recorded for freezing: hook values by name,
    transcoder inputs and outputs by layer, and its activations [n_layers, pos, d_tc]."""

    def __init__(self) -> None:
        self.values: dict[str, Tensor] = {}
        self.inputs: dict[int, Tensor] = {}
        self.outputs: dict[int, Tensor] = {}
        self.activations: Tensor | None = None


class InterventionRun:
    """The hooks of one intervened forward, or of one generation (forward 0 is the prompt,
    each later forward one new token); ``installed()`` attaches them for its block."""

    def __init__(
        self,
        model: ReplacementModel,
        tokens: Int[Tensor, "1 pos"],
        interventions: Sequence[Intervention],
        constrained_layers: Sequence[int] | None,
        freeze_attention: bool,
        apply_activation_function: bool,
        sparse: bool,
        return_activations: bool,
        generating: bool = False,
    ) -> None:
        self.model = model
        n_pos, n_layers = tokens.shape[1], model.cfg.n_layers
        self.prompt_interventions = check_interventions(model, interventions, n_pos)
        self.later_interventions = check_interventions(model, open_ended(interventions), 1)
        self.constrained = _check_layers(model, constrained_layers)
        self.apply_activation_function = apply_activation_function
        self.sparse = sparse
        self.return_activations = return_activations
        self.generating = generating
        self.freezes = bool((freeze_attention or self.constrained) and self.prompt_interventions)
        self.clean = self._clean_run(tokens) if self.freezes else None
        self.forward = -1  # the forward running: 0 is the prompt's
        self.activations: list[list[Tensor]] = [[] for _ in range(n_layers)]
        self.logits: list[Tensor] = []
        self._inputs: dict[int, Tensor] = {}
        self._current: dict[int, Tensor] = {}
        self._pending: dict[int, Tensor] = {}

    # ---------------------------------------------------------------- hook points
    def _frozen_names(self) -> list[str]:
        names = [name for name in self.model.hook_dict if name.endswith("attn.hook_pattern")]
        if self.constrained and set(range(self.model.cfg.n_layers)) <= set(self.constrained):
            names += [name for name in self.model.hook_dict if name.endswith("hook_scale")]
        return names

    def _encode(self, layer: int, x: Tensor, apply_activation_function: bool = True) -> Tensor:
        x = x.detach()[0]  # [pos, d_model]
        if apply_activation_function:
            return self.model.transcoders.encode(layer, x)
        return pre_activations(self.model, layer, x)

    @torch.no_grad()
    def _clean_run(self, tokens: Tensor) -> _Clean:
        """One forward of the unchanged prompt, recording what the intervened one freezes."""
        clean, n_layers = _Clean(), self.model.cfg.n_layers
        acts: list[Tensor | None] = [None] * n_layers
        skip = self.model.skip_transcoder and self.constrained

        def at_input(layer: int, x: Tensor) -> None:
            acts[layer] = self._encode(layer, x)
            if skip:
                clean.inputs[layer] = x.detach().clone()

        def at_output(layer: int, out: Tensor) -> None:
            if self.constrained and layer in self.constrained:
                clean.outputs[layer] = out.detach().clone()

        def record(x: Tensor, hook: Any) -> None:
            clean.values[hook.name] = x.detach().clone()

        with self.model.transcoder_io(
            at_input, at_output, [(n, record) for n in self._frozen_names()]
        ):
            self.model.model(tokens)
        clean.activations = torch.stack(acts)
        clean.activations[:, self.model.zero_positions] = 0
        return clean

    # ------------------------------------------------------------- the intervened run
    def _prompt(self) -> bool:
        return self.forward == 0

    def _layer_interventions(self) -> dict[int, list[Item]]:
        return self.prompt_interventions if self._prompt() else self.later_interventions

    def _new_forward(self, module: Any, args: Any) -> None:
        self.forward += 1
        self._current, self._pending, self._inputs = {}, {}, {}

    def _at_input(self, layer: int, x: Tensor) -> None:
        prompt = self._prompt()
        constrained = prompt and self.constrained
        if self.return_activations or (not constrained and layer in self._layer_interventions()):
            acts = self._encode(layer, x, self.apply_activation_function)
            if prompt:
                acts[self.model.zero_positions] = 0
            self._current[layer] = acts
            stored = acts.to_sparse() if self.sparse else acts
            if self.return_activations:
                self.activations[layer].append(stored)
        if constrained and self.clean is not None and layer in self.clean.inputs:
            self._inputs[layer] = x

    def _base_activations(self, layer: int) -> Tensor:
        """The activations a delta is taken from: the clean ones when constrained, else
        this forward's (after the activation function)."""
        if self._prompt() and self.constrained:
            return self.clean.activations[layer]
        acts = self._current[layer]
        return acts if self.apply_activation_function else activate(self.model, layer, acts)

    def _add_deltas(self, layer: int, items: list[Item], n_pos: int, like: Tensor) -> None:
        """Queue ``(value - activation) * decoder`` into every layer the features write."""
        base = self._base_activations(layer)
        deltas = torch.zeros_like(base)
        for pos, feature, value in items:
            deltas[pos, feature] = value - base[pos, feature]
        positions, features = deltas.nonzero(as_tuple=True)
        new_values = deltas[positions, features]
        tcs = self.model.transcoders
        for target in tcs.writes_to(layer):
            vectors = tcs.decoder_vectors(layer, features, target) * new_values[:, None]
            pending = self._pending.setdefault(target, like.new_zeros(n_pos, like.shape[-1]))
            pending.index_add_(0, positions, vectors.to(pending.dtype))

    def _at_output(self, layer: int, out: Tensor) -> Tensor:
        prompt = self._prompt()
        if prompt and self.constrained and layer in self.constrained and self.clean is not None:
            frozen = self.clean.outputs[layer]
            if layer in self._inputs:  # the skip connection's change stays
                tcs = self.model.transcoders
                change = tcs.skip(layer, self._inputs[layer]) - tcs.skip(
                    layer, self.clean.inputs[layer]
                )
                frozen = frozen + change.to(frozen.dtype)
            out = frozen
        items = self._layer_interventions().get(layer)
        if items:
            self._add_deltas(layer, items, out.shape[1], out)
        pending = self._pending.pop(layer, None)
        if pending is not None and (
            not prompt or not self.constrained or layer in self.constrained
        ):
            out = out + pending
        return out

    def _freeze(self, x: Tensor, hook: Any) -> Tensor:
        if not self._prompt():
            return x
        frozen = self.clean.values[hook.name]
        if frozen.shape != x.shape and frozen.ndim == x.ndim:  # generate's ln_final: last pos
            frozen = frozen[:, -x.shape[1] :]
        return frozen

    def _record_logits(self, module: Any, args: Any, logits: Tensor) -> None:
        self.logits.append(logits[:, -1:].detach())

    @contextlib.contextmanager
    def installed(self) -> Iterator[InterventionRun]:
        """Within the block, the model's forwards run intervened (see the module docstring)."""
        extra = [(name, self._freeze) for name in self._frozen_names()] if self.freezes else []
        model = self.model.model
        handles = [model.blocks[0].register_forward_pre_hook(self._new_forward)]
        try:
            if self.generating:
                handles.append(model.unembed.register_forward_hook(self._record_logits))
            with torch.no_grad(), self.model.transcoder_io(self._at_input, self._at_output, extra):
                yield self
        finally:
            for handle in handles:
                handle.remove()

    def stacked_activations(self) -> Tensor | None:
        """[n_layers, positions, d_tc]: every forward's activations, positions concatenated."""
        if not self.return_activations:
            return None
        activations = torch.stack([torch.cat(layer, dim=0) for layer in self.activations])
        return activations.coalesce() if self.sparse else activations


# ----------------------------------------------------------------------- the API
def feature_intervention(
    model: ReplacementModel,
    inputs: str | Int[Tensor, " pos"] | Int[Tensor, "1 pos"],
    interventions: Sequence[Intervention],
    constrained_layers: Sequence[int] | None = None,
    freeze_attention: bool = True,
    apply_activation_function: bool = True,
    sparse: bool = False,
    return_activations: bool = True,
) -> tuple[Float[Tensor, "1 pos d_vocab"], Float[Tensor, "n_layers pos d_tc"] | None]:
    """(logits, activations) of ``inputs`` with ``interventions`` (see the module
    docstring); the model is as it was afterwards."""
    tokens = _tokens(model, inputs)
    run = InterventionRun(
        model, tokens, interventions, constrained_layers, freeze_attention,
        apply_activation_function, sparse, return_activations,
    )  # fmt: skip
    with run.installed():
        logits = model.model(tokens)
    return logits, run.stacked_activations()


def feature_intervention_generate(
    model: ReplacementModel,
    inputs: str | Int[Tensor, " pos"] | Int[Tensor, "1 pos"],
    interventions: Sequence[Intervention],
    constrained_layers: Sequence[int] | None = None,
    freeze_attention: bool = True,
    apply_activation_function: bool = True,
    sparse: bool = False,
    return_activations: bool = True,
    **generate_kwargs: Any,
) -> tuple[Any, Float[Tensor, "steps d_vocab"], Float[Tensor, "n_layers all_pos d_tc"] | None]:
    """(generation, logits of each step, activations): ``model.generate(inputs,
    **generate_kwargs)`` with ``interventions`` (see the module docstring)."""
    if not generate_kwargs.get("use_past_kv_cache", True):
        raise ValueError(
            "feature_intervention_generate steps a key/value cache (each later forward is "
            "the new token only); leave use_past_kv_cache=True."
        )
    tokens = _tokens(model, inputs, generate_kwargs.get("prepend_bos"))
    run = InterventionRun(
        model, tokens, interventions, constrained_layers, freeze_attention,
        apply_activation_function, sparse, return_activations, generating=True,
    )  # fmt: skip
    with run.installed():
        generation = model.model.generate(
            inputs if isinstance(inputs, str) else tokens, **generate_kwargs
        )
    return generation, torch.cat(run.logits, dim=1)[0], run.stacked_activations()
