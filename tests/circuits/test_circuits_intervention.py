"""Feature interventions equal circuit-tracer 0.5.0's on the same weights and transcoders
(``tests/circuit_tracer_reference/make_graph_files_fixtures.py`` wrote its results): logits
and activations of ``feature_intervention`` with frozen and unfrozen attention, constrained
to every layer and to the last, on pre-activations with an open-ended position, and a greedy
``feature_intervention_generate``; bad interventions fail clearly and leave the model as it
was."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import ReplacementModel, load_transcoders
from interp.tokenizers import CharTokenizer
from tests.support.circuit_tracer_models import REFERENCE, fresh_model, replacement_model

MODELS = ["gpt2_skip", "gpt2_noskip", "gpt2_clt", "llama_skip", "llama_clt"]
MODELS += ["gemma2_skip", "gemma2_clt"]
RUNS = ["frozen", "unfrozen", "constrained_all", "constrained_last", "open_pre_activation"]
TOKENS = torch.tensor([0, 5, 17, 3, 29, 11, 40, 8])
ATOL = 1e-4  # fp32; the measured differences are below 3e-6
ALPHABET = " abcdefghijklmnopqrstuvwxyz.,;:!?'\"<>/&-\n0123456789"[:48]


def reference(name: str) -> dict:
    return torch.load(REFERENCE / "interventions" / f"{name}.pt", weights_only=True)


def interventions(stored: list) -> list:
    """The stored interventions, their ``["slice", start, stop]`` positions as slices."""
    return [
        (layer, slice(pos[1], pos[2]) if isinstance(pos, list) else pos, feature, value)
        for layer, pos, feature, value in stored
    ]


def model_for(name: str) -> ReplacementModel:
    return replacement_model(*name.split("_"))


@pytest.mark.parametrize("name", MODELS)
def test_activations_equal_circuit_tracer(name: str) -> None:
    expected = reference(name)
    logits, activations = model_for(name).get_activations(TOKENS)
    torch.testing.assert_close(logits, expected["clean_logits"], rtol=0, atol=ATOL)
    torch.testing.assert_close(activations, expected["clean_activations"], rtol=0, atol=ATOL)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("name", MODELS)
def test_feature_intervention_equals_circuit_tracer(name: str, run: str) -> None:
    expected = reference(name)
    case = expected["runs"][run]
    chosen = interventions(expected["interventions"][case["interventions"]])
    logits, activations = model_for(name).feature_intervention(TOKENS, chosen, **case["kwargs"])
    torch.testing.assert_close(logits, case["logits"], rtol=0, atol=ATOL)
    torch.testing.assert_close(activations, case["activations"], rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", MODELS)
def test_generate_equals_circuit_tracer(name: str) -> None:
    expected = reference(name)
    case = expected["generate"]
    chosen = interventions(expected["interventions"][case["interventions"]])
    model = model_for(name)
    tokens, logits, activations = model.feature_intervention_generate(
        TOKENS, chosen, **case["kwargs"]
    )
    assert torch.equal(tokens, case["tokens"])
    torch.testing.assert_close(logits, case["logits"], rtol=0, atol=ATOL)
    torch.testing.assert_close(activations, case["activations"], rtol=0, atol=ATOL)


def test_options_agree() -> None:
    """Sparse activations equal dense; without activations the logits stay; setting a
    feature to its own activation changes nothing."""
    model = model_for("llama_clt")
    chosen = interventions(reference("llama_clt")["interventions"]["steer"])
    logits, dense = model.feature_intervention(TOKENS, chosen)
    sparse_logits, sparse = model.feature_intervention(TOKENS, chosen, sparse=True)
    assert sparse.is_sparse and torch.equal(sparse.to_dense(), dense)
    assert torch.equal(sparse_logits, logits)
    quiet_logits, none = model.feature_intervention(TOKENS, chosen, return_activations=False)
    assert none is None
    torch.testing.assert_close(quiet_logits, logits, rtol=0, atol=1e-6)
    clean_logits, clean = model.get_activations(TOKENS)
    same = [(1, 4, int(clean[1, 4].argmax()), clean[1, 4].max().item())]
    unchanged, _ = model.feature_intervention(TOKENS, same, freeze_attention=False)
    torch.testing.assert_close(unchanged, clean_logits, rtol=0, atol=1e-6)


def model_state(model):
    hooks = sum(len(p.fwd_hooks) + len(p.bwd_hooks) for p in model.hook_dict.values())
    torch_hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    with torch.no_grad():
        logits = model(TOKENS[None])
    return hooks, torch_hooks, logits, [p.requires_grad for p in model.parameters()]


@pytest.mark.parametrize("variant", ["skip", "clt"])
def test_bad_input_is_a_clear_error_and_leaves_the_model_unchanged(variant: str) -> None:
    model = fresh_model("llama")  # mlp.hook_in / mlp.hook_out: torch hooks on the MLPs
    model.blocks[0].attn.W_Q.requires_grad_(False)  # a mixed set of flags stays mixed
    replacement = ReplacementModel.from_model(
        model, load_transcoders(REFERENCE / "llama" / variant)
    )
    before = model_state(model)
    bad = {
        "feature 32 is out of range": [(0, 3, 32, 1.0)],
        "feature -1 is out of range": [(0, 3, -1, 1.0)],
        "layer 2 is not a layer": [(2, 3, 0, 1.0)],
        "position 8 is out of range": [(1, 8, 0, 1.0)],
        "position 9 is out of range": [(1, torch.tensor([1, 9]), 0, 1.0)],
        "expected a \\(layer, pos, feature, value\\)": [(0, 3, 1)],
        "value nan is not finite": [(0, 3, 1, float("nan"))],
        "is not finite": [(0, 3, 1, torch.tensor([1.0, float("inf")]))],
    }
    for message, chosen in bad.items():
        with pytest.raises(ValueError, match=message):
            replacement.feature_intervention(TOKENS, chosen)
        with pytest.raises(ValueError, match=message):
            replacement.feature_intervention_generate(TOKENS, chosen, max_new_tokens=2)
    good = [(0, 3, 1, 2.0)]
    with pytest.raises(ValueError, match="constrained_layers"):
        replacement.feature_intervention(TOKENS, good, constrained_layers=range(3))
    with pytest.raises(ValueError, match="one prompt"):
        replacement.feature_intervention(torch.stack([TOKENS, TOKENS]), good)
    with pytest.raises(ValueError, match="use_past_kv_cache"):
        replacement.feature_intervention_generate(TOKENS, good, use_past_kv_cache=False)
    with pytest.raises(ValueError, match="n_ctx"):  # generate's own check, hooks attached
        replacement.feature_intervention_generate(TOKENS, good, max_new_tokens=20)
    with pytest.raises(TypeError, match="must be a number"):
        replacement.feature_intervention(TOKENS, [(0, 3, 1, "big")])
    after = model_state(model)
    assert (after[0], after[1], after[3]) == (before[0], before[1], before[3])
    assert torch.equal(after[2], before[2])
    replacement.feature_intervention(TOKENS, good, constrained_layers=range(2))
    replacement.feature_intervention_generate(
        TOKENS, [(0, slice(1, None), 1, 2.0)], max_new_tokens=2
    )
    after = model_state(model)
    assert (after[0], after[1], after[3]) == (before[0], before[1], before[3])
    assert torch.equal(after[2], before[2])


def test_text_input_is_tokenized_as_the_model_does() -> None:
    model = fresh_model("gpt2")
    model.tokenizer = CharTokenizer(ALPHABET)
    replacement = ReplacementModel.from_model(model, load_transcoders(REFERENCE / "gpt2" / "skip"))
    chosen = [(0, 2, 5, 1.5), (1, slice(1, None), 3, 0.5)]
    logits, activations = replacement.feature_intervention("to be or", chosen)
    tokens = model.to_tokens("to be or")
    expected_logits, expected_activations = replacement.feature_intervention(tokens, chosen)
    assert torch.equal(logits, expected_logits)
    assert torch.equal(activations, expected_activations)
    text, step_logits, _ = replacement.feature_intervention_generate(
        "to be or", chosen, max_new_tokens=3, do_sample=False
    )
    generated, _, _ = replacement.feature_intervention_generate(
        tokens, chosen, max_new_tokens=3, do_sample=False
    )
    assert text == model.to_string(generated[0])
    assert step_logits.shape == (3, model.cfg.d_vocab)


@pytest.mark.parametrize("kwargs", [{}, {"constrained_layers": range(2)}])
def test_generate_first_step_is_feature_intervention(kwargs: dict) -> None:
    """The prompt's forward of a generation (frozen norm scales too, when constrained to
    every layer: ln_final runs on the last position only) is ``feature_intervention``'s."""
    model = model_for("gemma2_skip")
    chosen = [(0, slice(1, None), 1, 1.5), (1, 7, 25, 0.0)]
    _, step_logits, activations = model.feature_intervention_generate(
        TOKENS, chosen, max_new_tokens=3, do_sample=False, **kwargs
    )
    logits, prompt_activations = model.feature_intervention(TOKENS, chosen, **kwargs)
    torch.testing.assert_close(step_logits[0], logits[0, -1], rtol=0, atol=1e-6)
    assert torch.equal(activations[:, : len(TOKENS)], prompt_activations)
