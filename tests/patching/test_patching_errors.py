"""Patching's errors name the bad value and the fix, and leave no hook on the model: metrics
that return None or a non-scalar, answers outside the vocabulary, clean and corrupted prompts
of different lengths; a normalised metric with a tiny clean/corrupted gap warns."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import interp
from interp import patching
from interp.patching import AnswerProbability, LogitDiff, NormalizedMetric, PatchingMetric

D_VOCAB = 97
RETURNS = (
    "it must return a number: a 0-d tensor, a Python float, a 1-element tensor, or one value "
    "per prompt [n_prompts] (averaged)"
)


@pytest.fixture(scope="module")
def setup():
    cfg = interp.HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_mlp=64, d_vocab=D_VOCAB, n_ctx=16, init_range=0.3,
        seed=1,
    )  # fmt: skip
    model = interp.HookedTransformer(cfg).eval()
    generator = torch.Generator().manual_seed(0)
    clean = torch.randint(0, D_VOCAB, (2, 6), generator=generator)
    corrupted = clean.clone()
    corrupted[:, 2] = (clean[:, 2] + 5) % D_VOCAB
    _, clean_cache = model.run_with_cache(clean)
    return model, clean, corrupted, clean_cache


def no_hooks_left(model) -> bool:
    return not any(point.fwd_hooks or point.bwd_hooks for point in model.hook_dict.values())


def sweeps(model, corrupted, clean_cache, metric):
    """Activation, path and attribution patching of the same prompts with ``metric``."""
    return {
        "activation": lambda: patching.get_act_patch_resid_pre(
            model, corrupted, clean_cache, metric, progress=False
        ),
        "heads": lambda: patching.get_act_patch_attn_head_out_by_pos(
            model, corrupted, clean_cache, metric, progress=False
        ),
        "path": lambda: patching.get_path_patch_head_to_heads(
            model, corrupted, clean_cache, metric, receiver_heads=[(1, 0)], progress=False
        ),
        "attribution": lambda: patching.get_attr_patch_resid_pre(
            model, corrupted, clean_cache, metric
        ),
    }


def raises_everywhere(setup, metric, error, message):
    model, _, corrupted, clean_cache = setup
    for name, run in sweeps(model, corrupted, clean_cache, metric).items():
        with pytest.raises(error, match=re.escape(message)):
            run()
        assert no_hooks_left(model), name
        assert not model.cfg.use_split_qkv_input, name


NOT_NUMBERS = [
    (lambda logits: None, "NoneType None", " (did it forget to return?)"),
    (lambda logits: "0.5", "str '0.5'", ""),
    (lambda logits: True, "bool True", ""),
    (lambda logits: [1.0], "list [1.0]", ""),
]


@pytest.mark.parametrize("metric, returned, hint", NOT_NUMBERS)
def test_metric_returning_a_non_number(setup, metric, returned, hint):
    message = f"The patching metric returned {returned} for logits of shape (2, 6, 97){hint}"
    raises_everywhere(setup, metric, ValueError, f"{message}; {RETURNS}.")


@pytest.mark.parametrize(
    "metric, returned",
    [
        (lambda logits: logits[0, -1], "a tensor of shape (97,)"),
        (lambda logits: logits[:, -1, :2], "a tensor of shape (2, 2)"),
        (lambda logits: logits[0, -1, 0] > 0, "a torch.bool tensor"),
    ],
)
def test_metric_returning_a_non_scalar(setup, metric, returned):
    suffix = ", e.g. reduce it with .mean()" if "shape" in returned else ""
    message = (
        f"The patching metric returned {returned} for logits of shape (2, 6, 97); {RETURNS}"
        f"{suffix}."
    )
    raises_everywhere(setup, metric, ValueError, message)


def test_batched_metric_returning_none(setup):
    class Forgetful(PatchingMetric):
        def score(self, position_logits):
            position_logits[:, -1, 0].mean()

    model, _, corrupted, clean_cache = setup
    with pytest.raises(ValueError, match=re.escape("Forgetful.score returned None for 2 rows")):
        patching.get_act_patch_resid_pre(model, corrupted, clean_cache, Forgetful(), progress=False)
    with pytest.raises(ValueError, match=re.escape("Forgetful returned None for 2 prompts")):
        patching.get_attr_patch_resid_pre(model, corrupted, clean_cache, Forgetful())
    assert no_hooks_left(model)


def test_attribution_needs_a_differentiable_metric(setup):
    model, _, corrupted, clean_cache = setup
    message = "Attribution patching differentiates the metric, but it returned a number (float 0.1"
    with pytest.raises(ValueError, match=re.escape(message)):
        patching.get_attr_patch_resid_pre(
            model, corrupted, clean_cache, lambda logits: logits[0, -1, 3].item() * 0 + 0.1
        )
    assert no_hooks_left(model)


OUT_OF_VOCAB = (
    "outside the model's vocabulary [0, 97); pass ids from the model's tokenizer, e.g. "
    "model.to_single_token(' Mary')."
)


BAD_ANSWERS = [
    (lambda: LogitDiff(torch.tensor([[3, 200], [4, 5]])), "LogitDiff", 200),
    (lambda: LogitDiff(torch.tensor([97, 1])), "LogitDiff", 97),
    (lambda: AnswerProbability(torch.tensor([1, 1000])), "AnswerProbability", 1000),
    (lambda: NormalizedMetric(LogitDiff(torch.tensor([3, 150])), 1.0, 0.0), "LogitDiff", 150),
]


@pytest.mark.parametrize("make_metric, metric_class, bad_id", BAD_ANSWERS)
def test_answers_outside_the_vocabulary(setup, make_metric, metric_class, bad_id):
    message = f"{metric_class}'s answer_tokens has token ids [{bad_id}] {OUT_OF_VOCAB}"
    raises_everywhere(setup, make_metric(), ValueError, message)


def test_normalized_logit_diff_with_answers_outside_the_vocabulary(setup):
    model, clean, corrupted, _ = setup
    message = f"LogitDiff's answer_tokens has token ids [97, 98] {OUT_OF_VOCAB}"
    with pytest.raises(ValueError, match=re.escape(message)):
        patching.normalized_logit_diff(torch.tensor([98, 97]), model(clean), model(corrupted))


def test_negative_or_float_answers_are_refused_at_once():
    negative = (
        "LogitDiff's answer_tokens has token ids [-1] outside the model's vocabulary (ids are "
        "non-negative); pass ids from the model's tokenizer"
    )
    with pytest.raises(ValueError, match=re.escape(negative)):
        LogitDiff(torch.tensor([[3, -1]]))
    with pytest.raises(
        ValueError, match=re.escape("AnswerProbability's answer_tokens has token ids [-5]")
    ):
        AnswerProbability(-5)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "LogitDiff's answer_tokens must be integer token ids, got dtype torch.float32."
        ),
    ):
        LogitDiff(torch.tensor([1.0, 2.0]))


def test_kl_divergence_of_another_vocabulary(setup):
    model, _, corrupted, clean_cache = setup
    metric = patching.KLDivergence(torch.randn(2, 6, 50))
    message = (
        "KLDivergence's clean_logits have 50 columns but the model's vocabulary has 97; pass "
        "the clean logits of this model."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        patching.get_act_patch_resid_pre(model, corrupted, clean_cache, metric, progress=False)


@pytest.mark.parametrize("clean_shape", [(2, 5), (1, 6)])
def test_clean_and_corrupted_of_different_shapes(setup, clean_shape):
    model, clean, corrupted, _ = setup
    _, clean_cache = model.run_with_cache(clean[: clean_shape[0], : clean_shape[1]])
    metric = LogitDiff(torch.tensor([1, 2]))
    fix = "choose prompts that tokenize to the same length (model.to_str_tokens shows the tokens)."
    shape = (*clean_shape, 32)
    expected = {
        "activation": f"The clean blocks.0.hook_resid_pre has shape {shape} but the corrupted "
        "run's is (2, 6, 32); clean and corrupted prompts must have the same number of prompts "
        f"and of tokens: {fix}",
        "heads": f"The clean blocks.0.attn.hook_z has shape {(*clean_shape, 4, 8)} but the "
        "corrupted run's is (2, 6, 4, 8)",
        "path": f"The new blocks.0.attn.hook_z has shape {(*clean_shape, 4, 8)} but the orig "
        "run's is (2, 6, 4, 8); new and orig prompts must have the same number of prompts and "
        f"of tokens: {fix}",
        "attribution": f"The clean blocks.0.hook_resid_pre has shape {shape} but the corrupted "
        "run's is (2, 6, 32)",
    }
    for name, run in sweeps(model, corrupted, clean_cache, metric).items():
        with pytest.raises(ValueError, match=re.escape(expected[name])):
            run()
        assert no_hooks_left(model), name


def test_tiny_normalisation_gap_warns(setup):
    model, clean, corrupted, _ = setup
    message = (
        "The clean (2.5) and corrupted (2.50000024) scores differ by only 2.38e-07, and the "
        "normalised metric divides by that gap: its values are ill-conditioned"
    )
    base = LogitDiff(torch.tensor([1, 2]))
    with pytest.warns(UserWarning, match=re.escape(message)):
        NormalizedMetric(base, 2.5, 2.5000002384185791)
    logits = model(clean)
    nearly_clean = logits.clone()
    nearly_clean[:, -1, 1] += 1e-5  # the logit difference moves by 1e-5
    with pytest.warns(UserWarning, match="ill-conditioned"):
        patching.normalized_logit_diff(torch.tensor([1, 2]), logits, nearly_clean)
    with pytest.raises(ValueError, match=re.escape("The clean and corrupted runs score the same")):
        NormalizedMetric(base, 2.5, 2.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metric = patching.normalized_logit_diff(torch.tensor([1, 2]), logits, model(corrupted))
    assert abs(metric.clean_value - metric.corrupted_value) > 1e-3


def test_plain_metric_indexing_outside_the_vocabulary(setup):
    model, _, corrupted, clean_cache = setup
    with pytest.raises(IndexError, match="out of bounds") as error:
        patching.get_act_patch_resid_pre(
            model, corrupted, clean_cache, lambda logits: logits[0, -1, 200], progress=False
        )
    assert error.value.__notes__ == [
        "(raised by the patching metric on the corrupted run's logits, shape (2, 6, 97) = "
        "[prompt, pos, d_vocab])"
    ]
    assert no_hooks_left(model)
