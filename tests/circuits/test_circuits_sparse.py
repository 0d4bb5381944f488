"""Sparse attribution graphs (``attribute(..., sparse_threshold=t)``) and the chunked
forward: at ``t = 0`` the sparse graph is the dense one (matrix bit-equal, the same pruning,
scores, graph JSON and viewer data); at ``t > 0`` it holds exactly the edges whose share of
their row reaches ``t``, and is pruned as the dense algorithm prunes that matrix; a forward
encoded a few positions at a time finds what the whole forward finds."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import (
    Graph,
    ReplacementModel,
    attribute,
    compute_graph_scores,
    compute_partial_influences,
    create_graph_files,
    prune_graph,
)
from interp.circuits.attribution import chunks
from interp.circuits.attribution.sparse_rows import SparseRows
from interp.circuits.graph import _logit_weights, compute_edge_influence, compute_node_influence
from interp.circuits.view import graph_json
from tests.support.tolerances import tolerance

PROMPT = "ROMEO:\nIt se"
THRESHOLD = 0.01


@pytest.fixture(scope="module")
def replacement() -> ReplacementModel:
    return ReplacementModel.from_pretrained("shakespeare-char", "shakespeare-char-transcoders")


@pytest.fixture(scope="module")
def dense(replacement: ReplacementModel) -> Graph:
    return attribute(PROMPT, replacement, batch_size=256)


@pytest.fixture(scope="module")
def sparse(replacement: ReplacementModel) -> Graph:
    return attribute(PROMPT, replacement, batch_size=256, sparse_threshold=0.0)


@pytest.fixture(scope="module")
def thresholded(replacement: ReplacementModel) -> Graph:
    return attribute(PROMPT, replacement, batch_size=256, sparse_threshold=THRESHOLD)


def _influence_tolerance(graph: Graph) -> dict[str, float]:
    # The power series sums over a row's edges in another order, once a step.
    return tolerance(torch.float32, reduction=graph.adjacency_matrix.shape[0], depth=8)


def test_threshold_zero_holds_the_dense_matrix(dense: Graph, sparse: Graph) -> None:
    matrix = sparse.adjacency_matrix
    assert matrix.layout == torch.sparse_coo and matrix.is_coalesced()
    assert torch.equal(matrix.to_dense(), dense.adjacency_matrix)
    assert matrix._nnz() == int(torch.count_nonzero(dense.adjacency_matrix))
    assert torch.equal(sparse.selected_features, dense.selected_features)


def test_threshold_keeps_the_edges_whose_share_reaches_it(dense: Graph, thresholded: Graph):
    matrix = dense.adjacency_matrix
    share = matrix.abs() / matrix.abs().sum(dim=1, keepdim=True).clamp(min=1e-30)
    kept = thresholded.adjacency_matrix.to_dense() != 0
    slack = 1e-5  # the row's total summed in another order: shares at t may go either way
    assert kept[share >= THRESHOLD * (1 + slack)].all()
    assert not kept[share < THRESHOLD * (1 - slack)].any()
    assert torch.equal(thresholded.adjacency_matrix.to_dense()[kept], matrix[kept])
    assert 0 < kept.sum() < int(torch.count_nonzero(matrix)) / 2


def test_pruning_and_scores_at_zero_are_the_dense_ones(dense: Graph, sparse: Graph) -> None:
    expected, got = prune_graph(dense), prune_graph(sparse)
    assert got.edge_mask.layout == torch.sparse_coo
    assert torch.equal(got.node_mask, expected.node_mask)
    assert torch.equal(got.edge_mask.to_dense(), expected.edge_mask)
    torch.testing.assert_close(
        got.cumulative_scores, expected.cumulative_scores, **_influence_tolerance(dense)
    )
    for ours, theirs in zip(compute_graph_scores(sparse), compute_graph_scores(dense), strict=True):
        assert ours == pytest.approx(theirs, rel=_influence_tolerance(dense)["rtol"])
    weights = _logit_weights(dense)
    torch.testing.assert_close(
        compute_node_influence(sparse.adjacency_matrix, weights),
        compute_node_influence(dense.adjacency_matrix, weights),
        **_influence_tolerance(dense),
    )
    edge_scores = compute_edge_influence(sparse.adjacency_matrix, weights)
    assert edge_scores.layout == torch.sparse_coo
    torch.testing.assert_close(
        edge_scores.to_dense(),
        compute_edge_influence(dense.adjacency_matrix, weights),
        **_influence_tolerance(dense),
    )


def test_a_thresholded_graph_is_pruned_as_its_matrix_dense(thresholded: Graph) -> None:
    """The sparse pruning of the kept edges is the dense pruning of the same matrix (the
    approximation is only in which edges were kept)."""
    as_dense = Graph.__new__(Graph)
    as_dense.__dict__.update(thresholded.__dict__)
    as_dense.adjacency_matrix = thresholded.adjacency_matrix.to_dense()
    for node_threshold, edge_threshold in ((0.8, 0.98), (0.5, 0.9)):
        expected = prune_graph(as_dense, node_threshold, edge_threshold)
        got = prune_graph(thresholded, node_threshold, edge_threshold)
        assert torch.equal(got.node_mask, expected.node_mask)
        assert torch.equal(got.edge_mask.to_dense(), expected.edge_mask)


def test_max_feature_nodes_visits_the_same_features(replacement: ReplacementModel) -> None:
    kwargs = {"max_feature_nodes": 24, "batch_size": 8, "update_interval": 1}
    dense = attribute(PROMPT, replacement, **kwargs)
    sparse = attribute(PROMPT, replacement, sparse_threshold=0.0, **kwargs)
    assert torch.equal(sparse.selected_features, dense.selected_features)
    assert torch.equal(sparse.adjacency_matrix.to_dense(), dense.adjacency_matrix)


def test_partial_influences_on_kept_edges(dense: Graph) -> None:
    """SparseRows' ranking influences are compute_partial_influences' on the same rows."""
    edges = dense.adjacency_matrix[: 40 + len(dense.logit_targets)]  # some rows, any order
    n_logits = len(dense.logit_targets)
    logit_offset = edges.shape[1] - n_logits
    to_node = torch.arange(len(edges))
    to_node[-n_logits:] = torch.arange(logit_offset, logit_offset + n_logits)
    rows = SparseRows(len(edges), logit_offset, n_logits, torch.float32, threshold=0.0)
    rows.to_node = to_node
    rows.store(0, edges[:30, :logit_offset])
    rows.store(30, edges[30:, :logit_offset])
    weights = dense.logit_probabilities
    torch.testing.assert_close(
        rows.partial_influences(weights, len(edges)),
        compute_partial_influences(edges, weights, to_node),
        **_influence_tolerance(dense),
    )


def _without_influence(document: dict) -> tuple[dict, list[float]]:
    """The graph JSON with each node's ``influence`` (a cumulative sum of influences, to
    float rounding) taken out, and those influences."""
    nodes = [{k: v for k, v in node.items() if k != "influence"} for node in document["nodes"]]
    influences = [node.get("influence") or 0.0 for node in document["nodes"]]
    return {**document, "nodes": nodes}, influences


@pytest.mark.parametrize("edge_threshold", [0.98, 0.9])
def test_graph_files_read_a_sparse_graph(dense: Graph, sparse: Graph, edge_threshold, tmp_path):
    """create_graph_files (the viewer's JSON, graph_json) writes the same nodes and links."""
    options = {"edge_threshold": edge_threshold}
    ours, our_influence = _without_influence(graph_json(sparse, "romeo", **options))
    theirs, their_influence = _without_influence(graph_json(dense, "romeo", **options))
    assert ours == theirs and len(ours["links"]) > 0
    bound = _influence_tolerance(dense)
    torch.testing.assert_close(torch.tensor(our_influence), torch.tensor(their_influence), **bound)
    assert create_graph_files(sparse, "romeo", tmp_path).exists()


def test_saved_and_loaded(thresholded: Graph, tmp_path) -> None:
    thresholded.to_pt(tmp_path / "graph.pt")
    loaded = Graph.from_pt(tmp_path / "graph.pt")
    assert loaded.adjacency_matrix.layout == torch.sparse_coo
    assert torch.equal(loaded.adjacency_matrix.to_dense(), thresholded.adjacency_matrix.to_dense())
    assert torch.equal(prune_graph(loaded).node_mask, prune_graph(thresholded).node_mask)


def test_forward_in_chunks_of_positions(replacement, dense, monkeypatch) -> None:
    """Three positions a chunk (the budget set so) find the same features, values, errors."""
    tcs = replacement.transcoders
    monkeypatch.setattr(chunks, "ACTIVATION_BUDGET", 3 * tcs.n_layers * tcs.d_transcoder)
    calls = []
    find = chunks.find_in_chunk
    monkeypatch.setattr(chunks, "find_in_chunk", lambda *a: calls.append(a[3:]) or find(*a))
    graph = attribute(PROMPT, replacement, batch_size=256)
    assert len(calls) == -(-len(dense.input_tokens) // 3) and calls[0] == (0, 3)
    assert torch.equal(graph.active_features, dense.active_features)
    bound = tolerance(torch.float32, reduction=replacement.cfg.d_model, depth=2)
    torch.testing.assert_close(graph.activation_values, dense.activation_values, **bound)
    magnitude = dense.adjacency_matrix.abs().max()
    bound = tolerance(torch.float32, reduction=graph.adjacency_matrix.shape[1], depth=8)
    torch.testing.assert_close(
        graph.adjacency_matrix / magnitude, dense.adjacency_matrix / magnitude, **bound
    )


@pytest.mark.parametrize("bad", [-0.1, 1.0, "0.1", True])
def test_a_bad_threshold_is_refused(replacement: ReplacementModel, bad) -> None:
    with pytest.raises(ValueError, match="sparse_threshold"):
        attribute("ROMEO:", replacement, sparse_threshold=bad)


def test_backward_in_passes_within_the_budget(replacement, dense, monkeypatch) -> None:
    """A budget of three rows a pass splits each batch; the rows are the same."""
    n_columns = dense.adjacency_matrix.shape[1] - len(dense.logit_targets)
    width = max(len(dense.input_tokens) * replacement.cfg.d_model, n_columns)
    monkeypatch.setattr(chunks, "BACKWARD_BUDGET", 3 * width)
    sizes = []
    store = SparseRows.store
    monkeypatch.setattr(
        SparseRows,
        "store",
        lambda rows, first, computed: sizes.append(len(computed)) or store(rows, first, computed),
    )
    graph = attribute(PROMPT, replacement, batch_size=256, sparse_threshold=0.0)
    n_rows = len(dense.selected_features) + len(dense.logit_targets)  # every row once
    assert max(sizes) == 3 and sum(sizes) == n_rows
    magnitude = dense.adjacency_matrix.abs().max()
    bound = tolerance(torch.float32, reduction=n_columns, depth=8)
    torch.testing.assert_close(
        graph.adjacency_matrix.to_dense() / magnitude, dense.adjacency_matrix / magnitude, **bound
    )


def test_attention_annotations_read_a_sparse_graph(
    replacement: ReplacementModel, dense: Graph, sparse: Graph
) -> None:
    """Head loadings index the graph's edges and annotate_attention walks the pruned ones:
    on the sparse graph at t = 0 both give what they give on the dense graph."""
    from interp.circuits import annotate_attention, head_loadings

    target = dense.adjacency_matrix.shape[0] - 1  # the top logit
    from_dense, from_sparse = (
        head_loadings(replacement, dense, target),
        head_loadings(replacement, sparse, target),
    )
    assert torch.equal(from_sparse.edge, from_dense.edge)
    assert torch.equal(from_sparse.heads, from_dense.heads)
    dense_json = annotate_attention(replacement, dense, max_qk=4).to_json(dense)
    sparse_json = annotate_attention(replacement, sparse, max_qk=4).to_json(sparse)
    assert sparse_json["head_loadings"] == dense_json["head_loadings"]
