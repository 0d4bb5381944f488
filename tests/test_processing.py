"""Weight processing: log-probabilities unchanged, each step's promised property, and the same
weights as TransformerLens's ``ProcessWeights`` on the same state dict."""

from __future__ import annotations

import pytest
import torch
from transformer_lens.weight_processing import ProcessWeights

from interp import HookedTransformer, HookedTransformerConfig
from interp.loading import processing
from interp.loading.hf import from_hf_model
from tests.conftest import make_hf_gpt2
from tests.test_loading_hf import tokens

STEPS = [
    "fold_ln",
    "center_writing_weights",
    "center_unembed",
    "fold_value_biases",
    "refactor_factored_attn_matrices",
]


def fresh_model(n_layer: int = 2) -> HookedTransformer:
    return from_hf_model(make_hf_gpt2(n_layer=n_layer), tokenizer=None).eval()


def log_probs(model: HookedTransformer) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens()).log_softmax(-1)


def only(step: str) -> dict[str, bool]:
    return {name: name == step for name in STEPS}


@pytest.mark.parametrize("step", STEPS)
def test_each_step_keeps_log_probs(step):
    model = fresh_model()
    before = log_probs(model)
    model.process_weights_(**only(step))
    assert (log_probs(model) - before).abs().max() <= 1e-4


def test_all_steps_together_keep_log_probs_and_hooks_work():
    model = fresh_model(n_layer=3)
    before = log_probs(model)
    model.process_weights_(refactor_factored_attn_matrices=True)
    assert (log_probs(model) - before).abs().max() <= 1e-4
    _, cache = model.run_with_cache(tokens(), names_filter=lambda name: "ln1" in name)
    assert cache["blocks.0.ln1.hook_normalized"].mean(-1).abs().max() < 1e-5


def test_fold_ln_property():
    model = fresh_model()
    model.process_weights_(**only("fold_ln"))
    assert model.cfg.normalization_type == "LNPre"
    assert not any(name.endswith(("ln1.w", "ln2.b", "ln_final.w")) for name in model.state_dict())
    for weight in (model.W_Q, model.W_K, model.W_V):  # [layer, head, d_model, d_head]
        assert weight.mean(dim=2).abs().max() < 1e-6  # readers centred over d_model
    assert model.W_in.mean(dim=1).abs().max() < 1e-6
    assert model.W_U.mean(dim=0).abs().max() < 1e-6
    model.process_weights_(**only("fold_ln"))  # already folded: nothing to do
    assert model.cfg.normalization_type == "LNPre"


def test_center_writing_weights_property():
    model = fresh_model()
    model.process_weights_(**only("center_writing_weights"))
    for writer in (model.W_E, model.W_pos, model.W_O, model.b_O, model.W_out, model.b_out):
        assert writer.mean(dim=-1).abs().max() < 1e-6


def test_center_unembed_property():
    model = fresh_model()
    model.process_weights_(**only("center_unembed"))
    assert model.W_U.mean(dim=-1).abs().max() < 1e-6
    assert model.b_U.mean().abs() < 1e-6


def test_fold_value_biases_property():
    model = fresh_model()
    assert model.b_V.abs().max() > 0
    model.process_weights_(**only("fold_value_biases"))
    assert not model.b_V.any()


def test_refactor_property_and_products():
    model = fresh_model()
    qk_before = torch.cat([model.W_Q, model.b_Q[:, :, None]], dim=2)  # [l, h, m + 1, d]
    kk_before = torch.cat([model.W_K, model.b_K[:, :, None]], dim=2)
    ov_before = model.W_V @ model.W_O
    model.process_weights_(**only("refactor_factored_attn_matrices"))
    query = torch.cat([model.W_Q, model.b_Q[:, :, None]], dim=2)
    key = torch.cat([model.W_K, model.b_K[:, :, None]], dim=2)
    torch.testing.assert_close(query @ key.mT, qk_before @ kk_before.mT, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(model.W_V @ model.W_O, ov_before, atol=1e-5, rtol=1e-4)
    d_head = model.cfg.d_head
    query_gram, key_gram = query.mT @ query, key.mT @ key  # [l, h, d, d]
    torch.testing.assert_close(query_gram, key_gram, atol=1e-5, rtol=1e-4)
    off_diagonal = ~torch.eye(d_head, dtype=torch.bool)
    assert query_gram[..., off_diagonal].abs().max() < 1e-5
    eye = torch.eye(d_head).expand_as(query_gram)
    torch.testing.assert_close(model.W_O @ model.W_O.mT, eye, atol=1e-5, rtol=1e-5)
    assert (model.W_V.mT @ model.W_V)[..., off_diagonal].abs().max() < 1e-5
    assert not model.b_V.any()


TL_STEPS = [  # the steps of process_weights_'s defaults, in order
    ProcessWeights.fold_layer_norm,
    ProcessWeights.center_writing_weights,
    ProcessWeights.center_unembed,
    ProcessWeights.fold_value_biases,
]


def test_same_weights_as_transformer_lens():
    model = fresh_model()
    reference = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    for tl_step in TL_STEPS:
        reference = tl_step(reference, model.cfg)
    model.process_weights_()
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, reference[name], atol=1e-5, rtol=1e-5, msg=name)
    for name in set(reference) - set(model.state_dict()):  # TL keeps folded norms as w=1, b=0
        assert name.split(".")[-2] in ("ln1", "ln2", "ln_final"), name


def test_bad_input_leaves_the_model_unchanged():
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=16, n_heads=2, d_vocab=10, n_ctx=8, normalization_type=None, seed=0
    )
    model = HookedTransformer(cfg)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with pytest.raises(ValueError, match="fold_ln needs a model with layer norms"):
        model.process_weights_()
    with pytest.raises(ValueError, match="center_writing_weights needs layer norms"):
        processing.center_writing_weights(model)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_attention_only_and_half_precision():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_vocab=50, n_ctx=16, attn_only=True, seed=0
    )
    model = HookedTransformer(cfg)
    with torch.no_grad():
        for block in model.blocks:
            block.ln1.w.uniform_(0.5, 1.5)
            block.ln1.b.normal_()
    before = log_probs_of(model)
    model.process_weights_(refactor_factored_attn_matrices=True)
    assert (log_probs_of(model) - before).abs().max() <= 1e-4
    half = HookedTransformer(HookedTransformerConfig(**{**cfg.to_dict(), "dtype": "bfloat16"}))
    half.process_weights_(refactor_factored_attn_matrices=True)
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}


def log_probs_of(model: HookedTransformer) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens(vocab=model.cfg.d_vocab)).log_softmax(-1)
