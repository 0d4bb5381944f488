"""Weight views: the model's parameters as TransformerLens exposes them on the model, each
per-block weight stacked on a leading layer axis (``W_Q`` [n_layers, n_heads, d_model,
d_head], ...), the embedding and unembedding, the QK and OV circuits as ``FactoredMatrix``
and tokens' unembedding directions.

Example:
    >>> model.W_Q.shape   # [n_layers, n_heads, d_model, d_head]
    torch.Size([2, 1, 128, 64])
    >>> model.OV[1, 0].eigenvalues.shape   # layer 1, head 0: [d_head]
    torch.Size([64])
"""

from __future__ import annotations

import operator

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.analysis.factored_matrix import FactoredMatrix


class WeightViewsMixin:
    """TransformerLens's weight properties; the class using it has ``cfg``, ``embed``,
    ``pos_embed`` (with learned positions), ``blocks``, ``unembed``, ``device`` and
    ``to_single_token``."""

    def _stack(self, path: str) -> Tensor:
        """One weight of every block (a parameter, or a property such as grouped-query
        attention's expanded ``W_K``), stacked on a leading layer axis."""
        if path.startswith("mlp.") and self.cfg.num_experts:
            name = path.removeprefix("mlp.")
            raise ValueError(
                f"This model's MLPs are mixtures of {self.cfg.num_experts} experts: no single "
                f"{name}; each expert has its own (blocks[i].mlp.experts[e].{name}), and the "
                "router is blocks[i].mlp.W_gate."
            )
        # Laid over devices: stacked on the first block's device.
        weights = [operator.attrgetter(path)(block) for block in self.blocks]
        return torch.stack([weight.to(weights[0].device) for weight in weights])

    @property
    def W_E(self) -> Float[Tensor, "d_vocab d_model"]:
        return self.embed.W_E

    @property
    def W_pos(self) -> Float[Tensor, "n_ctx d_model"]:
        if self.cfg.positional_embedding_type in ("rotary", "alibi"):
            raise ValueError(
                f"This model has {self.cfg.positional_embedding_type} position embeddings: "
                "no W_pos (positions act inside attention: rotating the queries and keys, or "
                "biasing the scores)."
            )
        return self.pos_embed.W_pos

    @property
    def W_U(self) -> Float[Tensor, "d_model d_vocab"]:
        return self.unembed.W_U

    @property
    def b_U(self) -> Float[Tensor, " d_vocab"]:
        return self.unembed.b_U

    def tokens_to_residual_directions(
        self, tokens: str | int | Int[Tensor, "..."]
    ) -> Float[Tensor, "... d_model"]:
        """Each token's unembedding direction, its column of ``W_U``: a token's text, an id
        or a 1-element tensor gives [d_model]; a tensor of ids [...] gives [..., d_model].
        Fold the final LayerNorm first (``from_pretrained``'s default) or the directions
        miss its scale.

        Example:
            >>> model.tokens_to_residual_directions("7").shape   # [d_model]
            torch.Size([128])
            >>> model.tokens_to_residual_directions(torch.tensor([7, 8])).shape
            torch.Size([2, 128])
        """
        if isinstance(tokens, str):
            return self.W_U[:, self.to_single_token(tokens)]
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            tokens = torch.tensor(tokens)
        if (
            not isinstance(tokens, Tensor)
            or tokens.dtype == torch.bool
            or tokens.is_floating_point()
            or tokens.is_complex()
        ):
            raise TypeError(
                f"tokens must be a token's text, an id or an integer tensor of ids, got {tokens!r}."
            )
        low, high = (int(tokens.min()), int(tokens.max())) if tokens.numel() else (0, 0)
        if low < 0 or high >= self.cfg.d_vocab:
            raise ValueError(
                f"Token id {low if low < 0 else high} is outside the vocabulary "
                f"[0, {self.cfg.d_vocab}); check that the ids come from this model's tokenizer."
            )
        if tokens.numel() == 1:  # one token gives one direction, whatever the tensor's shape
            return self.W_U[:, int(tokens.item())]
        return self.W_U[:, tokens.to(self.device, torch.long)].movedim(0, -1)

    @property
    def W_Q(self) -> Float[Tensor, "n_layers n_heads d_model d_head"]:
        return self._stack("attn.W_Q")

    @property
    def W_K(self) -> Float[Tensor, "n_layers n_heads d_model d_head"]:
        return self._stack("attn.W_K")

    @property
    def W_V(self) -> Float[Tensor, "n_layers n_heads d_model d_head"]:
        return self._stack("attn.W_V")

    @property
    def W_O(self) -> Float[Tensor, "n_layers n_heads d_head d_model"]:
        return self._stack("attn.W_O")

    @property
    def b_Q(self) -> Float[Tensor, "n_layers n_heads d_head"]:
        return self._stack("attn.b_Q")

    @property
    def b_K(self) -> Float[Tensor, "n_layers n_heads d_head"]:
        return self._stack("attn.b_K")

    @property
    def b_V(self) -> Float[Tensor, "n_layers n_heads d_head"]:
        return self._stack("attn.b_V")

    @property
    def b_O(self) -> Float[Tensor, "n_layers d_model"]:
        return self._stack("attn.b_O")

    @property
    def W_in(self) -> Float[Tensor, "n_layers d_model d_mlp"]:
        return self._stack("mlp.W_in")

    @property
    def W_gate(self) -> Float[Tensor, "n_layers d_model d_mlp"]:
        """The gate projections of a gated MLP (``cfg.gated_mlp``)."""
        return self._stack("mlp.W_gate")

    @property
    def W_out(self) -> Float[Tensor, "n_layers d_mlp d_model"]:
        return self._stack("mlp.W_out")

    @property
    def b_in(self) -> Float[Tensor, "n_layers d_mlp"]:
        return self._stack("mlp.b_in")

    @property
    def b_out(self) -> Float[Tensor, "n_layers d_model"]:
        return self._stack("mlp.b_out")

    @property
    def QK(self) -> FactoredMatrix:
        """Each head's QK circuit ``W_Q @ W_K^T``, never materialised:
        [n_layers, n_heads, d_model, d_model]."""
        return FactoredMatrix(self.W_Q, self.W_K.transpose(-2, -1))

    @property
    def OV(self) -> FactoredMatrix:
        """Each head's OV circuit ``W_V @ W_O``, never materialised:
        [n_layers, n_heads, d_model, d_model]."""
        return FactoredMatrix(self.W_V, self.W_O)
