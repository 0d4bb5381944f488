"""The rows of an attribution graph: each visited node's direct effects on every source,
from a batched backward pass (``FrozenBackward``, else autograd) dotted with what each source
wrote; the logits' rows first, then the features' in order of influence, and the dense
adjacency matrix assembled from them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.circuits.attribution import chunks
from interp.circuits.attribution.logit_targets import _Targets
from interp.circuits.attribution.sources import _Sources
from interp.circuits.attribution.sparse_rows import SparseRows
from interp.circuits.backward import FrozenBackward
from interp.circuits.graph import compute_partial_influences
from interp.circuits.replacement_model import LinearizedRun, ReplacementModel


def autograd_gradients(
    model: ReplacementModel,
    run: LinearizedRun,
    final: Tensor,
    layers: Int[Tensor, " k"],
    positions: Int[Tensor, " k"],
    inject: Float[Tensor, "k d_model"],
) -> Iterator[tuple[int, Float[Tensor, "k pos d_model"]]]:
    """``FrozenBackward.gradients`` by ``torch.autograd`` through the linearized forward's
    graph, batched by vmap (``is_grads_batched``): for any configuration, every row and
    position (layer ``n_layers`` injects after ``ln_final``)."""
    n_layers = model.cfg.n_layers
    batch = len(layers)
    rows_of = torch.arange(batch, device=final.device)
    outputs, grad_outputs = [], []
    for layer in layers.unique().tolist():
        tensor = final if layer == n_layers else run.inputs[layer]  # [1, pos, d_model]
        mask = layers == layer
        grad = tensor.new_zeros(batch, *tensor.shape)  # one gradient a row, batched by vmap
        grad[rows_of[mask], 0, positions[mask]] = inject[mask].to(tensor.dtype)
        outputs.append(tensor)
        grad_outputs.append(grad)
    sinks = [*run.outputs, run.embed[0]]
    grads = torch.autograd.grad(
        outputs, sinks, grad_outputs, retain_graph=True, allow_unused=True, is_grads_batched=True
    )
    for sink, grad in enumerate(grads):
        if grad is not None:
            yield sink, grad[:, 0]  # [batch, pos, d_model]


def _gradient_rows(
    sources: _Sources,
    gradients: Iterator[tuple[int, Float[Tensor, "n q d_model"]]],
    batch: int,
    dtype: torch.dtype,
) -> Float[Tensor, "batch n_columns"]:
    """Row ``i`` holds the direct effects of every feature, error and token node on the
    node that row ``i`` of ``gradients`` started from: the gradient at each layer's
    transcoder output, dotted with the vectors written there, and at the embedding, with
    each token's. A gradient may cover only the first rows and positions (the rest zero)."""
    n_layers, n_pos = len(sources.writes), len(sources.tokens)
    n_features = len(sources.active)
    device = sources.tokens.device
    rows = torch.zeros(batch, n_features + (n_layers + 1) * n_pos, dtype=dtype, device=device)
    for sink, grad in gradients:
        n, q = grad.shape[:2]
        grad = grad.to(dtype)
        if sink == n_layers:  # the embedding: token nodes
            token_col = n_features + n_layers * n_pos
            token_vectors = sources.tokens[:q].to(dtype)
            rows[:n, token_col : token_col + q] = torch.einsum("bpd,pd->bp", grad, token_vectors)
            continue
        writes, effects = sources.writes[sink], []
        for pos in range(q):  # the gradient at pos against the vectors written there
            start, end = writes.offsets[pos], writes.offsets[pos + 1]
            if end > start:
                effects.append(grad[:, pos] @ writes.vectors[start:end].to(dtype).T)
        if effects:
            written = writes.columns[: writes.offsets[q]]
            rows[:n].index_add_(1, written, torch.cat(effects, dim=1))
        error_col = n_features + sink * n_pos
        errors = sources.errors[sink, :q].to(dtype)
        rows[:n, error_col : error_col + q] = torch.einsum("bpd,pd->bp", grad, errors)
    return rows


class _Rows:
    """The edge rows being filled: one per visited node (logits first, then features in the
    order visited), ``[rows, logit_offset + n_logits]``, and the node each row belongs to."""

    def __init__(self, n_rows: int, logit_offset: int, n_logits: int, dtype: torch.dtype) -> None:
        self.logit_offset = logit_offset
        self.edges = torch.zeros(n_rows, logit_offset + n_logits, dtype=dtype)
        self.to_node = torch.zeros(n_rows, dtype=torch.long)  # [rows]

    def store(self, first_row: int, computed: Float[Tensor, "batch columns"]) -> None:
        self.edges[first_row : first_row + len(computed), : self.logit_offset] = computed.cpu()

    def partial_influences(self, logit_probabilities: Tensor, n_rows: int) -> Tensor:
        return compute_partial_influences(
            self.edges[:n_rows], logit_probabilities, self.to_node[:n_rows]
        )


