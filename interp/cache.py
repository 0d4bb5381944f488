"""ActivationCache: the activations of one forward pass, by hook name."""

from __future__ import annotations

import difflib
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.analysis.labels import neuron_labels
from interp.components.norms import applied_weight
from interp.utils import Slice, get_act_name
from interp.utils.slice import to_python_int

# Which positions to keep: None (all), an int (drops the pos axis), a (start, stop[, step])
# tuple or a slice, indices, or a Slice; as TransformerLens's ``Slice(pos_slice)``.
PosSlice = int | slice | tuple | Sequence[int] | Tensor | Slice | None


def slice_positions(tensor: Tensor, pos_slice: PosSlice, dim: int) -> Tensor:
    """``tensor`` with ``pos_slice`` applied along ``dim``, as TransformerLens's ``Slice``.

    Example:
        >>> slice_positions(torch.zeros(2, 5, 3), -1, dim=-2).shape
        torch.Size([2, 3])
    """
    if isinstance(pos_slice, Slice):
        pos_slice = None if pos_slice.mode == "identity" else pos_slice.slice
    if pos_slice is None:
        return tensor
    as_int = to_python_int(pos_slice)
    if as_int is not None:
        return tensor.select(dim, as_int)
    if isinstance(pos_slice, tuple):
        pos_slice = slice(*pos_slice)
    if isinstance(pos_slice, slice):
        return tensor[(slice(None),) * (dim % tensor.ndim) + (pos_slice,)]
    indices = torch.as_tensor(pos_slice, device=tensor.device)
    if indices.dtype == torch.bool or indices.is_floating_point() or indices.ndim != 1:
        raise TypeError(
            f"pos_slice must be None, an int, a slice or a 1-D list of ints; got {pos_slice!r}."
        )
    size = tensor.shape[dim]
    if indices.numel() and not (-size <= int(indices.min()) and int(indices.max()) < size):
        raise IndexError(f"pos_slice {pos_slice!r} is out of range for {size} positions.")
    return tensor.index_select(dim, indices % size)


