"""Per-component stacks of an ActivationCache: what each attention head
(``stack_head_results``) and each MLP neuron (``get_neuron_results``,
``stack_neuron_results``) wrote into the residual stream, and any activation stacked over
layers (``stack_activation``).

With sandwich norms (Gemma 2 and 3) each component is taken through its block's post-norm
(``ln1_post``/``ln2_post``) with the cached scale, as it is added to the stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.analysis.labels import neuron_labels
from interp.cache.positions import PosSlice, slice_positions
from interp.components.norms import applied_weight
from interp.utils import Slice, get_act_name


class ComponentStackMixin:
    """Head and neuron outputs as stacks; ``ActivationCache`` inherits it (with
    ``ResidDecompositionMixin`` for the layer numbering and remainder, and
    ``LogitAttributionMixin`` for ``apply_ln_to_stack``)."""

    cache_dict: dict[str, Tensor]
    model: Any
    has_batch_dim: bool

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
            torch.Size([2, 1, 1, 21, 21])
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
            torch.Size([2, 1, 21, 128])
            >>> labels
            ['L0H0', 'L1H0']
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
            >>> shakespeare = interp.load_model("shakespeare-char")   # a model with MLPs
            >>> _, shakespeare_cache = shakespeare.run_with_cache("To be, or not to be")
            >>> shakespeare_cache.get_neuron_results(0, neuron_slice=[3, 7]).shape
            torch.Size([1, 19, 2, 128])
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
            >>> shakespeare = interp.load_model("shakespeare-char")   # a model with MLPs
            >>> _, shakespeare_cache = shakespeare.run_with_cache("To be, or not to be")
            >>> neurons, labels = shakespeare_cache.stack_neuron_results(1, return_labels=True)
            >>> neurons.shape   # [d_mlp, batch, pos, d_model]: layer 0's 512 neurons
            torch.Size([512, 1, 19, 128])
            >>> labels[:2]
            ['L0N0', 'L0N1']
        """
        layer = self._resid_layer(layer)
        neurons = self._neuron_indices(neuron_slice)
        per_layer = [self.get_neuron_results(i, neurons, pos_slice) for i in range(layer)]
        labels = neuron_labels(range(layer), neurons.tolist())
        return self._finish_component_stack(
            per_layer, labels, layer, pos_slice, incl_remainder, apply_ln, return_labels
        )

    # -------------------------------------------------------------------------- helpers
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
        if self.model.cfg.num_experts:  # Mixtral, gpt-oss, ...: no layer-wide hook_post
            raise ValueError(
                "This model's MLPs are mixtures of experts: each expert has its own neurons "
                "(blocks.L.mlp.experts.E.hook_post, weighted by the router), so a layer has no "
                "neuron results to stack. Take each layer's MoE output as one component: "
                "get_full_resid_decomposition(expand_neurons=False) or "
                "decompose_resid(mode='mlp')."
            )
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
