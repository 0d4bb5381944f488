"""Composition scores: factored against dense, and the planted circuit's K-composition."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.analysis import all_composition_scores, composition_scores, get_comp_score
from tests.support.induction_circuit import INDUCTION_HEAD, PREVIOUS_HEAD, planted_induction_model
from tests.support.tolerances import tolerance


@pytest.fixture(scope="module")
def model():
    cfg = HookedTransformerConfig(n_layers=3, d_model=24, n_heads=2, d_vocab=20, n_ctx=8, seed=0)
    return HookedTransformer(cfg)


# A score is a ratio of norms of products of d_model x d_model matrices: sums of d_model^2
# products, computed densely here and through the factored matrices' thin d_head side there.
SCORE_TOLERANCE = tolerance(torch.float32, reduction=24 * 24, depth=3)


@pytest.mark.parametrize("mode", ["Q", "K", "V"])
def test_all_composition_scores_match_dense_get_comp_score(model, mode):
    scores, labels = all_composition_scores(model, mode, return_labels=True)
    assert scores.shape == (3, 2, 3, 2)
    assert labels == ["L0H0", "L0H1", "L1H0", "L1H1", "L2H0", "L2H1"]
    OV, QK = model.OV.AB, model.QK.AB  # dense [n_layers, n_heads, d_model, d_model]
    for earlier in range(3):
        for later in range(3):
            for head_a in range(2):
                for head_b in range(2):
                    if earlier >= later:
                        assert scores[earlier, head_a, later, head_b] == 0
                        continue
                    right = {"Q": QK, "K": QK.transpose(-2, -1), "V": OV}[mode][later, head_b]
                    expected = get_comp_score(OV[earlier, head_a], right)
                    torch.testing.assert_close(
                        scores[earlier, head_a, later, head_b], expected, **SCORE_TOLERANCE
                    )


def test_composition_scores_without_broadcasting(model):
    scores = composition_scores(model.OV[0], model.QK[1], broadcast_dims=False)  # head h to h
    assert scores.shape == (2,)
    expected = torch.stack([get_comp_score(model.OV[0, h].AB, model.QK[1, h].AB) for h in range(2)])
    torch.testing.assert_close(scores, expected, **SCORE_TOLERANCE)


def test_planted_induction_head_k_composes_with_the_previous_token_head():
    model = planted_induction_model()
    k_scores = all_composition_scores(model, "K")[0, :, 1, :]  # [layer-0 head, layer-1 head]
    q_scores = all_composition_scores(model, "Q")[0, :, 1, :]
    strongest = divmod(int(k_scores.argmax()), k_scores.shape[1])
    assert strongest == (PREVIOUS_HEAD[1], INDUCTION_HEAD[1])
    pair = (PREVIOUS_HEAD[1], INDUCTION_HEAD[1])
    assert k_scores[pair] > 1.5 * q_scores.max()  # it reads keys, not queries


def test_bad_mode(model):
    with pytest.raises(ValueError, match="mode must be 'Q', 'K' or 'V'"):
        all_composition_scores(model, "O")
