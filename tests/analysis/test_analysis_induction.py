"""The repeated-random-tokens induction test on the planted circuit and a random model."""

from __future__ import annotations

import math

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.analysis import induction_test, repeated_random_tokens
from interp.analysis.head_scores import attention_similarity, induction_pattern
from tests.support.induction_circuit import (
    D_VOCAB,
    INDUCTION_HEAD,
    N_CTX,
    planted_induction_model,
    random_attn_only_model,
)
from tests.support.tolerances import model_tolerance


def test_repeated_random_tokens_layout():
    tokens = repeated_random_tokens(100, seq_len=5, batch=3, bos_token_id=99, seed=0)
    assert tokens.shape == (3, 11)
    assert (tokens[:, 0] == 99).all()
    assert torch.equal(tokens[:, 1:6], tokens[:, 6:])
    assert torch.equal(tokens, repeated_random_tokens(100, 5, 3, bos_token_id=99, seed=0))


def test_planted_induction_head_found_and_second_copy_predicted():
    result = induction_test(planted_induction_model(), seq_len=10, batch=8)
    scores = result.induction_scores
    assert scores.shape == (2, 3) and result.labels[1][1] == "L1H1"
    assert divmod(int(scores.argmax()), 3) == INDUCTION_HEAD
    assert scores[INDUCTION_HEAD] > 0.6
    assert result.loss_by_position.shape == (19,)
    assert result.second_copy_loss < 1.0 < math.log(D_VOCAB) < result.first_copy_loss


def test_random_model_has_no_induction():
    result = induction_test(random_attn_only_model(), seq_len=10, batch=8)
    assert result.induction_scores.max() < 0.2
    assert abs(result.second_copy_loss - result.first_copy_loss) < 0.1


def test_stripe_agrees_with_the_induction_detection_pattern():
    """With BOS and no repeats inside a copy, each second-copy row of the induction pattern
    has one 1, on the stripe: the score is the fraction of attention there (rows sum to 1)."""
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=16, n_heads=2, d_vocab=50257, n_ctx=32, seed=0, init_range=0.3
    )
    model = HookedTransformer(cfg, tokenizer="gpt2").eval()
    result = induction_test(model, seq_len=8, batch=4, seed=3)
    assert result.tokens.shape == (4, 17) and (result.tokens[:, 0] == 50256).all()
    _, cache = model.run_with_cache(result.tokens)
    second_copy = slice(9, 17)
    expected = torch.stack(
        [
            attention_similarity(
                cache["pattern", 0][b][:, second_copy],
                induction_pattern(result.tokens[b])[second_copy],
            )
            for b in range(4)
        ]
    ).mean(0)
    within = model_tolerance(model.cfg, expected)  # patterns of a run of its own
    torch.testing.assert_close(result.induction_scores[0], expected, **within)


def test_sequence_must_fit():
    with pytest.raises(ValueError, match=f"n_ctx={N_CTX}"):
        induction_test(random_attn_only_model(), seq_len=13)
