"""Weight processing: log-probabilities unchanged, each step's promised property, and the same
weights as TransformerLens's ``ProcessWeights`` on the same state dict."""

from __future__ import annotations

import warnings

import pytest
import torch
from transformer_lens.weight_processing import ProcessWeights

from interp import HookedTransformer, HookedTransformerConfig
from interp.loading import processing
from interp.loading.hf import from_hf_model
from tests.conftest import make_hf_gpt2
from tests.loading.test_families_parity import CASES, saved
from tests.loading.test_families_parity import tokens as family_tokens
from tests.loading.test_loading_hf import tokens
from tests.support.tolerances import mean_bound, model_error_bound, tolerance, within_contract

# One checkpoint per family shape: Pythia (LN, parallel), Llama (RMS, GQA), Gemma 2 (sandwich
# norms, soft caps), Gemma 3 (QK norms).
FAMILY_CASES = {
    name: CASES[name]
    for name in (
        "neox-parallel-partial-rotary",
        "llama-gqa2-llama3-rope",
        "gemma2-soft-caps-bite-window-4",
        "gemma3-dual-rope-linear-window-4",
    )
}

STEPS = [
    "fold_ln",
    "center_writing_weights",
    "center_unembed",
    "fold_value_biases",
    "refactor_factored_attn_matrices",
]


def fresh_model(n_layer: int = 2) -> HookedTransformer:
    return from_hf_model(make_hf_gpt2(n_layer=n_layer), tokenizer=None).eval()


def log_probs_bound(model: HookedTransformer, tokens: torch.Tensor) -> float:
    """How far processing may move the log-probabilities: the README's 1e-4, or twice the
    forward's rounding bound at the largest logit (a log-softmax doubles it) where larger."""
    with torch.no_grad():
        logits = model(tokens)
    return within_contract(1e-4, 2 * model_error_bound(model.cfg, logits.abs().max()))


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
    assert (log_probs(model) - before).abs().max() <= log_probs_bound(model, tokens())


def test_all_steps_together_keep_log_probs_and_hooks_work():
    model = fresh_model(n_layer=3)
    before = log_probs(model)
    model.process_weights_(refactor_factored_attn_matrices=True)
    assert (log_probs(model) - before).abs().max() <= log_probs_bound(model, tokens())
    _, cache = model.run_with_cache(tokens(), names_filter=lambda name: "ln1" in name)
    normalized = cache["blocks.0.ln1.hook_normalized"]
    assert normalized.mean(-1).abs().max() <= mean_bound(normalized, -1)


def test_fold_ln_property():
    model = fresh_model()
    model.process_weights_(**only("fold_ln"))
    assert model.cfg.normalization_type == "LNPre"
    assert not any(name.endswith(("ln1.w", "ln2.b", "ln_final.w")) for name in model.state_dict())
    for weight in (model.W_Q, model.W_K, model.W_V):  # [layer, head, d_model, d_head]
        assert weight.mean(dim=2).abs().max() <= mean_bound(weight, 2)  # centred over d_model
    assert model.W_in.mean(dim=1).abs().max() <= mean_bound(model.W_in, 1)
    assert model.W_U.mean(dim=0).abs().max() <= mean_bound(model.W_U, 0)
    model.process_weights_(**only("fold_ln"))  # already folded: nothing to do
    assert model.cfg.normalization_type == "LNPre"


def test_center_writing_weights_property():
    model = fresh_model()
    model.process_weights_(**only("center_writing_weights"))
    for writer in (model.W_E, model.W_pos, model.W_O, model.b_O, model.W_out, model.b_out):
        assert writer.mean(dim=-1).abs().max() <= mean_bound(writer, -1)


def test_center_unembed_property():
    model = fresh_model()
    model.process_weights_(**only("center_unembed"))
    assert model.W_U.mean(dim=-1).abs().max() <= mean_bound(model.W_U, -1)
    assert model.b_U.mean().abs() <= mean_bound(model.b_U, -1)


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

    # An SVD of each product (backward stable: eps of its norm), then products of its factors:
    # sums over d_model + 1 terms, three computations chained.
    def svd_tolerance(values: torch.Tensor) -> dict[str, float]:
        return tolerance(torch.float32, reduction=model.cfg.d_model + 1, depth=3, magnitude=values)

    qk = qk_before @ kk_before.mT
    torch.testing.assert_close(query @ key.mT, qk, **svd_tolerance(qk))
    torch.testing.assert_close(model.W_V @ model.W_O, ov_before, **svd_tolerance(ov_before))
    d_head = model.cfg.d_head
    query_gram, key_gram = query.mT @ query, key.mT @ key  # [l, h, d, d]
    torch.testing.assert_close(query_gram, key_gram, **svd_tolerance(key_gram))
    off_diagonal = ~torch.eye(d_head, dtype=torch.bool)
    assert query_gram[..., off_diagonal].abs().max() < svd_tolerance(key_gram)["atol"]
    eye = torch.eye(d_head).expand_as(query_gram)
    torch.testing.assert_close(model.W_O @ model.W_O.mT, eye, **svd_tolerance(eye))
    gram = model.W_V.mT @ model.W_V
    assert gram[..., off_diagonal].abs().max() < svd_tolerance(gram)["atol"]
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
        # Each folded weight: a product and a sum over d_model, in another order.
        within = tolerance(torch.float32, reduction=model.cfg.d_model, depth=2, magnitude=tensor)
        torch.testing.assert_close(tensor, reference[name], **within, msg=name)
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
    bound = log_probs_bound(model, tokens(vocab=model.cfg.d_vocab))
    assert (log_probs_of(model) - before).abs().max() <= bound
    half = HookedTransformer(HookedTransformerConfig(**{**cfg.to_dict(), "dtype": "bfloat16"}))
    half.process_weights_(refactor_factored_attn_matrices=True)
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}


