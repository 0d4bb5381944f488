"""A graph saved by circuit-tracer 0.5.0's ``Graph.to_pt`` (written by
``circuit_tracer_reference/make_graph_pt_fixture.py``) reads back with ``Graph.from_pt``,
with neither circuit-tracer nor TransformerLens 2.x imported: its pruning and scores are
circuit-tracer's, it equals interp's graph of the same model, and it writes graph files."""

from __future__ import annotations

import json
import sys

import torch

from interp.circuits import (
    Graph,
    attribute,
    compute_graph_scores,
    create_graph_files,
    prune_graph,
)
from interp.circuits.graph import ForeignConfig, LogitTarget
from tests.circuits.test_circuits_reference import tolerance
from tests.support.circuit_tracer_models import REFERENCE, replacement_model

SAVED = REFERENCE / "circuit_tracer_graph.pt"
PROMPT = [0, 5, 17, 3, 29, 11, 40, 8]  # make_fixtures.PROMPT


def test_circuit_tracers_saved_graph_reads_back() -> None:
    graph = Graph.from_pt(SAVED)
    assert "circuit_tracer" not in sys.modules
    assert isinstance(graph.cfg, ForeignConfig) and graph.n_layers == 2
    assert graph.vocab_size == 48 and all(isinstance(t, LogitTarget) for t in graph.logit_targets)
    expected = json.loads((REFERENCE / "circuit_tracer_graph_scores.json").read_text())
    node_mask, edge_mask, cumulative = prune_graph(graph, node_threshold=0.8, edge_threshold=0.98)
    assert int(node_mask.sum()) == expected["nodes_kept"]
    assert int(edge_mask.sum()) == expected["edges_kept"]
    n = len(graph.adjacency_matrix)  # fp32 rounding over the graph (test_circuits_reference)
    assert abs(float(cumulative.sum()) - expected["cumulative_scores_sum"]) <= n * tolerance(n)
    replacement, completeness = compute_graph_scores(graph)
    assert abs(replacement - expected["replacement_score"]) <= tolerance(n)
    assert abs(completeness - expected["completeness_score"]) <= tolerance(n)


def test_it_is_interps_graph_of_the_same_model(tmp_path) -> None:
    theirs = Graph.from_pt(SAVED)
    ours = attribute(PROMPT, replacement_model("llama", "skip"), max_feature_nodes=20)
    assert torch.equal(ours.active_features, theirs.active_features)
    assert torch.equal(ours.selected_features, theirs.selected_features)
    assert ours.logit_targets == theirs.logit_targets
    atol = tolerance(len(theirs.adjacency_matrix)) * theirs.adjacency_matrix.abs().max().item()
    torch.testing.assert_close(ours.adjacency_matrix, theirs.adjacency_matrix, rtol=0, atol=atol)
    create_graph_files(SAVED, "circuit-tracer-graph", tmp_path)
    written = json.loads((tmp_path / "circuit-tracer-graph.json").read_text())
    assert written["metadata"]["slug"] == "circuit-tracer-graph" and written["links"]
