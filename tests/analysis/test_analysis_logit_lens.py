"""The logit lens: the last stage is the model's output; every stage is a naive recomputation."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.analysis import logit_lens, repeated_random_tokens
from tests.support.induction_circuit import planted_induction_model
from tests.support.tolerances import model_tolerance, tolerance


@pytest.fixture(scope="module")
def model():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_vocab=60, n_ctx=16, seed=0, init_range=0.2
    )
    return HookedTransformer(cfg).eval()


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 60, (2, 7), generator=torch.Generator().manual_seed(0))


def test_stages_shapes_and_the_final_stage_is_the_model(model, tokens):
    lens = logit_lens(model, tokens, top_k=3)
    assert lens.labels == ["0_pre", "0_mid", "1_pre", "1_mid", "final_post"]
    assert lens.top_tokens.shape == lens.top_probs.shape == (5, 2, 7, 3)
    assert lens.correct_probs.shape == lens.correct_ranks.shape == (5, 2, 6)
    logits = model(tokens)
    probs = logits.softmax(-1)
    expected = probs.topk(3, dim=-1)
    # A probability moves by at most twice its logits' error (the lens runs the cache's path).
    within = model_tolerance(model.cfg, 2 * logits)
    torch.testing.assert_close(lens.top_probs[-1], expected.values, **within)
    assert torch.equal(lens.top_tokens[-1], expected.indices)
    next_probs = probs[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]
    torch.testing.assert_close(lens.correct_probs[-1], next_probs, **within)
    ranks = (probs[:, :-1] > next_probs[..., None]).sum(-1)
    assert torch.equal(lens.correct_ranks[-1], ranks)


def test_each_stage_is_ln_final_then_unembed_of_that_stream(model, tokens):
    lens = logit_lens(model, tokens, top_k=2)
    _, cache = model.run_with_cache(tokens)
    streams = [cache["resid_pre", 0], cache["resid_mid", 0], cache["resid_pre", 1]]
    for stage, stream in enumerate(streams):
        logits = model.unembed(model.ln_final(stream))
        within = tolerance(torch.float32, reduction=model.cfg.d_model, magnitude=2 * logits)
        torch.testing.assert_close(
            lens.top_probs[stage], logits.softmax(-1).topk(2).values, **within
        )


def test_table_rows(model, tokens):
    lens = logit_lens(model, tokens, top_k=2, incl_mid=False)
    rows = lens.table()
    assert len(rows) == 3 * 2 * 7 * 2
    first = rows[0]
    assert set(first) == {
        "stage",
        "batch",
        "pos",
        "rank",
        "token_id",
        "token",
        "prob",
        "next_token_id",
        "next_token_prob",
        "next_token_rank",
    }
    assert first["stage"] == "0_pre" and first["next_token_id"] == int(tokens[0, 1])
    assert first["prob"] == pytest.approx(float(lens.top_probs[0, 0, 0, 0]))
    last = rows[-1]
    assert last["stage"] == "final_post" and last["pos"] == 6 and last["next_token_prob"] is None


def test_text_input_gives_token_strings():
    cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=50257, n_ctx=16)
    model = HookedTransformer(cfg, tokenizer="gpt2").eval()
    rows = logit_lens(model, "Hello world", top_k=1).table()
    assert all(isinstance(row["token"], str) for row in rows)


def test_planted_induction_model_predicts_the_second_copy_only_at_the_end():
    model = planted_induction_model()  # attention-only: stages 0_pre, 1_pre, final_post
    tokens = repeated_random_tokens(30, seq_len=8, batch=4, seed=1)
    lens = logit_lens(model, tokens)
    assert lens.labels == ["0_pre", "1_pre", "final_post"]
    second_copy = lens.correct_probs[:, :, 8:]  # predicting tokens 9..15
    assert second_copy[-1].mean() > 0.5 > second_copy[0].mean()


def test_bad_input(model, tokens):
    with pytest.raises(ValueError, match="top_k=0"):
        logit_lens(model, tokens, top_k=0)
    _, other_cache = model.run_with_cache(tokens[:1])
    with pytest.raises(ValueError, match="pass the cache of these tokens"):
        logit_lens(model, tokens, cache=other_cache)
