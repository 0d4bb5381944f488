"""Feature functions given a feature index, position or token id out of range (or of the
wrong type) raise an error naming the value and the valid range before anything runs;
negative indices count from the end, as Python's indexing does."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.sae import SAE, SAEConfig
from interp.sae.features import (
    feature_dla,
    feature_logit_weights,
    feature_patch,
    top_activations,
    top_logits,
)
from interp.sae.splice import HookedSAETransformer

RESID = "blocks.1.hook_resid_post"
D_SAE = 32


@pytest.fixture(scope="module")
def model():
    return HookedSAETransformer.from_model(interp.load_model("shakespeare-char")).eval()


@pytest.fixture(scope="module")
def sae(model):
    torch.manual_seed(0)
    sae = SAE(SAEConfig(d_in=model.cfg.d_model, d_sae=D_SAE, hook_name=RESID))
    with torch.no_grad():
        sae.W_enc.copy_(torch.randn_like(sae.W_enc) * 0.1)
    return sae


@pytest.fixture(scope="module")
def tokens(model):
    return model.to_tokens("ROMEO:\nWhat")  # [1, 11]


def metric(logits):
    return logits[0, -1, 3]


def no_hooks_left(model) -> bool:
    return not any(point.has_hooks for point in model.hook_dict.values())


@pytest.mark.parametrize(
    "feature, k, message",
    [
        (D_SAE, 5, rf"feature={D_SAE} is out of range for {D_SAE} features: pass 0..{D_SAE - 1}"),
        (-D_SAE - 1, 5, rf"feature=-{D_SAE + 1} is out of range"),
        (1.5, 5, r"feature must be an int, got 1.5"),
        (3, -1, r"k must be an int >= 0, got -1"),
        (3, 66, r"k=66 is more than the 65 tokens there are"),
    ],
)
def test_top_logits_names_the_bad_value(model, sae, feature, k, message):
    with pytest.raises((ValueError, TypeError), match=message):
        top_logits(model, sae, feature, k=k)


def test_top_logits_counts_negative_features_from_the_end(model, sae):
    weights = feature_logit_weights(model, sae)
    assert top_logits(model, sae, -1, weights=weights) == top_logits(
        model, sae, D_SAE - 1, weights=weights
    )


@pytest.mark.parametrize(
    "index, message",
    [
        ([(11, 5)], r"index row 0 \(11, 5\): position=11 is out of range for tokens of 11 "),
        ([(1, 2), (-12, 5)], r"index row 1 \(-12, 5\): position=-12 .* pass 0..10"),
        ([(1, D_SAE)], rf"feature={D_SAE} is out of range for an SAE with d_sae={D_SAE}"),
        ([1, 2, 3], r"index must be \(position, feature\) pairs, \[n, 2\]; got shape \(3,\)"),
        ([(1.0, 2.0)], r"index must hold integer \(position, feature\) pairs"),
    ],
)
def test_feature_patch_names_the_bad_row_and_runs_nothing(model, sae, tokens, index, message):
    with pytest.raises((ValueError, TypeError), match=message):
        feature_patch(model, sae, tokens, metric, index)
    assert no_hooks_left(model)


def test_feature_patch_values_of_the_wrong_shape(model, sae, tokens):
    with pytest.raises(ValueError, match=r"values must be \[batch, pos, d_sae\] = \(1, 11, 32\)"):
        feature_patch(model, sae, tokens, metric, [(1, 2)], values=torch.zeros(1, 11, 5))


def test_feature_patch_negative_indices_count_from_the_end(model, sae, tokens):
    negative = feature_patch(model, sae, tokens, metric, [(-1, 5), (-2, -3)])
    positive = feature_patch(model, sae, tokens, metric, [(10, 5), (9, D_SAE - 3)])
    torch.testing.assert_close(negative, positive, atol=0, rtol=0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(answer=3, position=11), r"position=11 is out of range for 11 tokens: pass 0..10"),
        (dict(answer=65), r"answer=65 is not a token id of this model: pass 0..64"),
        (dict(answer=-1), r"answer=-1 is not a token id"),
        (dict(answer=3, wrong_answer=100), r"wrong_answer=100 is not a token id"),
    ],
)
def test_feature_dla_names_the_bad_value(model, sae, tokens, kwargs, message):
    with pytest.raises(ValueError, match=message):
        feature_dla(model, sae, tokens, **kwargs)


def test_feature_dla_takes_one_prompt(model, sae, tokens):
    with pytest.raises(ValueError, match=r"one prompt, tokens \[1, pos\]; got shape \(2, 11\)"):
        feature_dla(model, sae, tokens.expand(2, -1), 3)
    torch.testing.assert_close(
        feature_dla(model, sae, tokens[0], 3, position=-1),
        feature_dla(model, sae, tokens, 3, position=10),
    )


def test_mining_arguments_and_contexts(model, sae, tokens):
    with pytest.raises(ValueError, match=r"k must be an int >= 1, got 0"):
        top_activations(model, sae, tokens, k=0)
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1, got 0"):
        top_activations(model, sae, tokens, batch_size=0)
    stats = top_activations(model, sae, tokens, k=2, left=2, right=1)
    with pytest.raises(ValueError, match=rf"feature={D_SAE} is out of range .* d_sae={D_SAE}"):
        stats.contexts(D_SAE)
    assert stats.contexts(-1) == stats.contexts(D_SAE - 1)
    with pytest.raises(ValueError, match=r"n must be an int >= 0, got -2"):
        stats.most_active(-2)
