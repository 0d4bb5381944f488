"""The cache decompositions, logit lens, direct logit attribution and head detector on the
model families (the random Llama-, Pythia-, Gemma 2-, Gemma 3- and Qwen 3-shaped models of
tests.support.family_models): rotary models have no ``pos_embed``, parallel blocks no
``resid_mid`` (their MLP reads ``resid_pre``), sandwich norms add each output through a
post-norm, and soft-capped logits are not linear in the stream."""

from __future__ import annotations

import pytest
import torch

from interp import head_detector
from interp.analysis.logit_attribution import direct_logit_attribution
from interp.analysis.logit_lens import logit_lens
from tests.support.family_models import FAMILIES, setup
from tests.support.tolerances import error_bound, model_tolerance, sum_tolerance, tolerance

pytestmark = pytest.mark.usefixtures("one_thread")


def run(family: str):
    model, clean, _, answers, _ = setup(family)
    with torch.no_grad():
        logits, cache = model.run_with_cache(clean)
    return model, clean, answers, logits, cache


def mlp_stream(model, cache, layer: int) -> torch.Tensor:
    """The stream block ``layer``'s MLP reads."""
    return cache["resid_" + ("pre" if model.cfg.parallel_attn_mlp else "mid"), layer]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_decompositions_sum_to_the_stream(family):
    model, _, _, _, cache = run(family)
    final = cache["resid_post", -1]
    stack, labels = cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "0_attn_out", "0_mlp_out", "1_attn_out", "1_mlp_out"]
    torch.testing.assert_close(stack.sum(0), final, **sum_tolerance(stack))
    for layer in (0, 1):
        stack = cache.decompose_resid(layer, mlp_input=True)
        want = mlp_stream(model, cache, layer)
        torch.testing.assert_close(stack.sum(0), want, **sum_tolerance(stack))
    for options in (
        dict(),
        dict(expand_neurons=False),
        dict(layer=1, mlp_input=True),
        dict(pos_slice=-1),
    ):
        stack, labels = cache.get_full_resid_decomposition(return_labels=True, **options)
        if options.get("mlp_input"):
            want = mlp_stream(model, cache, 1)
        else:
            want = final[:, -1] if "pos_slice" in options else final
        torch.testing.assert_close(stack.sum(0), want, **sum_tolerance(stack))
        assert labels[-2:] == ["embed", "bias"]
    mid = cache.accumulated_resid(incl_mid=True, return_labels=True)[1]
    if model.cfg.parallel_attn_mlp:
        assert mid == ["0_pre", "1_pre", "final_post"]
    else:
        assert mid == ["0_pre", "0_mid", "1_pre", "1_mid", "final_post"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_head_and_neuron_results_sum_to_the_sublayer_outputs(family):
    """Each layer's heads (grouped-query or not) plus its bias row give hook_attn_out, and its
    neurons plus b_out give hook_mlp_out; with sandwich norms through the post-norms."""
    model, _, _, _, cache = run(family)
    heads, labels = cache.stack_head_results(return_labels=True)
    n_heads = model.cfg.n_heads
    assert heads.shape[0] == model.cfg.n_layers * n_heads and labels[n_heads] == "L1H0"

    def bias(layer: int, with_mlp: bool) -> torch.Tensor:  # the biases entering ``layer``
        return cache._accumulated_bias(layer, False, with_mlp)

    for layer in range(model.cfg.n_layers):
        attn_bias = bias(layer + 1, False) - bias(layer, False)
        layer_heads = heads[layer * n_heads : (layer + 1) * n_heads].sum(0)
        per_head = heads[layer * n_heads : (layer + 1) * n_heads]
        within = sum_tolerance(per_head, reduction=n_heads * model.cfg.d_head)
        torch.testing.assert_close(layer_heads + attn_bias, cache["attn_out", layer], **within)
        mlp_bias = bias(layer + 1, True) - bias(layer + 1, False) - bias(layer, True)
        mlp_bias = mlp_bias + bias(layer, False)
        neurons = cache.get_neuron_results(layer)
        torch.testing.assert_close(
            neurons.sum(-2) + mlp_bias, cache["mlp_out", layer], **sum_tolerance(neurons, -2)
        )


@pytest.mark.parametrize("family", list(FAMILIES))
def test_direct_logit_attribution_sums_to_the_logit_difference(family):
    """The attributions and the bias term sum to the logit difference, taken before the soft
    cap on Gemma 2 (where the capped one differs)."""
    model, clean, answers, logits, cache = run(family)
    dla = direct_logit_attribution(model, clean, answers[:, 0], answers[:, 1], cache=cache)
    assert "pos_embed" not in dla.labels and dla.head_attributions.shape == (2, 4, 2)
    # Each attribution is a dot product over d_model: the total sums that many more products.
    within = sum_tolerance(
        dla.attributions, reduction=dla.attributions.shape[0] * model.cfg.d_model
    )
    torch.testing.assert_close(dla.attributions.sum(0) + dla.bias_term, dla.logit_diff, **within)
    capped = logits[:, -1].gather(-1, answers).float()
    capped = capped[:, 0] - capped[:, 1]
    if model.cfg.output_logits_soft_cap > 0:
        assert (dla.logit_diff - capped).abs().max() > 1e-2
        cap = model.cfg.output_logits_soft_cap
        uncapped = torch.atanh(logits[:, -1] / cap) * cap
        uncapped = uncapped.gather(-1, answers)
        # atanh multiplies the capped logits' error by 1 / (1 - (logit / cap)^2).
        stretch = (1 - (logits[:, -1].gather(-1, answers) / cap) ** 2).reciprocal().max()
        unembedding = error_bound(torch.float32, reduction=model.cfg.d_model, magnitude=uncapped)
        torch.testing.assert_close(
            dla.logit_diff, uncapped[:, 0] - uncapped[:, 1], atol=unembedding * stretch, rtol=0
        )
    else:
        within = tolerance(torch.float32, reduction=model.cfg.d_model, magnitude=capped)
        torch.testing.assert_close(dla.logit_diff, capped, **within)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_logit_lens_last_stage_is_the_model(family):
    model, clean, _, logits, cache = run(family)
    lens = logit_lens(model, clean, cache=cache, top_k=3)
    expected_stages = 3 if model.cfg.parallel_attn_mlp else 5
    assert len(lens.labels) == expected_stages and lens.labels[-1] == "final_post"
    probs = logits.float().softmax(-1)
    # A probability moves by at most twice its logits' largest error (the softmax's sum: d_vocab).
    within = tolerance(torch.float32, reduction=model.cfg.d_vocab, depth=2, magnitude=logits)
    torch.testing.assert_close(lens.top_probs[-1], probs.topk(3, dim=-1).values, **within)
    next_probs = probs[:, :-1].gather(-1, clean[:, 1:, None])[..., 0]
    torch.testing.assert_close(lens.correct_probs[-1], next_probs, **within)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_head_detector_reads_each_query_heads_pattern(family):
    """Previous-token scores are the attention on the previous key (rows sum to one); on the
    Gemma 2-shaped model layer 0 is local with a window of 3."""
    model, clean, _, _, _ = setup(family)
    tokens = clean[0]
    scores = head_detector.detect_head(model, tokens, "previous_token_head")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens[None])
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer][0]  # [n_heads, query, key]
        expected = pattern.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / tokens.shape[0]
        torch.testing.assert_close(scores[layer], expected, **model_tolerance(model.cfg, expected))
    if model.cfg.window_size is not None:
        far = cache["pattern", 0][0].tril(-model.cfg.window_size)
        assert far.abs().max() == 0
