"""The residual stream at one position, entering one layer, as a sum of terms: what each
graph node wrote there itself, and named rows for the rest.

``resid_pre[layer][pos] = hook_embed + pos_embed + sum over layers i < layer of (attention
output + MLP output)``, and each piece splits further:

- the token node: ``hook_embed`` at ``pos`` (its embedding row as the model adds it);
- a learned position embedding: the named row ``"pos embed"`` (rotary and ALiBi models have
  none; a shortformer's is added to the queries and keys only, see ``qk_attribution``);
- attention of layer ``i``: one named row per head (``z @ W_O[h]``) and one for ``b_O``,
  through ``ln1_post`` (frozen scale; a LayerNorm's centring applies to each term and its
  bias is a row of its own) where the block has sandwich norms;
- the transcoder of layer ``i`` (the MLP's output, which it reconstructs up to the error):
  each active feature writing there (``activation * decoder vector``; per-layer
  transcoders: layer ``i``'s features; cross-layer: every earlier layer's too, summed into
  one term a feature) -- the feature's node when the graph selected it, else the row
  ``"features not in the graph"`` -- its error node, and the rows ``"transcoder bias"``
  and ``"transcoder skip"``; through ``ln2_post`` when the transcoder writes before it.
  At the positions the graph ignores (position 0) the MLP output is one row.

Every term is float64; they sum to the recorded ``resid_pre`` up to the model's rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.circuits.attention.frozen import FrozenRun
from interp.components.norms import LayerNorm, applied_weight

F64 = torch.float64


@dataclass
class ResidualTerms:
    """Terms by key: a graph node index (int) or a named row (str), in insertion order."""

    vectors: dict[int | str, Tensor] = field(default_factory=dict)

    def add(self, key: int | str, vector: Tensor) -> None:
        vector = vector.to(F64)
        if key in self.vectors:
            self.vectors[key] = self.vectors[key] + vector
        else:
            self.vectors[key] = vector

    def keys(self) -> list[int | str]:
        return list(self.vectors)

    def matrix(self) -> Float[Tensor, "n d"]:
        return torch.stack(list(self.vectors.values()))


class FrozenNorm:
    """A norm with its scale frozen at one position, as the affine map it then is:
    ``linear(v)`` for each term (centred for a LayerNorm, times weight / scale) and ``bias``
    (None when there is none)."""

    def __init__(self, norm: nn.Module | None, scale: Tensor | None) -> None:
        self.identity = norm is None or isinstance(norm, nn.Identity)
        if self.identity:
            self.bias = None
            return
        self.centred = isinstance(norm, LayerNorm)
        weight = applied_weight(norm)
        self.factor = scale.to(F64).reciprocal()  # [1] or [.., 1]
        if weight is not None:
            self.factor = self.factor * weight.detach().to(F64)
        bias = getattr(norm, "b", None)
        self.bias = None if bias is None else bias.detach().to(F64)

    def linear(self, vectors: Float[Tensor, "... d"]) -> Float[Tensor, "... d"]:
        if self.identity:
            return vectors
        if self.centred:
            vectors = vectors - vectors.mean(-1, keepdim=True)
        return vectors * self.factor


def frozen_norm(run: FrozenRun, module: nn.Module | None, hook: str, pos: int) -> FrozenNorm:
    """``module`` (hook prefix ``hook``, e.g. ``blocks.2.ln1``) frozen at position ``pos``."""
    if module is None or isinstance(module, nn.Identity):
        return FrozenNorm(None, None)
    scale = run.run.frozen[f"{hook}.hook_scale"][0, pos]  # [1] or [n_heads, 1]
    return FrozenNorm(module, scale)


def _attention_terms(run: FrozenRun, layer: int, pos: int, terms: ResidualTerms) -> None:
    block = run.model.blocks[layer]
    post = frozen_norm(run, getattr(block, "ln1_post", None), f"blocks.{layer}.ln1_post", pos)
    z = run.recorded[f"blocks.{layer}.attn.hook_z"][pos].to(F64)  # [n_heads, d_head]
    W_O = block.attn.W_O.detach().to(F64)  # [n_heads, d_head, d_model]
    per_head = torch.einsum("he,hed->hd", z, W_O)
    for head in range(run.n_heads):
        terms.add(f"attn L{layer}.H{head}", post.linear(per_head[head]))
    terms.add(f"attn L{layer} b_O", post.linear(block.attn.b_O.detach().to(F64)))
    if post.bias is not None:
        terms.add(f"L{layer} ln1_post bias", post.bias)


def _transcoder_terms(run: FrozenRun, layer: int, pos: int, terms: ResidualTerms) -> None:
    model, sources = run.model, run.sources
    block = model.blocks[layer]
    through_post = model.feature_output_hook == "mlp.hook_out" and hasattr(block, "ln2_post")
    post = frozen_norm(
        run, block.ln2_post if through_post else None, f"blocks.{layer}.ln2_post", pos
    )
    ignored = range(run.n_pos)[model.zero_positions]
    if pos in ignored:
        output = run.run.output_values[layer][0, pos]
        terms.add(f"L{layer} MLP output (position {pos} is not in the graph)", post.linear(output))
    else:
        writes = sources.writes[layer]
        start, end = writes.offsets[pos], writes.offsets[pos + 1]
        to_node = run.active_to_node()
        for column, vector in zip(
            writes.columns[start:end].tolist(), writes.vectors[start:end], strict=True
        ):
            node = to_node.get(column)
            key = node if node is not None else f"L{layer} features not in the graph"
            terms.add(key, post.linear(vector.to(F64)))
        error_node = run.n_features + layer * run.n_pos + pos
        terms.add(error_node, post.linear(sources.errors[layer, pos].to(F64)))
        tcs = model.transcoders
        terms.add(f"L{layer} transcoder bias", post.linear(tcs.decoder_bias(layer).to(F64)))
        x = run.run.inputs[layer][0, pos].detach()
        skip = tcs.skip(layer, x) if tcs.skip_connection else None
        if skip is not None:
            terms.add(f"L{layer} transcoder skip", post.linear(skip.detach().to(F64)))
    if post.bias is not None:
        terms.add(f"L{layer} ln2_post bias", post.bias)


@torch.no_grad()
def residual_terms(run: FrozenRun, layer: int, pos: int) -> ResidualTerms:
    """The terms of ``resid_pre`` of ``layer`` at ``pos`` (see the module docstring)."""
    terms = ResidualTerms()
    token_node = run.n_features + run.n_layers * run.n_pos + pos
    terms.add(token_node, run.recorded["hook_embed"][pos])
    if run.model.cfg.positional_embedding_type == "standard":
        terms.add("pos embed", run.recorded["hook_pos_embed"][pos])
    for i in range(layer):
        _attention_terms(run, i, pos, terms)
        _transcoder_terms(run, i, pos, terms)
    return terms
