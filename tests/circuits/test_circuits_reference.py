"""Attribution graphs equal circuit-tracer 0.5.0's on the same random weights and
transcoders (``tests/circuit_tracer_reference/make_fixtures.py`` wrote them): GPT-2-,
Llama- and Gemma-2-shaped tiny models, per-layer transcoders with and without skip
connections and cross-layer transcoders, whole graphs and graphs cut by
``max_feature_nodes`` (re-ranked by partial influence)."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp import HookedTransformer, HookedTransformerConfig
from interp.circuits import (
    ReplacementModel,
    attribute,
    compute_graph_scores,
    load_transcoders,
    prune_graph,
)

HERE = Path(__file__).parents[1] / "circuit_tracer_reference"
CASES = [
    f"{family}_{variant}"
    for family in ("gpt2", "llama", "gemma2")
    for variant in ("skip", "noskip", "skip_partial", "clt", "clt_partial")
]
EPS = torch.finfo(torch.float32).eps


@cache
def replacement_model(family: str, variant: str) -> ReplacementModel:
    cfg = HookedTransformerConfig(**json.loads((HERE / family / "config.json").read_text()))
    model = HookedTransformer(cfg)
    missing, unexpected = model.load_state_dict(
        load_file(HERE / family / "model.safetensors"), strict=False
    )
    assert not missing and not unexpected, (missing, unexpected)
    return ReplacementModel.from_model(model, load_transcoders(HERE / family / variant))


@cache
def graphs(case: str):
    family, variant = case.split("_", 1)
    reference = torch.load(HERE / f"{case}.pt", weights_only=True)
    model = replacement_model(family, variant.removesuffix("_partial"))
    return attribute(reference["input_tokens"], model, **reference["kwargs"]), reference


def tolerance(size: int) -> float:
    """fp32 rounding grows like sqrt(size) over the graph; never looser than the issue's
    1e-4 of the largest entry."""
    return min(1e-4, 8 * EPS * math.sqrt(size))


@pytest.mark.parametrize("case", CASES)
def test_nodes_equal_circuit_tracer(case: str) -> None:
    graph, reference = graphs(case)
    assert torch.equal(graph.active_features, reference["active_features"])
    assert torch.equal(graph.selected_features, reference["selected_features"])
    assert [t.vocab_idx for t in graph.logit_targets] == reference["logit_token_ids"]
    n = len(reference["activation_values"])
    torch.testing.assert_close(
        graph.activation_values, reference["activation_values"], rtol=0, atol=tolerance(n)
    )
    torch.testing.assert_close(
        graph.logit_probabilities, reference["logit_probabilities"], rtol=0, atol=tolerance(n)
    )


@pytest.mark.parametrize("case", CASES)
def test_adjacency_equals_circuit_tracer(case: str) -> None:
    graph, reference = graphs(case)
    expected = reference["adjacency_matrix"]
    assert graph.adjacency_matrix.shape == expected.shape
    scale = expected.abs().max().item()
    error = (graph.adjacency_matrix - expected).abs().max().item()
    assert error <= tolerance(expected.shape[0]) * scale, (error, scale)


@pytest.mark.parametrize("case", CASES)
def test_pruning_and_scores_equal_circuit_tracer(case: str) -> None:
    graph, reference = graphs(case)
    node_mask, edge_mask, cumulative = prune_graph(graph, node_threshold=0.8, edge_threshold=0.98)
    assert torch.equal(node_mask, reference["node_mask"])
    assert torch.equal(edge_mask, reference["edge_mask"])
    n = len(node_mask)
    torch.testing.assert_close(
        cumulative, reference["cumulative_scores"], rtol=0, atol=tolerance(n)
    )
    replacement, completeness = compute_graph_scores(graph)
    assert replacement == pytest.approx(reference["replacement_score"], abs=tolerance(n))
    assert completeness == pytest.approx(reference["completeness_score"], abs=tolerance(n))
