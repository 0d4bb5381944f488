"""Attribution graphs and feature interventions equal circuit-tracer 0.5.0's for every norm x
transcoder input hook x skip connection (``tests/circuit_tracer_reference/make_norm_fixtures.py``
wrote them): LayerNorm with and without a bias (GPT-2-shaped, learned positions), RMSNorm
(Llama-shaped) and Gemma's offset RMSNorm (Gemma-2-shaped), transcoders reading
``ln2.hook_normalized``, ``hook_resid_mid`` or ``hook_mlp_in``, with and without skip.

A circuit-tracer transcoder set that reads a LayerNorm's ``ln2.hook_normalized`` reads it as
TransformerLens 3 has it, before the weight and bias; interp's hook point is after them
(TransformerLens 2.x), so the replacement model feeds such a set the centred, scaled input."""

from __future__ import annotations

import json
from functools import cache

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
from tests.circuits.test_circuits_intervention import interventions
from tests.circuits.test_circuits_reference import tolerance
from tests.support.circuit_tracer_models import REFERENCE

FOLDER = REFERENCE / "norms"
HOOKS = {"ln2": "ln2.hook_normalized", "mid": "hook_resid_mid", "mlpin": "hook_mlp_in"}
NORMS = ("ln", "ln_nobias", "rms", "rms_offset")
CASES = [f"{norm}_{hook}_{skip}" for norm in NORMS for hook in HOOKS for skip in ("skip", "noskip")]
CASES.append("ln_ln2_skip_long")  # 64 tokens, cut at 64 feature nodes
RUNS = ("frozen", "unfrozen", "constrained_all", "constrained_last")
RUN_KWARGS = {
    "frozen": dict(freeze_attention=True),
    "unfrozen": dict(freeze_attention=False),
    "constrained_all": dict(constrained_layers=range(2)),
    "constrained_last": dict(constrained_layers=range(1, 2)),
}


def parse(case: str) -> tuple[str, str, str]:
    """(norm, input hook, skip folder) of a case name."""
    name = case.removesuffix("_long")
    norm, hook, skip = name.rsplit("_", 2)
    return norm, HOOKS[hook], skip


@cache
def replacement_model(norm: str, hook: str, skip: str) -> ReplacementModel:
    cfg = HookedTransformerConfig(**json.loads((FOLDER / norm / "config.json").read_text()))
    model = HookedTransformer(cfg)
    missing, unexpected = model.load_state_dict(
        load_file(FOLDER / norm / "model.safetensors"), strict=False
    )
    assert not missing and not unexpected, (missing, unexpected)
    transcoders = load_transcoders(FOLDER / norm / skip)
    transcoders.feature_input_hook = hook
    return ReplacementModel.from_model(model, transcoders)


@cache
def graphs(case: str):
    reference = torch.load(FOLDER / f"{case}.pt", weights_only=True)
    model = replacement_model(*parse(case))
    return attribute(reference["input_tokens"], model, **reference["kwargs"]), reference


@pytest.mark.parametrize("case", CASES)
def test_graph_equals_circuit_tracer(case: str) -> None:
    graph, reference = graphs(case)
    assert torch.equal(graph.active_features, reference["active_features"])
    assert torch.equal(graph.selected_features, reference["selected_features"])
    assert [t.vocab_idx for t in graph.logit_targets] == reference["logit_token_ids"]
    expected = reference["adjacency_matrix"]
    n = expected.shape[0]
    torch.testing.assert_close(
        graph.activation_values, reference["activation_values"], rtol=0, atol=tolerance(n)
    )
    assert graph.adjacency_matrix.shape == expected.shape
    scale = expected.abs().max().item()
    error = (graph.adjacency_matrix - expected).abs().max().item()
    assert error <= tolerance(n) * scale, (error, scale)
    node_mask, edge_mask, cumulative = prune_graph(graph, node_threshold=0.8, edge_threshold=0.98)
    assert torch.equal(node_mask, reference["node_mask"])
    assert torch.equal(edge_mask, reference["edge_mask"])
    torch.testing.assert_close(
        cumulative, reference["cumulative_scores"], rtol=0, atol=tolerance(n)
    )
    replacement, completeness = compute_graph_scores(graph)
    assert replacement == pytest.approx(reference["replacement_score"], abs=tolerance(n))
    assert completeness == pytest.approx(reference["completeness_score"], abs=tolerance(n))


@pytest.mark.parametrize("case", CASES)
def test_interventions_equal_circuit_tracer(case: str) -> None:
    reference = torch.load(FOLDER / f"{case}.pt", weights_only=True)
    model = replacement_model(*parse(case))
    tokens = reference["input_tokens"]
    logits, activations = model.get_activations(tokens)
    n = reference["adjacency_matrix"].shape[0]
    atol = tolerance(n) * reference["clean_logits"].abs().max().item()
    torch.testing.assert_close(logits, reference["clean_logits"], rtol=0, atol=atol)
    torch.testing.assert_close(activations, reference["clean_activations"], rtol=0, atol=atol)
    chosen = interventions(reference["interventions"])
    for run in RUNS:
        logits, activations = model.feature_intervention(tokens, chosen, **RUN_KWARGS[run])
        expected = reference["runs"][run]
        torch.testing.assert_close(logits, expected["logits"], rtol=0, atol=atol, msg=run)
        torch.testing.assert_close(activations, expected["activations"], rtol=0, atol=atol)
