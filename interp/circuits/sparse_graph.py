"""Sparse attribution graphs: an adjacency matrix that holds only its kept edges, and the
pruning and scores of ``graph.py`` computed on it without ever building the dense matrix.

A dense graph's ``adjacency_matrix`` is ``[nodes, nodes]``: at thousands of tokens, with
hundreds of thousands of active features, it does not fit in memory (circuit-tracer's
#92). ``attribute(..., sparse_threshold=t)`` keeps, in each row (the inputs of one target
node), the edges whose share of the row's absolute total is at least ``t``, and returns a
graph whose ``adjacency_matrix`` is a coalesced ``torch.sparse_coo_tensor`` (``t = 0``
keeps every nonzero edge: the same matrix as the dense graph, ``to_dense()`` bit-equal).

Everything that reads a graph reads the sparse one too: ``prune_graph`` (its ``edge_mask``
is then a sparse boolean matrix), ``compute_graph_scores``, ``compute_node_influence``,
``compute_edge_influence``, ``create_graph_files`` and the viewer. The influence is the
same power series as the dense one, ``w N + w N^2 + ...`` of the row-normalised matrix
``N``, each step a sparse vector-matrix product (``index_add`` over the edges), so memory
is the kept edges and a few vectors of length ``nodes``.

The approximation, at ``t > 0``: the dropped edges are gone (their influence with them),
and each row's kept edges are normalised by the kept total, so they weigh a little more
(each row's dropped share is at most ``t`` times its number of dropped edges). The pruning
of a sparse graph is exactly the dense pruning of the kept edges (tested); it keeps the same
nodes as the dense graph's only where no node's influence lies, within what the dropped
edges carried, of the node threshold's cut. Many small edges add up: on shakespeare-char's
graph of "ROMEO:\nIt seems she" (1,218 features, 394k edges; pruned at 0.8 / 0.98 to 70
nodes), ``t = 1e-4`` keeps 54% of the edges and changes 4 nodes' membership, ``1e-3``
keeps 18% and changes 13, ``1e-2`` keeps 4% and changes 29 (all near the cut). Use
``t = 0`` (every nonzero edge) where the dense pruning must be reproduced exactly, and a
small ``t`` where the graph would not fit otherwise.

Example:
    >>> from interp.circuits import ReplacementModel, attribute, prune_graph
    >>> tcs = "shakespeare-char-transcoders"
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
    >>> prompt = "ROMEO:\\nIt seems she hangs upon the chee"
    >>> graph = attribute(prompt, replacement, max_feature_nodes=32, sparse_threshold=0.01)
    >>> graph.adjacency_matrix.layout
    torch.sparse_coo
    >>> node_mask, edge_mask, cumulative = prune_graph(graph, node_threshold=0.8)
    >>> edge_mask.layout, int(node_mask.sum()) <= len(node_mask)
    (torch.sparse_coo, True)
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor


class Edges(NamedTuple):
    """A matrix's nonzero entries, sorted by target (row), then source (column)."""

    targets: Int[Tensor, " nnz"]
    sources: Int[Tensor, " nnz"]
    values: Float[Tensor, " nnz"]
    n: int


def is_sparse(matrix: Tensor) -> bool:
    """Whether ``matrix`` is a sparse (COO, CSR, ...) rather than a strided tensor."""
    return matrix.layout != torch.strided


def edges_of(matrix: Tensor) -> Edges:
    """The stored entries of a sparse square matrix, coalesced, in row-major order."""
    coo = matrix.to_sparse_coo() if matrix.layout != torch.sparse_coo else matrix
    coo = coo.coalesce()
    targets, sources = coo.indices()
    return Edges(targets, sources, coo.values(), coo.shape[0])


def sparse_matrix(edges: Edges) -> Tensor:
    """``edges`` as a coalesced ``[n, n]`` ``torch.sparse_coo_tensor``."""
    indices = torch.stack([edges.targets, edges.sources])
    return torch.sparse_coo_tensor(
        indices, edges.values, (edges.n, edges.n), is_coalesced=True, check_invariants=False
    ).coalesce()


