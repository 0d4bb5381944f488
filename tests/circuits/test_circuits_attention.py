"""Head loadings and QK attributions (``interp.circuits.attention``): exact decompositions of
the graph's edges and of attention scores, on every family's random checkpoint, against
float64 oracles built here from the model's own forward pass and weights."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import attribute, head_loadings, qk_attribution
from interp.circuits.attention import FrozenRun
from tests.circuits.attention_support import family_replacement
from tests.circuits.test_circuits_backward import FAMILY_CHECKPOINTS
from tests.support.circuit_tracer_models import replacement_model
from tests.support.tolerances import error_bound

TOKENS = torch.tensor([1, 5, 17, 3, 29, 11, 40, 8, 2, 7])
# Families whose attention differs: LayerNorm + learned positions, biases, GQA, QK-norm (per
# head, across heads), sandwich norms with Gemma's offset and soft caps, parallel blocks,
# partial / GPT-J / LongRoPE / dual rotary, ALiBi, sliding windows, attention sinks, MoE.
FAMILIES = [
    "bloom-alibi-6-heads", "gemma2-soft-caps-bite-window-4", "gemma3-dual-rope-linear-window-4",
    "gpt-neo-window-3", "gpt-oss-yarn-ramp-window-4", "gptj-rotary-quarter",
    "llama-gqa4-linear-rope-biases-sharded", "mistral-window-5", "neox-parallel-partial-rotary",
    "olmo2-gqa2-post-norms", "olmoe-qk-norm-across-heads-top-4", "opt-biases-tied",
    "phi3-longrope-past-original-8", "qwen2-gqa2-biases-tied", "qwen3-qk-norm-head-dim-32",
]  # fmt: skip
REFERENCE = [("gpt2", "skip"), ("gpt2", "clt"), ("llama", "noskip"), ("gemma2", "clt")]


def _bound(model, magnitude: float) -> float:
    """Two float32 backward passes of the same edge, in different orders."""
    cfg = model.cfg
    depth = 4 * cfg.n_layers + 2
    return error_bound(cfg.dtype, reduction=cfg.d_model * 8, depth=depth, magnitude=magnitude)


def _targets(graph) -> list[int]:
    """The last logit and the two features of the highest layers."""
    n_features = len(graph.selected_features)
    layers = graph.active_features[graph.selected_features, 0]
    top = torch.argsort(layers, descending=True, stable=True)[:2].tolist()
    return [graph.adjacency_matrix.shape[0] - 1, *top[: min(2, n_features)]]


def _check_sums(replacement, graph) -> tuple[float, float]:
    """(max |bypass + heads.sum() - edge| / bound, max |remainder| / bound) over targets and
    over a few heads' scores; asserts both at most 1."""
    run = FrozenRun(replacement, graph)
    worst_edges = 0.0
    for target in _targets(graph):
        loadings = head_loadings(replacement, graph, target, frozen_run=run)
        terms = loadings.heads.abs().sum((0, 1)) + loadings.bypass.abs()
        error = (loadings.heads.sum((0, 1)) + loadings.bypass - loadings.edge).abs().max()
        worst_edges = max(worst_edges, float(error) / _bound(replacement, float(terms.max())))
    cfg, worst_scores = replacement.cfg, 0.0
    for layer in range(cfg.n_layers):
        window = replacement.blocks[layer].attn.window_size or run.n_pos
        for head in (0, cfg.n_heads - 1):
            q = run.n_pos - 1
            for k in (q, q - 1, max(q - window + 1, 0)):
                qk = qk_attribution(replacement, graph, layer, head, q, k, frozen_run=run)
                bound = _bound(replacement, float(qk.pairs.abs().sum()))
                worst_scores = max(worst_scores, abs(qk.remainder) / bound)
                assert qk.pairs.sum() + qk.remainder == pytest.approx(qk.score, abs=1e-12)
    assert worst_edges <= 1 and worst_scores <= 1, (worst_edges, worst_scores)
    return worst_edges, worst_scores


@pytest.mark.parametrize("case", FAMILIES)
def test_every_family_sums_to_the_edge_and_the_score(case, tmp_path) -> None:
    replacement = family_replacement(FAMILY_CHECKPOINTS[case], tmp_path, torch.float32)
    tokens = torch.arange(1, 11) % replacement.cfg.d_vocab
    graph = attribute(tokens, replacement, batch_size=32)
    _check_sums(replacement, graph)


@pytest.mark.parametrize(("family", "variant"), REFERENCE)
def test_reference_models_sum_to_the_edge_and_the_score(family, variant) -> None:
    """circuit-tracer's fixtures' models: per-layer and cross-layer transcoders, LayerNorm
    with its bias (GPT-2), Gemma 2's sandwich norms and soft caps."""
    replacement = replacement_model(family, variant)
    graph = attribute(TOKENS, replacement, batch_size=32, max_feature_nodes=24)
    _check_sums(replacement, graph)