def _row_writer(
    model: ReplacementModel,
    run: LinearizedRun,
    final: Tensor,
    sources: _Sources,
    backward: FrozenBackward | None,
    rows: _Rows | SparseRows,
    dtype: torch.dtype,
) -> Callable[[Tensor, Tensor, Tensor, int], None]:
    """``write(layers, positions, inject, first_row)``: the rows injecting ``inject`` at
    (layer, position), by ``backward`` (else autograd), written from ``first_row`` on; in
    passes of at most ``chunks.BACKWARD_BUDGET`` elements a gradient or row block (a batch
    that fits is one pass; any split gives the same rows)."""
    n_columns = rows.logit_offset  # a row's width: features, errors, tokens
    width = max(len(sources.tokens) * model.cfg.d_model, n_columns)
    step = max(1, chunks.BACKWARD_BUDGET // width)

    def write(layers: Tensor, positions: Tensor, inject: Tensor, first_row: int) -> None:
        for start in range(0, len(layers), step):  # still sorted by layer, highest first
            part = slice(start, start + step)
            args = (layers[part], positions[part], inject[part])
            if backward is not None:
                gradients = backward.gradients(*args)
            else:
                gradients = autograd_gradients(model, run, final, *args)
            computed = _gradient_rows(sources, gradients, len(args[0]), dtype)
            rows.store(first_row + start, computed)

    return write


def _logit_rows(
    write: Callable[[Tensor, Tensor, Tensor, int], None],
    targets: _Targets,
    rows: _Rows | SparseRows,
    n_layers: int,
    n_pos: int,
    batch_size: int,
    device: torch.device,
) -> None:
    """The logits' rows (the first ``n_logits``): each injects its vector after ``ln_final``
    at the last position."""
    n_logits = len(targets.targets)
    for start in range(0, n_logits, batch_size):
        vectors = targets.vectors[start : start + batch_size]
        k = len(vectors)
        layers = torch.full((k,), n_layers, device=device)
        write(layers, torch.full((k,), n_pos - 1, device=device), vectors, start)
        rows.to_node[start : start + k] = torch.arange(start, start + k) + rows.logit_offset


def _feature_rows(
    write: Callable[[Tensor, Tensor, Tensor, int], None],
    sources: _Sources,
    targets: _Targets,
    rows: _Rows | SparseRows,
    n_visit: int,
    batch_size: int,
    update_interval: int,
    verbose: bool,
    device: torch.device,
) -> Bool[Tensor, " n_active"]:
    """The features' rows, after the logits': all active features, or the ``n_visit`` most
    influential ones, re-ranked every ``update_interval`` batches; returns which were
    visited."""
    n_active = len(sources.active)
    next_row, visited = len(targets.targets), torch.zeros(n_active, dtype=torch.bool)
    n_visited = 0
    feature_layer, feature_pos = sources.active[:, 0], sources.active[:, 1]
    layer_cpu, pos_cpu = feature_layer.cpu(), feature_pos.cpu()
    progress = tqdm(total=n_visit, desc="Feature attribution", disable=not verbose)
    while n_visited < n_visit:
        if n_visit == n_active:
            pending = torch.arange(n_active)
        else:
            influence = rows.partial_influences(targets.probabilities, next_row)
            rank = torch.argsort(influence[:n_active], descending=True)
            queue = min(update_interval * batch_size, n_visit - n_visited)
            pending = rank[~visited[rank]][:queue]
        # Any split of the queue into batches gives the same rows. By position, a batch
        # spans few positions (FrozenBackward stops at the last one); within a batch,
        # by layer, highest first (it starts each row at its layer).
        pending = pending[torch.argsort(pos_cpu[pending], stable=True)]
        for start in range(0, len(pending), batch_size):
            chunk = pending[start : start + batch_size]
            chunk = chunk[torch.argsort(layer_cpu[chunk], descending=True, stable=True)]
            idx = chunk.to(device)
            write(feature_layer[idx], feature_pos[idx], sources.encoders[idx], next_row)
            rows.to_node[next_row : next_row + len(chunk)] = chunk
            visited[chunk] = True
            next_row += len(chunk)
            n_visited += len(chunk)
            progress.update(len(chunk))
    progress.close()
    return visited


def _adjacency(
    rows: _Rows, visited: Tensor, n_visit: int, n_logits: int, dtype: torch.dtype
) -> tuple[Tensor, Float[Tensor, "nodes nodes"]]:
    """(the visited features' indices, the graph's adjacency matrix): the rows in node
    order, the unvisited features' columns dropped, the logits' rows last."""
    n_active, logit_offset = len(visited), rows.logit_offset
    selected = torch.where(visited)[0]
    edge_rows = rows.edges
    if n_visit < n_active:
        columns = torch.cat([selected, torch.arange(n_active, logit_offset + n_logits)])
        edge_rows = edge_rows[:, columns]
    edge_rows = edge_rows[rows.to_node.argsort()]
    n_nodes = edge_rows.shape[1]
    adjacency = torch.zeros(n_nodes, n_nodes, dtype=dtype)
    adjacency[:n_visit] = edge_rows[:n_visit]
    adjacency[-n_logits:] = edge_rows[n_visit:]
    return selected, adjacency
