"""Head detection: TransformerLens's detect_head as the reference, and a planted circuit."""

from __future__ import annotations

import pytest
import torch
from transformer_lens import head_detector as tl_head_detector

import interp
from interp import HookedTransformer, HookedTransformerConfig
from interp.analysis import head_scores, repeated_random_tokens
from interp.head_detector import HEAD_NAMES, detect_head
from tests.support.induction_circuit import (
    D_VOCAB,
    DUPLICATE_HEAD,
    INDUCTION_HEAD,
    PREVIOUS_HEAD,
    planted_induction_model,
    random_attn_only_model,
)
from tests.support.tolerances import model_tolerance

TEXT = "one two three four one two three four one two three four"
PLANTED = {
    "previous_token_head": PREVIOUS_HEAD,
    "duplicate_token_head": DUPLICATE_HEAD,
    "induction_head": INDUCTION_HEAD,
}


@pytest.fixture(scope="module")
def gpt2_vocab_model():
    """A random model with GPT-2's tokenizer; init_range 0.2 makes attention far from uniform."""
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_vocab=50257, n_ctx=32, seed=0, init_range=0.2
    )
    return HookedTransformer(cfg, tokenizer=interp.get_tokenizer("gpt2")).eval()


@pytest.fixture(scope="module")
def planted():
    return planted_induction_model()


@pytest.fixture(scope="module")
def repeated_tokens():
    return repeated_random_tokens(D_VOCAB, seq_len=10, batch=6, seed=0)


@pytest.mark.parametrize("name", HEAD_NAMES)
@pytest.mark.parametrize("error_measure", ["mul", "abs"])
@pytest.mark.parametrize("exclude", [(False, False), (True, False), (True, True)])
def test_matches_transformer_lens(gpt2_vocab_model, name, error_measure, exclude):
    exclude_bos, exclude_current_token = exclude
    _, cache = gpt2_vocab_model.run_with_cache(TEXT, remove_batch_dim=True)
    expected = tl_head_detector.detect_head(
        gpt2_vocab_model,
        TEXT,
        name,
        cache=cache,
        exclude_bos=exclude_bos,
        exclude_current_token=exclude_current_token,
        error_measure=error_measure,
    )
    actual = detect_head(
        gpt2_vocab_model,
        TEXT,
        name,
        exclude_bos=exclude_bos,
        exclude_current_token=exclude_current_token,
        error_measure=error_measure,
    )
    assert actual.shape == (2, 4)
    # Scores are fractions of attention (at most 1), from patterns of runs of their own.
    within = model_tolerance(gpt2_vocab_model.cfg, 1.0)
    torch.testing.assert_close(actual, expected.float(), **within)


def test_detection_patterns_match_transformer_lens(gpt2_vocab_model):
    tokens = gpt2_vocab_model.to_tokens(TEXT)
    for name in HEAD_NAMES:
        reference = getattr(tl_head_detector, f"get_{name}_detection_pattern")(tokens)
        ours = getattr(interp.head_detector, f"get_{name}_detection_pattern")(tokens)
        torch.testing.assert_close(ours, reference.float())


def test_custom_pattern_heads_subset_and_several_texts(gpt2_vocab_model):
    texts = ["a b c a b c", "x y x y x y z"]
    expected = torch.stack(
        [tl_head_detector.detect_head(gpt2_vocab_model, t, "induction_head") for t in texts]
    ).mean(0)
    torch.testing.assert_close(detect_head(gpt2_vocab_model, texts, "induction_head"), expected)

    n_pos = gpt2_vocab_model.to_tokens(TEXT).shape[1]
    attend_to_bos = torch.zeros(n_pos, n_pos)
    attend_to_bos[:, 0] = 1
    scores = detect_head(gpt2_vocab_model, TEXT, attend_to_bos, heads=[(1, 2), (0, 0)])
    reference = tl_head_detector.detect_head(
        gpt2_vocab_model, TEXT, attend_to_bos, heads={1: [2], 0: [0]}
    )
    torch.testing.assert_close(scores, reference.float())
    assert (scores == -1).sum() == 6 and scores[1, 2] > 0


@pytest.mark.parametrize("name", HEAD_NAMES)
def test_planted_heads_rank_first_and_random_heads_score_low(planted, repeated_tokens, name):
    scores = detect_head(planted, repeated_tokens, name)
    top = divmod(int(scores.argmax()), scores.shape[1])
    assert top == PLANTED[name]
    assert scores.max() > 0.5
    random_scores = detect_head(random_attn_only_model(), repeated_tokens, name)
    assert random_scores.max() < 0.2
    assert scores.max() > 3 * random_scores.max()


def test_head_scores_equal_detect_head_for_every_type(planted, repeated_tokens):
    scores, labels = head_scores(
        planted, repeated_tokens, exclude_current_token=True, return_labels=True
    )
    assert set(scores) == set(HEAD_NAMES)
    assert labels[1][1] == "L1H1" and len(labels) == 2 and len(labels[0]) == 3
    for name in HEAD_NAMES:
        expected = detect_head(planted, repeated_tokens, name, exclude_current_token=True)
        torch.testing.assert_close(scores[name], expected, **model_tolerance(planted.cfg, 1.0))
    _, cache = planted.run_with_cache(repeated_tokens)
    from_cache = head_scores(planted, repeated_tokens, cache=cache, exclude_current_token=True)
    torch.testing.assert_close(from_cache["induction_head"], scores["induction_head"])


def test_bad_input_is_explained(gpt2_vocab_model, planted, repeated_tokens):
    with pytest.raises(ValueError, match="Unknown head type 'copy_head'"):
        detect_head(gpt2_vocab_model, TEXT, "copy_head")
    with pytest.raises(ValueError, match=r"Head \(2, 0\) does not exist"):
        detect_head(gpt2_vocab_model, TEXT, "induction_head", heads=[(2, 0)])
    _, cache = gpt2_vocab_model.run_with_cache(TEXT)
    with pytest.raises(ValueError, match="A cache holds one sequence"):
        detect_head(gpt2_vocab_model, [TEXT, TEXT], "induction_head", cache=cache)
    _, batch_cache = gpt2_vocab_model.run_with_cache([TEXT, TEXT])
    with pytest.raises(ValueError, match="holds a batch of 2 sequences"):
        detect_head(gpt2_vocab_model, TEXT, "induction_head", cache=batch_cache)
    with pytest.raises(ValueError, match="lower triangular with shape"):
        detect_head(gpt2_vocab_model, TEXT, torch.ones(3, 3))
    with pytest.raises(ValueError, match="needs 2..n_ctx=32"):
        detect_head(gpt2_vocab_model, torch.zeros(40, dtype=torch.long), "induction_head")
    with pytest.raises(ValueError, match="error_measure must be"):
        detect_head(gpt2_vocab_model, TEXT, "induction_head", error_measure="l2")
    with pytest.raises(ValueError, match="pass the cache of these tokens"):
        head_scores(planted, repeated_tokens, cache=planted.run_with_cache(repeated_tokens[:2])[1])
