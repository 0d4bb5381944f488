"""Residual-stream decompositions of an ActivationCache: the stream entering a layer as
it accumulated (``accumulated_resid``, the logit lens's input) or split into the outputs
added to it (``decompose_resid``, ``get_full_resid_decomposition``).

Stacks put the component axis first: [component, batch, pos, d_model] (no batch axis after
remove_batch_dim; no pos axis when pos_slice is an int). A ``layer`` argument names the
residual stream entering that block: 0 is the embeddings, n_layers (or -1, or None) the
stream entering the unembed.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from interp.cache.positions import PosSlice, slice_positions


class ResidDecompositionMixin:
    """The residual stream, accumulated or decomposed; ``ActivationCache`` inherits it (with
    ``ComponentStackMixin`` for heads and neurons and ``LogitAttributionMixin`` for
    ``apply_ln_to_stack``)."""

    cache_dict: dict[str, Tensor]
    model: Any
    has_batch_dim: bool

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
        cached scale of the layer norm that reads ``layer`` (see ``apply_ln_to_stack``); for
        the final layer, as in TransformerLens 2.18, it runs ``ln_final`` on each stage with
        its own statistics (``recompute_ln``: the logit lens), since each stage is a whole
        stream rather than a part of one.

        Example:
            >>> stack, labels = cache.accumulated_resid(return_labels=True)
            >>> stack.shape, labels   # [n_layers + 1, batch, pos, d_model]
            (torch.Size([3, 1, 21, 128]), ['0_pre', '1_pre', 'final_post'])
            >>> shakespeare = interp.load_model("shakespeare-char")   # with MLPs: mid streams
            >>> _, mlp_cache = shakespeare.run_with_cache("To be, or not to be")
            >>> stack, labels = mlp_cache.accumulated_resid(incl_mid=True, return_labels=True)
            >>> stack.shape, labels[:3]   # [2 * n_layers + 1, batch, pos, d_model]
            (torch.Size([9, 1, 19, 128]), ['0_pre', '0_mid', '1_pre'])
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
            final = layer == n_layers
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice, recompute_ln=final)
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
            >>> labels
            ['embed', 'pos_embed', '0_attn_out', '1_attn_out']
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
            >>> labels   # heads, then MLP layers (none in attn-only-2l), embeddings, biases
            ['L0H0', 'L1H0', 'embed', 'pos_embed', 'bias']
            >>> stack.shape   # [component, batch, pos, d_model]
            torch.Size([5, 1, 21, 128])
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
        rotary = self.model.cfg.positional_embedding_type in ("rotary", "alibi")
        return ["embed"] if rotary else ["embed", "pos_embed"]

    def _attn_before_mlp(self, mlp_input: bool) -> bool:
        """Whether the stream an MLP reads (``mlp_input``) holds its own block's attention:
        not in parallel blocks, whose MLP reads ``resid_pre``."""
        return mlp_input and not self.model.cfg.parallel_attn_mlp

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
