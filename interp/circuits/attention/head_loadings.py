"""Head loadings: an edge of the attribution graph split over the attention heads its
paths run through (Kamath, Ameisen et al. 2025, "Tracing Attention Computation Through
Feature Interactions").

In the frozen replacement model (patterns and norm scales frozen, MLPs replaced by their
transcoders' skip paths) an edge ``A[t, s]`` is a sum over paths from the source's write to
the target's read. Between two layers a path either stays in the residual stream (or a skip
path) or runs through one head's OV circuit (``W_V``, the frozen pattern, ``W_O``, with the
frozen ``ln1`` and ``ln1_post``), so it meets at most one head per layer.

**The last-head rule.** A path through heads in several layers counts once, for the head of
its highest layer. With ``E(l, X)`` the edge when the heads of the layers below ``l`` are
all kept, at layer ``l`` only the heads in ``X``, above ``l`` none::

    heads[l, h] = E(l, {h}) - E(l, {})     (the paths whose last head is (l, h))
    bypass      = E(0, {})                 (every head's OV path removed)

Paths are multilinear in the heads kept, so ``sum_h heads[l, h] = E(l, all) - E(l, {})``
and ``E(l, all) = E(l + 1, {})``: the sum telescopes, ``bypass + heads.sum() = E(n_layers,
{}) = A[t, s]``, exact in exact arithmetic (to rounding in floats).

**How it is computed.** One batched backward pass a target: the bypass row runs the
backward with no head at all; at each layer ``l`` its gradient at the attention output,
sent back through head ``h`` alone, starts the row of ``(l, h)``, which continues with every
head below. Each row, dotted at each transcoder output and at the embedding with the
sources' vectors (as ``attribute`` does), gives that head's loading of every edge into the
target at once.

Example:
    >>> from interp.circuits import ReplacementModel, attribute
    >>> replacement = ReplacementModel.from_pretrained(
    ...     "shakespeare-char", "shakespeare-char-transcoders")
    >>> graph = attribute("ROMEO:", replacement, max_feature_nodes=8, batch_size=64)
    >>> target = graph.adjacency_matrix.shape[0] - 1           # the last logit
    >>> source = int(graph.adjacency_matrix[target].abs().argmax())
    >>> loadings = head_loadings(replacement, graph, target, source)
    >>> loadings.heads.shape                                    # [n_layers, n_heads]
    torch.Size([4, 4])
    >>> edge = graph.adjacency_matrix[target, source]
    >>> bool(torch.isclose(loadings.heads.sum() + loadings.bypass, edge, atol=1e-5))
    True
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.circuits.attention.frozen import FrozenRun, check_pair
from interp.circuits.attribution.rows import _gradient_rows
from interp.circuits.backward import FrozenBackward, _Layer, unsupported
from interp.circuits.graph import Graph
from interp.circuits.replacement_model import ReplacementModel
from interp.circuits.sparse_graph import entries

RULE = "last-head"


@dataclass
class HeadLoadings:
    """The edges ``adjacency_matrix[target, sources]`` split over heads (module docstring).

    ``heads`` [n_layers, n_heads] and ``bypass`` a scalar for one source; with several
    sources, ``heads`` [n_layers, n_heads, n_sources] and ``bypass`` [n_sources].
    ``edge``: the graph's entries; ``bypass + heads.sum((0, 1)) == edge`` to rounding.
    """

    target: int
    sources: Tensor
    heads: Tensor
    bypass: Tensor
    edge: Tensor
    rule: str = RULE

    @property
    def residual(self) -> Tensor:
        """``edge - bypass - heads.sum()``: float rounding."""
        return self.edge - self.bypass - self.heads.sum((0, 1))

    def top(self, k: int = 5, source: int = 0) -> list[tuple[int, int, float]]:
        """The ``k`` heads of largest ``|loading|`` (of the ``source``-th source when there
        are several): (layer, head, loading)."""
        heads = self.heads if self.heads.ndim == 2 else self.heads[..., source]
        order = heads.flatten().abs().argsort(descending=True)[:k]
        n_heads = heads.shape[1]
        return [(int(i) // n_heads, int(i) % n_heads, float(heads.flatten()[i])) for i in order]


def _per_head_transpose(layer: _Layer, grad: Float[Tensor, "n q d_model"]) -> Tensor:
    """The gradient at ``resid_pre`` through each head alone, from the one at the
    attention output: [n, n_heads, q, d_model]."""
    n, q, d_model = grad.shape
    h, kv, d_head = layer.n_heads, layer.n_kv_heads, layer.d_head
    grad = layer.ln1_post.transpose(grad)
    grad_z = (grad.reshape(n * q, d_model) @ layer.W_O_t).view(n, q, h, d_head)
    grad_v = torch.einsum("hkq,nqhe->nhke", layer.pattern_t[:, :q, :q], grad_z)  # [n,h,k,e]
    kv_of_head = torch.arange(h, device=grad.device) // (h // kv)  # GQA: a query head's kv head
    W_V = layer.W_V_t.view(kv, d_head, d_model)[kv_of_head]  # [h, d_head, d_model]
    per_head = torch.einsum("nhke,hed->nhkd", grad_v, W_V).reshape(n * h, q, d_model)
    return layer.ln1.transpose(per_head).view(n, h, q, d_model)


def head_gradients(
    backward: FrozenBackward, layer: int, position: int, inject: Float[Tensor, " d_model"]
) -> Iterator[tuple[int, Float[Tensor, "n q d_model"]]]:
    """The gradients of one target's rows (module docstring), as ``FrozenBackward.gradients``
    yields them: (sink, gradient of the first ``n`` rows). Row 0 is the bypass; row
    ``1 + i * n_heads + h`` is head ``h`` of layer ``top - i``, where ``top`` is the highest
    layer below the target (``layer`` for a feature read after attention)."""
    d_model, dtype = backward.d_model, backward.dtype
    q = position + 1 if backward.causal else backward.n_pos
    inject = inject.to(dtype)
    bypass = inject.new_zeros(1, q, d_model)  # at resid_post of the current layer
    rows = inject.new_zeros(0, q, d_model)  # head rows, every head below them kept
    top = layer
    if layer == backward.n_layers:
        bypass[0, position] = inject
        bypass = backward.ln_final.transpose(bypass)
        top -= 1
    for index in range(top, -1, -1):
        frozen = backward.layers[index]
        grads = torch.cat([bypass, rows])
        out = frozen.output_transpose(grads)  # at the transcoder output
        if index < layer:
            yield index, out
        grad_in = None  # at the transcoder input: the skip path, and the target's injection
        if frozen.skip_t is not None or index == layer:
            grad_in = inject.new_zeros(len(grads), q, d_model)
            if frozen.skip_t is not None:
                grad_in = out @ frozen.skip_t
            if index == layer:
                grad_in[0, position] += inject
        from_mlp = 0.0 if grad_in is None else frozen.input_norm.transpose(grad_in)
        at_attention = grads if frozen.parallel else grads + from_mlp  # its output's gradient
        new_rows = _per_head_transpose(frozen, at_attention[:1])[0]  # [n_heads, q, d_model]
        rows = frozen.block_transpose(rows, None if grad_in is None else grad_in[1:])
        bypass = (grads[:1] + from_mlp[:1]) if grad_in is not None else grads[:1]
        rows = torch.cat([rows, new_rows])
    yield backward.n_layers, torch.cat([bypass, rows])


def _check_unsupported(model: ReplacementModel) -> None:
    why = unsupported(model)
    if why is not None:
        raise ValueError(
            f"Head loadings need the written-out backward pass, which does not cover {why}; "
            "remove the hooks or SAEs, or use a model without per-head attention inputs."
        )


@torch.no_grad()
def target_rows(
    model: ReplacementModel, run: FrozenRun, target: int
) -> tuple[Float[Tensor, " nodes"], Float[Tensor, "n_layers n_heads nodes"]]:
    """(bypass [nodes], heads [n_layers, n_heads, nodes]) of every edge into ``target``."""
    layer, position, inject = run.target_injection(target)
    gradients = head_gradients(run.backward(), layer, position, inject)
    top = min(layer, run.n_layers - 1)
    n_rows = 1 + (top + 1) * run.n_heads
    rows = run.to_graph_columns(_gradient_rows(run.sources, gradients, n_rows, run.dtype))
    heads = rows.new_zeros(run.n_layers, run.n_heads, rows.shape[1])
    heads[: top + 1] = rows[1:].view(top + 1, run.n_heads, -1).flip(0)
    return rows[0].cpu(), heads.cpu()


def head_loadings(
    model: ReplacementModel,
    graph: Graph,
    target: int,
    source: int | Sequence[int] | Tensor | None = None,
    *,
    frozen_run: FrozenRun | None = None,
) -> HeadLoadings:
    """The edge(s) ``graph.adjacency_matrix[target, source]`` split over the heads of
    ``model`` (the ReplacementModel the graph was traced with): see the module docstring.

    ``source`` one node index (``heads`` [n_layers, n_heads]), several, or None for every
    node (``heads`` [n_layers, n_heads, nodes]): all edges into ``target`` come from one
    batched backward pass. ``frozen_run`` reuses a ``FrozenRun`` of the graph's prompt.
    """
    check_pair(model, graph, "head_loadings")
    _check_unsupported(model)
    run = frozen_run if frozen_run is not None else FrozenRun(model, graph)
    target = run.check_node(target, "target")
    if source is None:
        sources = torch.arange(run.n_nodes)
    elif isinstance(source, (int, Tensor)) and torch.as_tensor(source).ndim == 0:
        sources = torch.tensor([run.check_node(source, "source")])
    else:
        sources = torch.tensor(
            [run.check_node(s, "source") for s in list(source)], dtype=torch.long
        )
    bypass, heads = target_rows(model, run, target)
    targets = torch.full_like(sources, target)
    edge = entries(graph.adjacency_matrix, targets, sources).cpu().to(run.dtype)
    bypass, heads = bypass[sources], heads[..., sources]
    if isinstance(source, int) or (isinstance(source, Tensor) and source.ndim == 0):
        bypass, heads, edge = bypass[0], heads[..., 0], edge[0]
    return HeadLoadings(target, sources, heads, bypass, edge)
