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
        residual_stack: Float[Tensor, "*component *batch_and_pos d_model"],
        layer: int | None = None,
        mlp_input: bool = False,
        pos_slice: PosSlice = None,
        batch_slice: PosSlice = None,
        has_batch_dim: bool = True,
        recompute_ln: bool = False,
    ) -> Float[Tensor, "*component *batch_and_pos d_model"]:
        """Each component as the layer norm reading ``layer`` sees it: centred and divided by
        that norm's cached scale (``ln1``, ``ln2`` with ``mlp_input``, or ``ln_final`` for
        ``layer=n_layers``/-1/None).

        The stack ends in the cache's batch and position axes (as ``pos_slice`` left them),
        then d_model; any number of component axes may come before them (none:
        ``[batch, pos, d_model]``; several: ``[layer, head, batch, d_model]``), as
        TransformerLens's broadcasting allows. ``has_batch_dim=False`` says the stack has no
        batch axis (pick its example's scale with an int ``batch_slice``); otherwise
        ``batch_slice`` is applied to the stack's batch axis and to the scale.

        One scale per position, shared by all components, keeps the stack linear: its sum is
        the normalised stream. As in TransformerLens the norm's weight and bias are not
        applied (``logit_attrs`` folds ``ln_final.w`` into its directions instead). Models
        without layer norm get the stack back unchanged (batch-sliced).

        ``recompute_ln=True`` with the final layer (TransformerLens's logit-lens mode) instead
        runs ``ln_final`` itself on each component, with statistics recomputed from that
        component and the norm's weight and bias applied; the stack is then no longer linear.
        For other layers it is ignored, as in TransformerLens.

        Example:
            >>> shakespeare = interp.load_model("shakespeare-char")   # LN, 4 layers x 4 heads
            >>> _, cache = shakespeare.run_with_cache("To be, or not to be")   # [1, 19] tokens
            >>> stack = cache.apply_ln_to_stack(cache.decompose_resid(pos_slice=-1), pos_slice=-1)
            >>> stack.shape   # [component, batch, d_model]
            torch.Size([10, 1, 128])
            >>> lens = cache.apply_ln_to_stack(cache.accumulated_resid(), recompute_ln=True)
            >>> lens.shape   # [layer + 1, batch, pos, d_model]
            torch.Size([5, 1, 19, 128])
            >>> heads = cache.stack_head_results(pos_slice=-1).unflatten(0, (4, 4))
            >>> cache.apply_ln_to_stack(heads, pos_slice=-1).shape  # [layer, head, batch, d_model]
            torch.Size([4, 4, 1, 128])
        """
        layer = self._resid_layer(layer, mlp_input)
        batch_slice = batch_slice if isinstance(batch_slice, Slice) else Slice(batch_slice)
        residual_stack = self._slice_stack_batch(
            residual_stack, pos_slice, batch_slice, has_batch_dim
        )
        normalization = self.model.cfg.normalization_type
        if normalization is None:
            return residual_stack
        if recompute_ln and layer == self.model.cfg.n_layers:
            return self.model.ln_final(residual_stack)
        if layer == self.model.cfg.n_layers:
            scale_name = "ln_final.hook_scale"
        else:
            scale_name = f"blocks.{layer}.ln{2 if mlp_input else 1}.hook_scale"
        scale = self._stack_scale(scale_name, pos_slice, batch_slice, has_batch_dim)
        batch_pos = scale.shape[:-1]
        if residual_stack.shape[residual_stack.ndim - 1 - len(batch_pos) : -1] != batch_pos:
            raise ValueError(
                f"The stack's shape {tuple(residual_stack.shape)} does not end in the cached "
                f"scale's batch/position shape {tuple(batch_pos)} (then d_model): pass the "
                "pos_slice (and batch_slice, has_batch_dim) the stack was built with."
            )
        if normalization in ("LN", "LNPre"):  # RMS norms divide without centring
            residual_stack = residual_stack - residual_stack.mean(dim=-1, keepdim=True)
        return residual_stack / scale.to(residual_stack)

    def logit_attrs(
        self,
        residual_stack: Float[Tensor, "*component *batch_and_pos d_model"],
        tokens: str | int | Int[Tensor, "..."],
        incorrect_tokens: str | int | Int[Tensor, "..."] | None = None,
        pos_slice: PosSlice = None,
        batch_slice: PosSlice = None,
        has_batch_dim: bool = True,
    ) -> Float[Tensor, "*component *batch_and_pos"]:
        """How much each component pushes up the logit of ``tokens`` (minus that of
        ``incorrect_tokens``): the final layer norm's cached scale applied to the component,
        dotted with the token's unembedding direction ``ln_final.w * W_U[:, token]``.

        Pass the stack *without* ``apply_ln`` (this applies the final norm itself, as in
        TransformerLens; ``pos_slice``, ``batch_slice`` and ``has_batch_dim`` are as in
        ``apply_ln_to_stack``, so the stack may have any number of component axes). The
        attributions sum to the logit (difference) at those positions less the constant
        ``ln_final.b @ W_U + b_U`` term. ``tokens`` is a token string, an id, a ``[batch]``
        tensor (one token per example, shared over positions) or a ``[batch, pos]`` tensor,
        for the examples and positions the stack keeps (after ``batch_slice``);
        ``incorrect_tokens`` has the same shape.

        Example:
            >>> # Predicting the repeat's last token from position -2, against the one before:
            >>> stack, labels = cache.decompose_resid(pos_slice=-2, return_labels=True)
            >>> attrs = cache.logit_attrs(stack, tokens[:, -1], tokens[:, -2], pos_slice=-2)
            >>> attrs.shape   # [component, batch]
            torch.Size([4, 1])
            >>> labels[attrs[:, 0].argmax()]   # layer 1's attention: the induction head
            '1_attn_out'
        """
        batch_slice = batch_slice if isinstance(batch_slice, Slice) else Slice(batch_slice)
        directions = self._unembed_directions(tokens)
        if incorrect_tokens is not None:
            incorrect_directions = self._unembed_directions(incorrect_tokens)
            if incorrect_directions.shape != directions.shape:
                raise ValueError(
                    f"tokens and incorrect_tokens must have the same shape; got "
                    f"{tuple(directions.shape[:-1])} and {tuple(incorrect_directions.shape[:-1])}."
                )
            directions = directions - incorrect_directions
        scaled = self.apply_ln_to_stack(
            residual_stack,
            pos_slice=pos_slice,
            batch_slice=batch_slice,
            has_batch_dim=has_batch_dim,
        )
        stack_has_batch, n_axes = self._stack_batch_pos_axes(pos_slice, has_batch_dim)
        batch_kept = stack_has_batch and batch_slice.mode != "int"
        n_axes -= stack_has_batch and not batch_kept
        token_shape = directions.shape[:-1]
        if len(token_shape) == 1 and batch_kept and n_axes == 2:
            directions = directions[:, None]  # one token per example, for every position
        batch_pos = scaled.shape[scaled.ndim - 1 - n_axes : -1]
        if not _broadcasts_onto(directions.shape[:-1], batch_pos):
            raise ValueError(
                f"Tokens of shape {tuple(token_shape)} do not fit a stack of shape "
                f"{tuple(residual_stack.shape)} (batch/position axes {tuple(batch_pos)} after "
                "the slices): give one token per example ([batch]) or per example and kept "
                "position ([batch, pos]), for the examples batch_slice keeps."
            )
        return (scaled * directions.to(scaled)).sum(dim=-1)

    # -------------------------------------------------------------------------- helpers
    def _stack_batch_pos_axes(self, pos_slice: PosSlice, has_batch_dim: bool) -> tuple[bool, int]:
        """Whether a stack has a batch axis, and how many batch/position axes come before its
        d_model axis (before any int ``batch_slice`` drops the batch axis)."""
        pos = pos_slice if isinstance(pos_slice, Slice) else Slice(pos_slice)
        stack_has_batch = self.has_batch_dim and has_batch_dim
        return stack_has_batch, int(stack_has_batch) + int(pos.mode != "int")

    def _slice_stack_batch(
        self, stack: Tensor, pos_slice: PosSlice, batch_slice: Slice, has_batch_dim: bool
    ) -> Tensor:
        """``stack`` with ``batch_slice`` applied to its batch axis (the one before its
        position axis, or before d_model when ``pos_slice`` is an int)."""
        if batch_slice.mode != "identity" and not self.has_batch_dim:
            raise ValueError(
                f"batch_slice={_shown(batch_slice)!r} needs a batch axis, and this cache has none "
                "(remove_batch_dim or an int batch slice dropped it): pass batch_slice=None."
            )
        stack_has_batch, n_axes = self._stack_batch_pos_axes(pos_slice, has_batch_dim)
        if stack.ndim < n_axes + 1:
            axes = ("batch, " if stack_has_batch else "") + (
                "pos, " if n_axes > stack_has_batch else ""
            )
            raise ValueError(
                f"A stack of shape {tuple(stack.shape)} lacks the axes [..., {axes}d_model] "
                f"this cache's activations have with pos_slice={pos_slice!r} and "
                f"has_batch_dim={has_batch_dim}: pass the pos_slice the stack was built with "
                "(an int drops the position axis), or has_batch_dim=False for a stack without "
                "a batch axis."
            )
        if stack_has_batch and batch_slice.mode != "identity":
            stack = batch_slice.apply(stack, dim=stack.ndim - 1 - n_axes)
        return stack

    def _stack_scale(
        self, scale_name: str, pos_slice: PosSlice, batch_slice: Slice, has_batch_dim: bool
    ) -> Float[Tensor, "*batch_and_pos 1"]:
        """The cached scale ``scale_name`` at the stack's examples and positions."""
        if scale_name not in self.cache_dict:
            raise KeyError(
                f"apply_ln needs the cached layer-norm scale {scale_name!r}; run run_with_cache "
                "with a names_filter that keeps it (or without a filter)."
            )
        scale = slice_positions(self.cache_dict[scale_name], pos_slice, -2)  # [*batch_pos, 1]
        if not self.has_batch_dim:
            return scale
        scale = batch_slice.apply(scale, dim=0)
        if not has_batch_dim and batch_slice.mode != "int":
            if scale.shape[0] != 1:
                raise ValueError(
                    "has_batch_dim=False says the stack has no batch axis, but batch_slice="
                    f"{_shown(batch_slice)!r} keeps {scale.shape[0]} examples of the cache: pass "
                    "the index of the stack's example as batch_slice (an int)."
                )
            scale = scale[0]
        return scale

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


def _shown(index: Slice) -> object:
    """What a ``Slice`` was made from, for messages (index arrays as lists)."""
    return index.slice.tolist() if hasattr(index.slice, "tolist") else index.slice


def _broadcasts_onto(shape: torch.Size, target: torch.Size) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``target`` without growing it."""
    try:
        return torch.broadcast_shapes(shape, target) == target
    except RuntimeError:
        return False