class ActivationCache:
    """A read-only mapping from hook names to activations, with TransformerLens's shorthand.

    Example:
        >>> logits, cache = model.run_with_cache(tokens)
        >>> cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
        True
        >>> cache["resid_post", -1].shape, cache["scale", 2, "ln1"].shape
    """

    def __init__(self, cache_dict: dict[str, Tensor], model: Any, has_batch_dim: bool = True):
        self.cache_dict = cache_dict
        self.model = model
        self.has_batch_dim = has_batch_dim

    # ------------------------------------------------------------------ mapping protocol
    def key_of(self, key: str | tuple) -> str:
        """The full hook name for a key: a name, or ``(name, layer[, layer_type])``; a layer
        counts from the end when negative and must exist in the model."""
        if isinstance(key, str):
            return get_act_name(key)
        if not isinstance(key, tuple) or not 1 <= len(key) <= 3:
            raise KeyError(
                f"Cache keys are a hook name or (name, layer[, layer_type]); got {key!r}."
            )
        name, layer, *layer_type = (*key, None)[: max(len(key), 2)]
        if to_python_int(layer) is not None and self.model is not None:
            layer, n_layers = to_python_int(layer), self.model.cfg.n_layers
            if not -n_layers <= layer < n_layers:
                raise KeyError(
                    f"Layer {layer} in cache key {key!r} is out of range: this model has "
                    f"n_layers={n_layers}, so pass 0..{n_layers - 1} (or -{n_layers}..-1 to "
                    "count from the end)."
                )
            layer %= n_layers
        return get_act_name(name, layer, *layer_type)

    def __getitem__(self, key: str | tuple) -> Tensor:
        if isinstance(key, str) and key in self.cache_dict:
            return self.cache_dict[key]
        name = self.key_of(key)
        if name not in self.cache_dict:
            raise KeyError(self._missing_key_message(key, name))
        return self.cache_dict[name]

    def _missing_key_message(self, key: str | tuple, name: str) -> str:
        """Why ``name`` is not here: the model has no such hook (with the closest names), or
        it has one that the run did not keep."""
        hook_dict = getattr(self.model, "hook_dict", None)
        hook_name = name.removesuffix("_grad")
        shown = repr(key) if key == name else f"{key!r} (hook {name!r})"
        if hook_dict is not None and hook_name not in hook_dict:
            close = difflib.get_close_matches(hook_name, list(hook_dict), n=5, cutoff=0.5)
            hint = f" Closest valid names: {close}." if close else ""
            if hook_name.endswith("attn.hook_result"):
                hint += " Call cache.compute_head_results() (or model.set_use_attn_result(True))."
            return f"This model has no hook point named {shown}.{hint}"
        what = "gradient of " if name.endswith("_grad") else ""
        fix = "pass incl_bwd=True and " if what else ""
        return (
            f"The {what}{shown} is not in this cache: it holds {len(self.cache_dict)} "
            f"activations, e.g. {list(self.cache_dict)[:5]}; {fix}widen run_with_cache's "
            "names_filter to keep it."
        )

    def __contains__(self, key: str | tuple) -> bool:
        try:
            return key in self.cache_dict or self.key_of(key) in self.cache_dict
        except KeyError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self.cache_dict)

    def __len__(self) -> int:
        return len(self.cache_dict)

    def keys(self):
        return self.cache_dict.keys()

    def values(self):
        return self.cache_dict.values()

    def items(self):
        return self.cache_dict.items()

    def __repr__(self) -> str:
        return f"ActivationCache with {len(self)} activations ({self.nbytes / 2**20:.1f} MiB)"

    # ----------------------------------------------------------------- moving / resizing
    @property
    def nbytes(self) -> int:
        """Total bytes held by the cached tensors."""
        return sum(t.numel() * t.element_size() for t in self.cache_dict.values())

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> ActivationCache:
        """Move (and optionally cast) every activation; returns self for chaining."""
        self.cache_dict = {k: v.to(device=device, dtype=dtype) for k, v in self.cache_dict.items()}
        return self

    def remove_batch_dim(self) -> ActivationCache:
        """Drop the batch axis of a batch-of-one cache, in place; returns self."""
        if not self.has_batch_dim:
            return self
        sizes = {t.shape[0] for t in self.cache_dict.values()}
        if sizes - {1}:
            raise ValueError(
                f"remove_batch_dim needs a batch of 1; this cache has batch sizes {sizes}."
            )
        self.cache_dict = {k: v[0] for k, v in self.cache_dict.items()}
        self.has_batch_dim = False
        return self

    def toggle_autodiff(self, mode: bool = False) -> None:
        """``torch.set_grad_enabled(mode)``, as TransformerLens: global state, for the whole
        process (``with torch.inference_mode():`` is the local alternative)."""
        logging.warning("Changed the global state, set autodiff to %s", mode)
        torch.set_grad_enabled(mode)

    def apply_slice_to_batch_dim(self, batch_slice: Slice | PosSlice) -> ActivationCache:
        """A new cache with ``batch_slice`` applied to the batch axis of every activation (an
        int drops the axis); entries whose first axis is not the batch are left as they are.

        Example:
            >>> first_two = cache.apply_slice_to_batch_dim([0, 1])
            >>> one = cache.apply_slice_to_batch_dim(0)   # has_batch_dim is now False
        """
        batch_slice = batch_slice if isinstance(batch_slice, Slice) else Slice(batch_slice)
        if not self.has_batch_dim:
            raise ValueError(
                "This cache has no batch axis (remove_batch_dim was applied), so "
                f"batch_slice={batch_slice.slice!r} cannot be applied."
            )
        sizes = Counter(t.shape[0] for t in self.cache_dict.values() if t.ndim > 0)
        batch_size = sizes.most_common(1)[0][0] if sizes else 1
        sliced = {
            name: batch_slice.apply(t, dim=0) if t.ndim > 0 and t.shape[0] == batch_size else t
            for name, t in self.cache_dict.items()
        }
        return ActivationCache(sliced, self.model, has_batch_dim=batch_slice.mode != "int")

    # --------------------------------------------------- residual-stream decompositions
    # Stacks put the component axis first: [component, batch, pos, d_model] (no batch axis
    # after remove_batch_dim; no pos axis when pos_slice is an int). A `layer` argument names
    # the residual stream entering that block: 0 is the embeddings, n_layers (or -1, or None)
    # the stream entering the unembed.

    def accumulated_resid(
        self,
        layer: int | None = None,
        incl_mid: bool = False,
        apply_ln: bool = False,
        pos_slice: PosSlice = None,
        mlp_input: bool = False,
        return_labels: bool = False,
    ) -> Float[Tensor, "stage *batch_and_pos d_model"] | tuple[Tensor, list[str]]:
        """The residual stream as it stands entering each block up to ``layer``: what the
        model "believes" at each depth (the logit lens reads these).

        Labels are ``"0_pre"``, ``"0_mid"`` (with ``incl_mid``), ..., ``"final_post"``.
        ``incl_mid`` adds the stream after each attention sublayer (attention-only models and
        parallel blocks have none); ``mlp_input`` adds ``resid_mid`` of ``layer`` itself (a
        parallel block's MLP reads ``resid_pre``, already there). ``apply_ln`` applies the
        cached scale of the layer norm that reads ``layer`` (see ``apply_ln_to_stack``).

        Example:
            >>> stack, labels = cache.accumulated_resid(incl_mid=True, return_labels=True)
            >>> stack.shape, labels[:3]   # [2 * n_layers + 1, batch, pos, d_model]
            (torch.Size([5, 1, 7, 64]), ['0_pre', '0_mid', '1_pre'])
        """
        layer = self._resid_layer(layer, mlp_input)
        n_layers = self.model.cfg.n_layers
        has_mid = not (self.model.cfg.attn_only or self.model.cfg.parallel_attn_mlp)
        components, labels = [], []
        for index in range(layer + 1):
            if index == n_layers:
                components.append(self["resid_post", n_layers - 1])
                labels.append("final_post")
                continue
            components.append(self["resid_pre", index])
            labels.append(f"{index}_pre")
            if has_mid and ((incl_mid and index < layer) or (mlp_input and index == layer)):
                components.append(self["resid_mid", index])
                labels.append(f"{index}_mid")
        stack = torch.stack([slice_positions(c, pos_slice, -2) for c in components])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice)
        return (stack, labels) if return_labels else stack

    def decompose_resid(
        self,
        layer: int | None = None,
        mlp_input: bool = False,
        mode: Literal["all", "mlp", "attn"] = "all",
        apply_ln: bool = False,
        pos_slice: PosSlice = None,
        incl_embeds: bool = True,
        return_labels: bool = False,
    ) -> Float[Tensor, "component *batch_and_pos d_model"] | tuple[Tensor, list[str]]:
        """The residual stream entering ``layer`` split into the outputs that were added to it:
        ``"embed"``, ``"pos_embed"`` (not on rotary models, which have none), then
        ``"{l}_attn_out"`` and ``"{l}_mlp_out"`` per block.

        The components sum to ``resid_pre`` of ``layer`` (with ``mlp_input``, the stream the
        MLP reads: ``resid_mid``, or ``resid_pre`` in a parallel block).
        ``mode="attn"`` or ``"mlp"`` keeps only those sublayers.

        Example:
            >>> stack, labels = cache.decompose_resid(return_labels=True)
            >>> torch.allclose(stack.sum(0), cache["resid_post", -1], atol=1e-5)
            True
        """
        if mode not in ("all", "mlp", "attn"):
            raise ValueError(f"mode must be 'all', 'attn' or 'mlp', got {mode!r}.")
        layer = self._resid_layer(layer, mlp_input)
        incl_attn, incl_mlp = mode != "mlp", mode != "attn" and not self.model.cfg.attn_only
        components, labels = [], []
        if incl_embeds:
            labels += self._embedding_labels()
            components += [self[label] for label in self._embedding_labels()]
        for index in range(layer):
            if incl_attn:
                components.append(self["attn_out", index])
                labels.append(f"{index}_attn_out")
            if incl_mlp:
                components.append(self["mlp_out", index])
                labels.append(f"{index}_mlp_out")
        if self._attn_before_mlp(mlp_input) and incl_attn:
            components.append(self["attn_out", layer])
            labels.append(f"{layer}_attn_out")
        stack = self._stack_or_empty([slice_positions(c, pos_slice, -2) for c in components])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice)
        return (stack, labels) if return_labels else stack

    def compute_head_results(self) -> None:
        """Store every layer's per-head results (``attn.hook_result``, computed from ``hook_z``
        and ``W_O``) in the cache, for code that reads ``cache["result", l]`` directly."""
        for layer in range(self.model.cfg.n_layers):
            self.cache_dict[get_act_name("result", layer)] = self._head_results(layer)

    def stack_activation(
        self, activation_name: str, layer: int | None = -1, sublayer_type: str | None = None
    ) -> Float[Tensor, "layers_covered ..."]:
        """``activation_name`` of every block before ``layer`` (-1 or None: every block),
        stacked on a new first axis.

        Example:
            >>> cache.stack_activation("pattern").shape   # [n_layers, batch, head, q, k]
        """
        layer = self._resid_layer(layer)
        if layer == 0:
            raise ValueError(
                "stack_activation(layer=0) would stack no blocks: pass 1..n_layers (or -1)."
            )
        return torch.stack([self[(activation_name, i, sublayer_type)] for i in range(layer)])

    def stack_head_results(
        self,
        layer: int | None = -1,
        return_labels: bool = False,
        incl_remainder: bool = False,
        pos_slice: PosSlice = None,
        apply_ln: bool = False,
    ) -> Float[Tensor, "head *batch_and_pos d_model"] | tuple[Tensor, list[str]]:
        """What every head of the blocks before ``layer`` wrote into the residual stream,
        labelled ``"L0H0"``, ``"L0H1"``, ... (layer-major).

        Uses ``attn.hook_result`` when cached, else ``hook_z @ W_O`` per head, so caching
        ``hook_z`` is enough. A layer's heads plus its ``b_O`` sum to its ``hook_attn_out``.
        With sandwich norms (Gemma 2 and 3) each head's result is taken through ``ln1_post``
        with its cached scale (linear at each position), as it is added to the stream; then
        the heads plus ``b_O`` through it (and its bias) sum to ``hook_attn_out``.
        ``incl_remainder`` appends ``"remainder"``, the rest of the stream entering ``layer``.

        Example:
            >>> heads, labels = cache.stack_head_results(return_labels=True)
            >>> heads.shape   # [n_layers * n_heads, batch, pos, d_model]
        """
        layer = self._resid_layer(layer)
        n_heads = self.model.cfg.n_heads
        per_layer = [
            self._post_norm(
                slice_positions(self._head_results(i), pos_slice, -3), i, "ln1_post", pos_slice
            )
            for i in range(layer)
        ]
        labels = [f"L{i}H{h}" for i in range(layer) for h in range(n_heads)]
        return self._finish_component_stack(
            per_layer, labels, layer, pos_slice, incl_remainder, apply_ln, return_labels
        )

    def get_neuron_results(
        self,
        layer: int,
        neuron_slice: int | slice | Sequence[int] | Tensor | None = None,
        pos_slice: PosSlice = None,
    ) -> Float[Tensor, "*batch_and_pos neuron d_model"]:
        """What each neuron of block ``layer``'s MLP wrote into the residual stream:
        ``mlp.hook_post[..., n] * W_out[n]`` (through ``ln2_post`` with its cached scale on
        models with sandwich norms). Memory grows as d_mlp x d_model per position.

        Example:
            >>> cache.get_neuron_results(0, neuron_slice=[3, 7]).shape   # [batch, pos, 2, d_model]
        """
        neurons = self._neuron_indices(neuron_slice)
        self._block_index(layer)
        post = slice_positions(self["post", layer], pos_slice, -2)
        W_out = self.model.blocks[layer].mlp.W_out.to(post)
        return self._post_norm(
            post[..., neurons, None] * W_out[neurons], layer, "ln2_post", pos_slice
        )

    def stack_neuron_results(
        self,
        layer: int | None = -1,
        pos_slice: PosSlice = None,
        neuron_slice: int | slice | Sequence[int] | Tensor | None = None,
        return_labels: bool = False,
        incl_remainder: bool = False,
        apply_ln: bool = False,
    ) -> Float[Tensor, "neuron *batch_and_pos d_model"] | tuple[Tensor, list[str]]:
        """Every MLP neuron's output, for the blocks before ``layer``, labelled ``"L0N0"``, ...

        Neurons sum to ``mlp_out`` minus ``b_out`` per layer. Costs
        ``layer * d_mlp * d_model`` floats per position: slice positions or neurons on big models.

        Example:
            >>> neurons, labels = cache.stack_neuron_results(1, return_labels=True)
            >>> neurons.shape   # [d_mlp, batch, pos, d_model]
        """
        layer = self._resid_layer(layer)
        neurons = self._neuron_indices(neuron_slice)
        per_layer = [self.get_neuron_results(i, neurons, pos_slice) for i in range(layer)]
        labels = neuron_labels(range(layer), neurons.tolist())
        return self._finish_component_stack(
            per_layer, labels, layer, pos_slice, incl_remainder, apply_ln, return_labels
        )

    def get_full_resid_decomposition(
        self,
        layer: int | None = None,
        mlp_input: bool = False,
        expand_neurons: bool = True,
        apply_ln: bool = False,
        pos_slice: PosSlice = None,
        return_labels: bool = False,
    ) -> Float[Tensor, "component *batch_and_pos d_model"] | tuple[Tensor, list[str]]:
        """The residual stream entering ``layer`` split as finely as it goes: every head
        (``"L0H0"``...), every neuron (``"L0N0"``...; or ``"{l}_mlp_out"`` per layer when
        ``expand_neurons=False``), ``"embed"``, ``"pos_embed"`` (not on rotary models) and
        ``"bias"`` (all the ``b_O`` and, for expanded neurons, ``b_out`` added so far; with
        sandwich norms, as the post-norms add them, so it varies by position). The components
        sum to the stream.

        Example:
            >>> stack, labels = cache.get_full_resid_decomposition(expand_neurons=False,
            ...                                                     return_labels=True)
            >>> labels[-3:]
            ['embed', 'pos_embed', 'bias']
        """
        layer = self._resid_layer(layer, mlp_input)
        stack, labels = self.stack_head_results(
            layer + int(self._attn_before_mlp(mlp_input)), pos_slice=pos_slice, return_labels=True
        )
        components = [stack]
        if not self.model.cfg.attn_only and layer > 0:
            if expand_neurons:
                mlp_stack, mlp_labels = self.stack_neuron_results(
                    layer, pos_slice=pos_slice, return_labels=True
                )
            else:
                mlp_stack, mlp_labels = self.decompose_resid(
                    layer, mode="mlp", pos_slice=pos_slice, incl_embeds=False, return_labels=True
                )
            components.append(mlp_stack)
            labels = labels + mlp_labels
        embeds = [slice_positions(self[name], pos_slice, -2) for name in self._embedding_labels()]
        components.append(torch.stack(embeds))
        bias = self._accumulated_bias(layer, mlp_input, expand_neurons, pos_slice)
        components.append(bias.to(embeds[0]).expand_as(embeds[0])[None])
        labels = labels + self._embedding_labels() + ["bias"]
        stack = torch.cat(components, dim=0)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice)
        return (stack, labels) if return_labels else stack

    def apply_ln_to_stack(
        self,
        residual_stack: Float[Tensor, "component *batch_and_pos d_model"],
        layer: int | None = None,
        mlp_input: bool = False,
        pos_slice: PosSlice = None,
        batch_slice: PosSlice = None,
        has_batch_dim: bool = True,
        recompute_ln: bool = False,
    ) -> Float[Tensor, "component *batch_and_pos d_model"]:
        """Each component as the layer norm reading ``layer`` sees it: centred and divided by
        that norm's cached scale (``ln1``, ``ln2`` with ``mlp_input``, or ``ln_final`` for
        ``layer=n_layers``/-1/None).

        One scale per position, shared by all components, keeps the stack linear: its sum is
        the normalised stream. As in TransformerLens the norm's weight and bias are not
        applied (``logit_attrs`` folds ``ln_final.w`` into its directions instead). Models
        without layer norm get the stack back unchanged. ``pos_slice`` must be the one the
        stack was built with; ``batch_slice`` is applied to the stack (when
        ``has_batch_dim``) and to the scale.

        ``recompute_ln=True`` with the final layer (TransformerLens's logit-lens mode) instead
        runs ``ln_final`` itself on each component, with statistics recomputed from that
        component and the norm's weight and bias applied; the stack is then no longer linear.
        For other layers it is ignored, as in TransformerLens.

        Example:
            >>> stack = cache.apply_ln_to_stack(cache.decompose_resid(pos_slice=-1), pos_slice=-1)
            >>> lens = cache.apply_ln_to_stack(cache.accumulated_resid(), recompute_ln=True)
        """
        layer = self._resid_layer(layer, mlp_input)
        batch_slice = batch_slice if isinstance(batch_slice, Slice) else Slice(batch_slice)
        if has_batch_dim:
            residual_stack = batch_slice.apply(residual_stack, dim=1)
        normalization = self.model.cfg.normalization_type
        if normalization is None:
            return residual_stack
        if recompute_ln and layer == self.model.cfg.n_layers:
            return self.model.ln_final(residual_stack)
        if layer == self.model.cfg.n_layers:
            scale_name = "ln_final.hook_scale"
        else:
            scale_name = f"blocks.{layer}.ln{2 if mlp_input else 1}.hook_scale"
        if scale_name not in self.cache_dict:
            raise KeyError(
                f"apply_ln needs the cached layer-norm scale {scale_name!r}; run run_with_cache "
                "with a names_filter that keeps it (or without a filter)."
            )
        scale = slice_positions(self.cache_dict[scale_name], pos_slice, -2)  # [*batch_pos, 1]
        if self.has_batch_dim:
            scale = batch_slice.apply(scale, dim=0)
        if residual_stack.shape[1:-1] != scale.shape[:-1]:
            raise ValueError(
                f"The stack's batch/position shape {tuple(residual_stack.shape[1:-1])} does not "
                f"match the cached scale's {tuple(scale.shape[:-1])}: pass the pos_slice (and "
                "batch_slice) the stack was built with."
            )
        if normalization in ("LN", "LNPre"):  # RMS norms divide without centring
            residual_stack = residual_stack - residual_stack.mean(dim=-1, keepdim=True)
        return residual_stack / scale.to(residual_stack)

    def logit_attrs(
        self,
        residual_stack: Float[Tensor, "component *batch_and_pos d_model"],
        tokens: str | int | Int[Tensor, "..."],
        incorrect_tokens: str | int | Int[Tensor, "..."] | None = None,
        pos_slice: PosSlice = None,
    ) -> Float[Tensor, " component *batch_and_pos"]:
        """How much each component pushes up the logit of ``tokens`` (minus that of
        ``incorrect_tokens``): the final layer norm's cached scale applied to the component,
        dotted with the token's unembedding direction ``ln_final.w * W_U[:, token]``.

        Pass the stack *without* ``apply_ln`` (this applies the final norm itself, as in
        TransformerLens). The attributions sum to the logit (difference) at those positions
        less the constant ``ln_final.b @ W_U + b_U`` term. ``tokens`` is a token string, an id,
        a ``[batch]`` tensor (one token per example, shared over positions) or a
        ``[batch, pos]`` tensor; ``incorrect_tokens`` has the same shape.

        Example:
            >>> stack, labels = cache.decompose_resid(pos_slice=-1, return_labels=True)
            >>> cache.logit_attrs(stack, answer_ids, wrong_ids, pos_slice=-1)   # [component, batch]
        """
        directions = self._unembed_directions(tokens)
        if incorrect_tokens is not None:
            incorrect_directions = self._unembed_directions(incorrect_tokens)
            if incorrect_directions.shape != directions.shape:
                raise ValueError(
                    f"tokens and incorrect_tokens must have the same shape; got "
                    f"{tuple(directions.shape[:-1])} and {tuple(incorrect_directions.shape[:-1])}."
                )
            directions = directions - incorrect_directions
        scaled = self.apply_ln_to_stack(residual_stack, pos_slice=pos_slice)
        if self.has_batch_dim and scaled.ndim == 4 and directions.ndim == 2:
            directions = directions[:, None]  # one token per example, for every position
        try:
            return (scaled * directions.to(scaled)).sum(dim=-1)
        except RuntimeError as error:
            raise ValueError(
                f"Tokens of shape {tuple(directions.shape[:-1])} do not fit a stack of shape "
                f"{tuple(residual_stack.shape)}: give one token per example ([batch]) or per "
                "example and kept position ([batch, pos])."
            ) from error

    # -------------------------------------------------------------------------- helpers
    def _resid_layer(self, layer: int | None, mlp_input: bool = False) -> int:
        """A residual-stream layer in 0..n_layers (-1 and None mean n_layers)."""
        n_layers = self.model.cfg.n_layers
        if layer is None:
            layer = n_layers
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int or None, got {layer!r}.")
        if not -(n_layers + 1) <= layer <= n_layers:
            raise ValueError(
                f"layer={layer} is out of range for a {n_layers}-layer model: pass 0..{n_layers} "
                f"(the stream entering that block; {n_layers}, -1 or None mean the stream "
                "entering the unembed)."
            )
        layer %= n_layers + 1
        if mlp_input and (layer == n_layers or self.model.cfg.attn_only):
            raise ValueError(
                "mlp_input=True means the stream entering layer's MLP: it needs a layer below "
                f"n_layers={n_layers} and a model with MLPs."
            )
        return layer

    def _embedding_labels(self) -> list[str]:
        """The embeddings added to the stream: ``"embed"``, and ``"pos_embed"`` unless the
        model is rotary (positions rotate queries and keys instead)."""
        rotary = self.model.cfg.positional_embedding_type == "rotary"
        return ["embed"] if rotary else ["embed", "pos_embed"]

    def _attn_before_mlp(self, mlp_input: bool) -> bool:
        """Whether the stream an MLP reads (``mlp_input``) holds its own block's attention:
        not in parallel blocks, whose MLP reads ``resid_pre``."""
        return mlp_input and not self.model.cfg.parallel_attn_mlp

    def _post_norm(
        self,
        output: Float[Tensor, "*batch_and_pos component d_model"],
        layer: int,
        norm_name: str,
        pos_slice: PosSlice = None,
    ) -> Float[Tensor, "*batch_and_pos component d_model"]:
        """Components of block ``layer``'s attention (``ln1_post``) or MLP (``ln2_post``)
        output as that sandwich norm adds them to the stream: centred (LayerNorm), times its
        weight, over its cached scale (from ``hook_scale``, at ``pos_slice``); its bias is left
        to ``_accumulated_bias``. Unchanged without sandwich norms."""
        if not self.model.cfg.use_normalization_before_and_after:
            return output
        norm = getattr(self.model.blocks[layer], norm_name)
        scale = slice_positions(self[f"blocks.{layer}.{norm_name}.hook_scale"], pos_slice, -2)
        if self.model.cfg.normalization_type in ("LN", "LNPre"):
            output = output - output.mean(dim=-1, keepdim=True)
        weight = applied_weight(norm).detach().to(output)  # w, or Gemma's 1 + w
        return output * weight / scale[..., None, :].to(output)

    def _block_index(self, layer: int) -> int:
        n_layers = self.model.cfg.n_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
            raise ValueError(f"Block index {layer!r} is out of range: pass 0..{n_layers - 1}.")
        return layer

    def _head_results(self, layer: int) -> Float[Tensor, "*batch pos n_heads d_model"]:
        name = get_act_name("result", layer)
        if name in self.cache_dict:
            return self.cache_dict[name]
        z = self["z", layer]  # [*batch, pos, n_heads, d_head]
        W_O = self.model.blocks[layer].attn.W_O.to(z)  # [n_heads, d_head, d_model]
        return torch.einsum("...hd,hdm->...hm", z, W_O)

    def _neuron_indices(self, neuron_slice) -> Int[Tensor, " neuron"]:
        d_mlp = self.model.cfg.d_mlp
        if d_mlp is None:
            raise ValueError("This model is attention-only: it has no MLP neurons.")
        if isinstance(neuron_slice, Slice):
            neuron_slice = None if neuron_slice.mode == "identity" else neuron_slice.slice
        if isinstance(neuron_slice, tuple):
            neuron_slice = slice(*neuron_slice)
        if neuron_slice is None or isinstance(neuron_slice, slice):
            return torch.arange(d_mlp)[neuron_slice or slice(None)]
        indices = torch.as_tensor(
            [neuron_slice] if isinstance(neuron_slice, int) else neuron_slice
        ).flatten()
        if indices.is_floating_point() or indices.dtype == torch.bool:
            raise TypeError(f"neuron_slice must hold integer indices, got {neuron_slice!r}.")
        if indices.numel() and not (-d_mlp <= int(indices.min()) and int(indices.max()) < d_mlp):
            raise ValueError(f"neuron_slice {neuron_slice!r} is out of range for d_mlp={d_mlp}.")
        return indices.cpu() % d_mlp

    def _finish_component_stack(
        self,
        per_layer: list[Float[Tensor, "*batch_and_pos component d_model"]],
        labels: list[str],
        layer: int,
        pos_slice: PosSlice,
        incl_remainder: bool,
        apply_ln: bool,
        return_labels: bool,
    ) -> Float[Tensor, "component *batch_and_pos d_model"] | tuple[Tensor, list[str]]:
        """Per-layer component outputs (heads or neurons) as one stack, component axis first,
        with the optional remainder row and layer norm of ``stack_head/neuron_results``."""
        if per_layer:
            stack = torch.cat(per_layer, dim=-2).movedim(-2, 0)
        else:
            stack = self._stack_or_empty([], pos_slice)
        if incl_remainder:
            stack, labels = self._append_remainder(stack, labels, layer, False, pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def _stack_or_empty(
        self, components: list[Tensor], pos_slice: PosSlice = None
    ) -> Float[Tensor, "component *batch_and_pos d_model"]:
        """``torch.stack(components)``, or an empty stack shaped like the residual stream."""
        if components:
            return torch.stack(components)
        template = slice_positions(self["resid_pre", 0], pos_slice, -2)
        return template.new_zeros(0, *template.shape)

    def _append_remainder(
        self, stack: Tensor, labels: list[str], layer: int, mlp_input: bool, pos_slice: PosSlice
    ) -> tuple[Tensor, list[str]]:
        """Append ``"remainder"``: the stream entering ``layer`` minus the stack's sum."""
        if self._attn_before_mlp(mlp_input):
            stream = self["resid_mid", layer]
        elif layer == self.model.cfg.n_layers:
            stream = self["resid_post", layer - 1]
        else:
            stream = self["resid_pre", layer]
        remainder = slice_positions(stream, pos_slice, -2) - stack.sum(dim=0)
        return torch.cat([stack, remainder[None]]), labels + ["remainder"]

    def _accumulated_bias(
        self, layer: int, mlp_input: bool, include_mlp_biases: bool, pos_slice: PosSlice = None
    ) -> Float[Tensor, "*batch_and_pos d_model"]:
        """The sum of the output biases added to the stream entering ``layer``: [d_model], or
        per position with sandwich norms (each bias goes through its post-norm's scale)."""

        def added(bias: Tensor, index: int, norm_name: str) -> Tensor:
            bias = self._post_norm(bias.detach()[None], index, norm_name, pos_slice)[..., 0, :]
            norm = getattr(self.model.blocks[index], norm_name, None)
            norm_bias = getattr(norm, "b", None)
            return bias if norm_bias is None else bias + norm_bias.detach()

        total = torch.zeros_like(self.model.blocks[0].attn.b_O).detach()
        for index in range(layer + int(self._attn_before_mlp(mlp_input))):
            block = self.model.blocks[index]
            total = total + added(block.attn.b_O, index, "ln1_post")
            if include_mlp_biases and index < layer and not self.model.cfg.attn_only:
                total = total + added(block.mlp.b_out, index, "ln2_post")
        return total

    def _unembed_directions(self, tokens: str | int | Tensor) -> Float[Tensor, "... d_model"]:
        """``ln_final.w * W_U[:, token]`` for each token: the residual direction of its logit."""
        if isinstance(tokens, str):
            tokens = self.model.to_single_token(tokens)
        tokens = torch.as_tensor(tokens)
        if tokens.is_floating_point():
            raise TypeError(f"Token ids must be integers, got {tokens.dtype}.")
        d_vocab = self.model.cfg.d_vocab_out
        if tokens.numel() and not (0 <= int(tokens.min()) and int(tokens.max()) < d_vocab):
            raise ValueError(f"Token ids must lie in [0, {d_vocab}); got {tokens.tolist()}.")
        W_U = self.model.W_U.detach()
        directions = W_U[:, tokens.to(W_U.device)].movedim(0, -1)  # [*tokens, d_model]
        ln_weight = applied_weight(self.model.ln_final)
        if ln_weight is not None:
            directions = directions * ln_weight.detach()
        return directions
