"""Logit attribution on an ActivationCache: a stack of residual components as a layer
norm sees it (``apply_ln_to_stack``) and how much each pushes up a token's logit
(``logit_attrs``, direct logit attribution)."""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.cache.positions import PosSlice, slice_positions
from interp.components.norms import applied_weight
from interp.utils import Slice


class LogitAttributionMixin:
    """Layer norm and unembedding applied to residual stacks; ``ActivationCache`` inherits it
    (with ``ResidDecompositionMixin`` for the layer numbering)."""

    cache_dict: dict[str, Tensor]
    model: Any
    has_batch_dim: bool

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
