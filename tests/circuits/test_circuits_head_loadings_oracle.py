"""Head loadings against a float64 computation written here, independently of
``interp.circuits.attention``: the frozen model run by hooks with heads' OV paths removed
(``z`` held at its clean value), the target's change when the source's vector is added (a
difference quotient, exact for that linear map up to rounding)."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import (
    CrossLayerTranscoder,
    ReplacementModel,
    attribute,
    head_loadings,
)
from tests.circuits.attention_support import FrozenForward, family_replacement, oracle_edge
from tests.circuits.test_circuits_backward import FAMILY_CHECKPOINTS, model_for

# Sandwich norms with Gemma's offset and soft caps, parallel blocks, post-norms only with
# QK-norm, GQA with biases (the other families: test_circuits_attention's sums).
ORACLE_FAMILIES = [
    "gemma2-soft-caps-bite-window-4", "neox-parallel-partial-rotary", "olmo2-gqa2-post-norms",
    "qwen2-gqa2-biases-tied",
]  # fmt: skip
TOKENS = torch.arange(1, 11)
F64_RTOL = 1e-9  # float64 sums of a few thousand products: far below this of their size


def _graph(replacement):
    tokens = TOKENS % replacement.cfg.d_vocab
    return attribute(tokens, replacement, batch_size=32)


def _strong_edges(graph, target: int, k: int = 1) -> list[int]:
    """The ``k`` sources of largest |edge| into ``target`` among the tokens and the layer-0
    features (whose paths can run through heads: a later feature at the target's position
    may reach it without any)."""
    n_features = len(graph.selected_features)
    tokens_start = n_features + graph.n_layers * graph.n_pos
    row = graph.adjacency_matrix[target].abs().clone()
    later = graph.active_features[graph.selected_features, 0] > 0
    row[:n_features][later] = 0
    row[n_features:tokens_start] = 0  # errors: the oracle adds feature and token vectors
    return row.argsort(descending=True)[:k].tolist()


def _check_head_loadings(replacement, graph, target: int) -> float:
    frozen = FrozenForward(replacement, graph.input_tokens)
    cfg = replacement.cfg
    every = {(layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)}
    worst = carried = 0.0
    for source in _strong_edges(graph, target):
        loadings = head_loadings(replacement, graph, target, source)
        expected = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.float64)
        for layer in range(cfg.n_layers):
            above = {(i, h) for (i, h) in every if i > layer}
            none_here = above | {(layer, h) for h in range(cfg.n_heads)}
            base = oracle_edge(frozen, graph, target, source, none_here)
            for head in range(cfg.n_heads):
                others = above | {(layer, h) for h in range(cfg.n_heads) if h != head}
                expected[layer, head] = oracle_edge(frozen, graph, target, source, others) - base
        bypass = oracle_edge(frozen, graph, target, source, every)
        edge = oracle_edge(frozen, graph, target, source, set())
        scale = expected.abs().sum() + abs(bypass)
        assert scale > 1e-3  # an edge that goes somewhere
        torch.testing.assert_close(loadings.heads, expected, rtol=0, atol=F64_RTOL * scale)
        assert float(loadings.bypass) == pytest.approx(bypass, abs=F64_RTOL * scale)
        assert float(loadings.edge) == pytest.approx(edge, abs=F64_RTOL * scale)
        worst = max(worst, float((loadings.heads - expected).abs().max()) / scale)
        carried = max(carried, float(expected.abs().max() / scale))
    return worst, carried


@pytest.mark.parametrize("case", ORACLE_FAMILIES)
def test_head_loadings_equal_ablating_heads_in_the_frozen_model(case, tmp_path) -> None:
    replacement = family_replacement(FAMILY_CHECKPOINTS[case], tmp_path, torch.float64)
    graph = _graph(replacement)
    features = len(graph.selected_features)
    layers = graph.active_features[graph.selected_features, 0]
    feature_target = int(torch.argsort(layers, descending=True, stable=True)[0])
    assert feature_target < features
    carried = 0.0
    for target in (graph.adjacency_matrix.shape[0] - 1, feature_target):
        carried = max(carried, _check_head_loadings(replacement, graph, target)[1])
    assert carried > 1e-3  # some head carries a share of an edge checked


def test_cross_layer_transcoder_head_loadings_equal_the_oracle() -> None:
    """A CLT feature writes to every later layer: each write's paths split over heads."""
    torch.manual_seed(0)
    clt = CrossLayerTranscoder(3, 24, 32, jumprelu=True, skip_connection=True, dtype=torch.float64)
    clt.feature_input_hook, clt.feature_output_hook = "mlp.hook_in", "mlp.hook_out"
    with torch.no_grad():
        clt.W_enc.normal_(0, 0.3)
        clt.b_enc.normal_(-0.4, 0.2)
        clt.threshold.uniform_(0.05, 0.2)
        for decoder in clt.W_dec:
            decoder.normal_(0, 0.1)
        clt.W_skip.normal_(0, 0.2)
    replacement = ReplacementModel.from_model(model_for("gemma2_mlp_hooks"), clt)
    graph = attribute(TOKENS % 48, replacement, batch_size=32)
    _, carried = _check_head_loadings(replacement, graph, graph.adjacency_matrix.shape[0] - 1)
    assert carried > 1e-3
