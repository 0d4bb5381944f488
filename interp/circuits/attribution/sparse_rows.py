"""The edge rows of ``attribute(..., sparse_threshold=t)``: each batch of rows, as it comes
out of a backward pass, keeps only the edges whose share of their row's absolute total is
at least ``t`` (``sparse_graph.keep_share``), so memory grows with the edges kept rather
than with rows x columns (the square of the active features for a full graph).

``t = 0`` keeps every nonzero edge: the graph's sparse adjacency matrix then holds exactly
the dense graph's entries (``to_dense()`` is bit-equal). The partial influences that rank
features for ``max_feature_nodes`` are computed on the kept edges, by the same power
series as ``graph.compute_partial_influences``, in another summation order: at ``t = 0``
they agree to float rounding, so the same features are visited unless two of them tie
to rounding at the cut.

Example:
    >>> rows = SparseRows(n_rows=2, logit_offset=3, n_logits=1, dtype=torch.float32,
    ...                   threshold=0.1)
    >>> rows.store(0, torch.tensor([[1.0, 0.05, -2.0], [0.0, 0.0, 0.0]]))
    >>> rows.n_edges   # 0.05 is under 0.1 of its row's total, 3.05
    2
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.circuits.sparse_graph import keep_share


class SparseRows:
    """The kept edges of the rows being filled (row ``r`` is the node ``to_node[r]``: the
    logits first, then features in the order visited), columns as in ``_Rows``."""

    def __init__(
        self, n_rows: int, logit_offset: int, n_logits: int, dtype: torch.dtype, threshold: float
    ) -> None:
        self.logit_offset, self.n_logits, self.dtype = logit_offset, n_logits, dtype
        self.threshold = threshold
        self.to_node = torch.zeros(n_rows, dtype=torch.long)  # [rows]
        self._parts: list[tuple[Tensor, Tensor, Tensor]] = []  # (row, column, value), CPU

    @property
    def n_edges(self) -> int:
        return sum(len(part[0]) for part in self._parts)

    def store(self, first_row: int, computed: Float[Tensor, "batch columns"]) -> None:
        """Keep the edges of rows ``first_row:first_row + batch``."""
        row, column, value = keep_share(computed, self.threshold)
        self._parts.append(((row + first_row).cpu(), column.cpu(), value.to(self.dtype).cpu()))

    def _edges(self) -> tuple[Int[Tensor, " nnz"], Int[Tensor, " nnz"], Float[Tensor, " nnz"]]:
        if len(self._parts) != 1:  # merged once, so later calls reuse it
            empty = (torch.zeros(0, dtype=torch.long),) * 2 + (torch.zeros(0, dtype=self.dtype),)
            parts = self._parts or [empty]
            self._parts = [tuple(torch.cat(column) for column in zip(*parts, strict=True))]
        return self._parts[0]

    def partial_influences(
        self, logit_probabilities: Float[Tensor, " n_logits"], n_rows: int, max_iter: int = 128
    ) -> Float[Tensor, " columns"]:
        """``compute_partial_influences`` of the first ``n_rows`` rows, on the kept edges."""
        row, column, value = self._edges()
        n_columns = self.logit_offset + self.n_logits
        within = row < n_rows
        row, column, absolute = row[within], column[within], value[within].abs()
        totals = absolute.new_zeros(n_rows).index_add_(0, row, absolute)
        normalized = absolute / totals.clamp(min=1e-8)[row]
        node = self.to_node[row]  # [nnz]: the node each edge points to
        influence = absolute.new_zeros(n_columns)
        current = absolute.new_zeros(n_columns)
        current[-self.n_logits :] = logit_probabilities.to(current.dtype)
        for _ in range(max_iter):
            current = absolute.new_zeros(n_columns).index_add_(
                0, column, current[node] * normalized
            )
            if not current.any():
                return influence
            influence += current
        raise RuntimeError(f"Partial influences did not converge in {max_iter} steps.")

    def adjacency(self, visited: Tensor, n_visit: int) -> tuple[Tensor, Tensor]:
        """(the visited features' indices, the sparse adjacency matrix): ``_adjacency``'s
        node order (visited features, errors, tokens, logits), unvisited features dropped."""
        row, column, value = self._edges()
        n_active = len(visited)
        selected = torch.where(visited)[0]
        # remap[i]: the node of row/column index i (-1: an unvisited feature).
        remap = torch.full((self.logit_offset + self.n_logits,), -1, dtype=torch.long)
        remap[selected] = torch.arange(n_visit)
        n_rest = self.logit_offset + self.n_logits - n_active
        remap[n_active:] = torch.arange(n_visit, n_visit + n_rest)
        targets, sources = remap[self.to_node[row]], remap[column]
        kept = sources >= 0
        n_nodes = n_visit + n_rest
        matrix = torch.sparse_coo_tensor(
            torch.stack([targets[kept], sources[kept]]),
            value[kept],
            (n_nodes, n_nodes),
            check_invariants=False,
        ).coalesce()  # each (row, column) once: coalescing sorts
        return selected, matrix