def log_probs_of(model: HookedTransformer) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens(vocab=model.cfg.d_vocab)).log_softmax(-1)


# ---------------------------------------------------------------- the other model families
@pytest.fixture(scope="module", params=list(FAMILY_CASES))
def family_folder(request, tmp_path_factory):
    """A random tiny checkpoint of one family (see tests.loading.test_families_parity), saved."""
    folder = tmp_path_factory.mktemp(request.param)
    saved(folder, request.param)  # randomized: norm weights away from 1, so folding matters
    return folder


def family_log_probs(model: HookedTransformer) -> torch.Tensor:
    with torch.no_grad():
        return model(family_tokens()).log_softmax(-1)


def test_transformer_lens_processing_keeps_log_probs_on_every_family(family_folder):
    raw = HookedTransformer.from_pretrained_no_processing(family_folder, tokenizer=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        processed = HookedTransformer.from_pretrained(family_folder, tokenizer=None)
    skipped = " ".join(str(warning.message) for warning in caught)
    cfg = raw.cfg
    assert processed.cfg.normalization_type == f"{cfg.normalization_type}Pre"
    assert ("center_writing_weights" in skipped) == (cfg.normalization_type == "RMS")
    assert ("center_unembed" in skipped) == (cfg.output_logits_soft_cap > 0)
    bound = log_probs_bound(raw, family_tokens())
    assert (family_log_probs(processed) - family_log_probs(raw)).abs().max() <= bound
    if cfg.normalization_type == "LN":  # Pythia: writing weights and unembedding centred
        assert processed.W_out.mean(-1).abs().max() <= mean_bound(processed.W_out, -1)
        assert processed.W_U.mean(-1).abs().max() <= mean_bound(processed.W_U, -1)
    assert not processed.b_V.any()


def test_rms_fold_keeps_post_norms_and_qk_norms_and_hooks(family_folder):
    model = HookedTransformer.from_pretrained_no_processing(family_folder, tokenizer=None)
    if model.cfg.normalization_type != "RMS":
        pytest.skip("a layer-norm family")
    before = family_log_probs(model)
    bound = log_probs_bound(model, family_tokens())
    seen = []
    model.blocks[0].ln1.hook_normalized.add_hook(lambda act, hook: seen.append(act.shape))
    kept = {
        name: tensor.clone()
        for name, tensor in model.state_dict().items()
        if "_post." in name or "q_norm" in name or "k_norm" in name
    }
    model.process_weights_(fold_ln=True, center_writing_weights=False, center_unembed=False)
    assert model.cfg.normalization_type == "RMSPre"
    assert not any(name.endswith(("ln1.w", "ln2.w", "ln_final.w")) for name in model.state_dict())
    for name, tensor in kept.items():  # the norms that cannot be folded keep their weights
        assert torch.equal(model.state_dict()[name], tensor), name
    assert (family_log_probs(model) - before).abs().max() <= bound
    assert seen == [(2, family_tokens().shape[1], model.cfg.d_model)]  # the hook moved along
    model.process_weights_(fold_ln=True, center_writing_weights=False, center_unembed=False)


def test_steps_that_cannot_apply_are_errors_naming_the_fix(family_folder):
    model = HookedTransformer.from_pretrained_no_processing(family_folder, tokenizer=None)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with pytest.raises(ValueError, match="rotary embeddings rotate q and k between W_Q and W_K"):
        processing.process_weights(
            model, **{name: name == "refactor_factored_attn_matrices" for name in STEPS}
        )
    if model.cfg.normalization_type == "RMS":
        with pytest.raises(ValueError, match=r"center_writing_weights needs layer norms .* pass "):
            model.process_weights_()
    if model.cfg.output_logits_soft_cap > 0:
        with pytest.raises(ValueError, match=r"output soft-cap .* pass center_unembed=False\."):
            processing.process_weights(model, fold_ln=False, center_writing_weights=False)
    for name, tensor in model.state_dict().items():  # checked before any step ran
        assert torch.equal(tensor, before[name]), name


def test_layer_norm_bias_cannot_fold_into_a_gated_mlp():
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=16, n_heads=2, d_mlp=32, d_vocab=10, n_ctx=16, gated_mlp=True,
        act_fn="silu", seed=0,
    )  # fmt: skip
    model = HookedTransformer(cfg.to_dict())
    before = log_probs_of(model)
    model.process_weights_(center_unembed=False)  # zero biases: folds exactly
    bound = log_probs_bound(model, tokens(vocab=model.cfg.d_vocab))
    assert (log_probs_of(model) - before).abs().max() <= bound
    model = HookedTransformer(cfg.to_dict())
    with torch.no_grad():
        model.blocks[0].ln2.b.fill_(0.5)
    with pytest.raises(ValueError, match=r"bias of ln2 \(blocks \[0\]\) into a gated MLP"):
        model.process_weights_()


def test_grouped_query_value_biases_fold_into_the_stored_weights():
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=16, n_heads=4, n_key_value_heads=2, d_vocab=10, n_ctx=16,
        normalization_type="RMS", positional_embedding_type="rotary", seed=0,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    with torch.no_grad():
        model.blocks[0].attn._b_V.normal_()
        model.blocks[0].ln1.w.uniform_(0.5, 1.5)
    before = log_probs_of(model)
    model.process_weights_(center_writing_weights=False)
    assert not model.blocks[0].attn._b_V.any()
    bound = log_probs_bound(model, tokens(vocab=model.cfg.d_vocab))
    assert (log_probs_of(model) - before).abs().max() <= bound