def keep_share(
    rows: Float[Tensor, "batch cols"], threshold: float
) -> tuple[Int[Tensor, " nnz"], Int[Tensor, " nnz"], Float[Tensor, " nnz"]]:
    """(row, column, value) of the entries of ``rows`` that are nonzero and whose absolute
    value is at least ``threshold`` times their row's absolute total, row-major."""
    absolute = rows.abs()
    floor = threshold * absolute.sum(dim=1, keepdim=True)  # [batch, 1]
    keep = (absolute >= floor) & (absolute > 0)
    row, column = keep.nonzero(as_tuple=True)
    return row, column, rows[row, column]


def normalized_edges(edges: Edges) -> Edges:
    """``normalize_matrix`` on the stored entries: absolute values over their row's sum."""
    absolute = edges.values.abs()
    totals = absolute.new_zeros(edges.n).index_add_(0, edges.targets, absolute)
    return edges._replace(values=absolute / totals.clamp(min=1e-10)[edges.targets])


def vector_times(vector: Float[Tensor, " n"], edges: Edges) -> Float[Tensor, " n"]:
    """``vector @ matrix`` for the matrix ``edges`` holds."""
    products = vector[edges.targets] * edges.values
    return vector.new_zeros(edges.n).index_add_(0, edges.sources, products)


def sparse_influence(
    normalized: Edges, logit_weights: Float[Tensor, " n"], max_iter: int = 1000
) -> Float[Tensor, " n"]:
    """``compute_influence`` on a sparse matrix: ``w N + w N^2 + ...`` until it ends."""
    weights = logit_weights.to(normalized.values.dtype)
    current = vector_times(weights, normalized)
    influence = current.clone()
    for _ in range(max_iter):
        if not current.any():
            return influence
        current = vector_times(current, normalized)
        influence += current
    raise RuntimeError(f"Influence did not converge in {max_iter} steps: is the graph cyclic?")


def sparse_node_influence(
    adjacency: Tensor, logit_weights: Float[Tensor, " n"]
) -> Float[Tensor, " n"]:
    """``compute_node_influence`` for a sparse adjacency matrix."""
    return sparse_influence(normalized_edges(edges_of(adjacency)), logit_weights)


def sparse_edge_scores(edges: Edges, logit_weights: Float[Tensor, " n"]) -> Float[Tensor, " nnz"]:
    """``compute_edge_influence``'s scores at the stored entries of ``edges``."""
    normalized = normalized_edges(edges)
    influence = sparse_influence(normalized, logit_weights) + logit_weights
    return normalized.values * influence[normalized.targets]


def sparse_edge_influence(adjacency: Tensor, logit_weights: Float[Tensor, " n"]) -> Tensor:
    """``compute_edge_influence`` for a sparse adjacency matrix: a sparse matrix of scores."""
    edges = edges_of(adjacency)
    return sparse_matrix(edges._replace(values=sparse_edge_scores(edges, logit_weights)))


def _threshold(scores: Float[Tensor, " n"], fraction: float, n_total: int) -> float:
    """``graph._threshold`` over ``scores`` and ``n_total - len(scores)`` zeros."""
    ordered = torch.sort(scores, descending=True).values
    total = torch.sum(ordered)
    cumulative = torch.cumsum(ordered, dim=0) / total
    index = int(torch.searchsorted(cumulative, fraction).item())
    if index >= len(ordered):  # past the stored scores: the dense threshold is a zero
        return 0.0 if n_total > len(ordered) else float(ordered[-1])
    return float(ordered[index])


class SparsePruneResult(NamedTuple):
    node_mask: Bool[Tensor, " n"]
    edge_mask: Tensor  # sparse boolean [n, n]: the kept edges
    cumulative_scores: Float[Tensor, " n"]


def prune_sparse(
    adjacency: Tensor,
    logit_weights: Float[Tensor, " n"],
    n_features: int,
    n_kept_always: int,
    node_threshold: float,
    edge_threshold: float,
) -> SparsePruneResult:
    """``prune_graph`` on a sparse adjacency matrix, step for step (see ``graph.py``), on
    the stored edges only. An edge threshold that falls on the unstored zeros (the dense
    threshold 0, which keeps every entry of the dense matrix, zeros included) keeps every
    stored edge."""
    edges = edges_of(adjacency)
    n = edges.n
    node_influence = sparse_influence(normalized_edges(edges), logit_weights)
    node_mask = node_influence >= _threshold(node_influence, node_threshold, n)
    node_mask[-n_kept_always:] = True

    between_kept = node_mask[edges.targets] & node_mask[edges.sources]
    pruned = Edges(*(part[between_kept] for part in edges[:3]), n)
    scores = sparse_edge_scores(pruned, logit_weights)
    kept = scores >= _threshold(scores, edge_threshold, n * n)

    previous = None
    while previous is None or not torch.equal(node_mask, previous):
        previous = node_mask.clone()
        kept &= node_mask[pruned.targets] & node_mask[pruned.sources]
        has_target = torch.zeros(n, dtype=torch.bool, device=kept.device)
        has_target[pruned.sources[kept]] = True
        has_source = torch.zeros(n, dtype=torch.bool, device=kept.device)
        has_source[pruned.targets[kept]] = True
        node_mask[:-n_kept_always] &= has_target[:-n_kept_always]
        node_mask[:n_features] &= has_source[:n_features]
    edge_mask = sparse_matrix(
        Edges(pruned.targets[kept], pruned.sources[kept], torch.ones_like(kept[kept]), n)
    )
    ordered, order = torch.sort(node_influence, descending=True)
    cumulative = torch.zeros_like(node_influence)
    cumulative[order] = torch.cumsum(ordered, dim=0) / torch.sum(ordered)
    return SparsePruneResult(node_mask, edge_mask, cumulative)


def sparse_scores(
    adjacency: Tensor, logit_weights: Float[Tensor, " n"], error_start: int, error_end: int
) -> tuple[Float[Tensor, " n"], Float[Tensor, " n"]]:
    """What ``compute_graph_scores`` reads of a sparse matrix: (each node's influence,
    each row's normalised share of inputs from the error nodes ``error_start:error_end``)."""
    normalized = normalized_edges(edges_of(adjacency))
    influence = sparse_influence(normalized, logit_weights)
    from_error = (normalized.sources >= error_start) & (normalized.sources < error_end)
    error_share = influence.new_zeros(normalized.n).index_add_(
        0, normalized.targets[from_error], normalized.values[from_error]
    )
    return influence, error_share


def values_at(
    adjacency: Tensor, targets: Int[Tensor, " k"], sources: Int[Tensor, " k"]
) -> Float[Tensor, " k"]:
    """``adjacency[targets, sources]`` for a sparse matrix (0 where nothing is stored)."""
    edges = edges_of(adjacency)
    keys = edges.targets * edges.n + edges.sources  # sorted: the matrix is coalesced
    wanted = targets.to(keys.device) * edges.n + sources.to(keys.device)
    where = torch.searchsorted(keys, wanted).clamp(max=max(len(keys) - 1, 0))
    if len(keys) == 0:
        return edges.values.new_zeros(len(wanted))
    found = keys[where] == wanted
    return torch.where(found, edges.values[where], edges.values.new_zeros(()))


def entries(
    adjacency: Tensor, targets: Int[Tensor, " k"], sources: Int[Tensor, " k"]
) -> Float[Tensor, " k"]:
    """``adjacency[targets, sources]`` for a dense or a sparse graph matrix."""
    if is_sparse(adjacency):
        return values_at(adjacency, targets, sources)
    return adjacency[targets.to(adjacency.device), sources.to(adjacency.device)]
