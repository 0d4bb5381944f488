"""ActivationCache's residual-stream decompositions, checked against what the forward cached
and against TransformerLens's own ActivationCache run over the same cache dict."""

from __future__ import annotations

import pytest
import torch
from transformer_lens.ActivationCache import ActivationCache as TransformerLensCache

from interp import HookedTransformer, HookedTransformerConfig
from tests.support.tolerances import sum_tolerance, tolerance

D_VOCAB = 50


def make_model(kind: str, use_attn_result: bool = False) -> HookedTransformer:
    """A tiny model with every parameter random (biases and norm weights too)."""
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        n_heads=4,
        d_mlp=64,
        d_vocab=D_VOCAB,
        n_ctx=16,
        attn_only=kind == "attn_only",
        normalization_type=None if kind == "no_ln" else "LN",
        use_attn_result=use_attn_result,
        seed=0,
    )
    model = HookedTransformer(cfg).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not name.split(".")[-1].startswith("W_"):
                param.add_(0.1 * torch.randn(param.shape, generator=generator))
            else:
                param.mul_(10)  # attention that is not uniform
    return model


KINDS = ["ln_mlp", "attn_only", "no_ln"]


@pytest.fixture(scope="module", params=KINDS)
def run(request):
    model = make_model(request.param)
    tokens = torch.randint(0, D_VOCAB, (3, 9), generator=torch.Generator().manual_seed(2))
    logits, cache = model.run_with_cache(tokens)
    return model, tokens, logits, cache


def decomposition_tolerance(stack: torch.Tensor) -> dict[str, float]:
    """A decomposition's total against the stream: the sum of its components, and the sums of
    d_model = 32 products (a head's z @ W_O against the whole layer's) that made them."""
    return sum_tolerance(stack, reduction=stack.shape[0] + 32)


def attribution_tolerance(attributions: torch.Tensor, logits: torch.Tensor) -> dict[str, float]:
    """Attributions (each a dot product over d_model = 32) summed against the logits."""
    return tolerance(
        torch.float32,
        reduction=attributions.shape[0] * 32,
        magnitude=attributions.detach().abs().sum(0) + logits.detach().abs().mean(),
    )


def stream_entering(cache, model, layer: int, mlp_input: bool = False):
    if mlp_input:
        return cache["resid_mid", layer]
    if layer == model.cfg.n_layers:
        return cache["resid_post", layer - 1]
    return cache["resid_pre", layer]


def test_decompose_resid_sums_to_the_stream(run):
    model, _, _, cache = run
    for layer in range(model.cfg.n_layers + 1):
        stack, labels = cache.decompose_resid(layer, return_labels=True)
        assert stack.shape[0] == len(labels)
        torch.testing.assert_close(
            stack.sum(0), stream_entering(cache, model, layer), **decomposition_tolerance(stack)
        )
    _, labels = cache.decompose_resid(return_labels=True)
    if model.cfg.attn_only:
        assert labels == ["embed", "pos_embed", "0_attn_out", "1_attn_out"]
    else:
        assert labels == [
            "embed",
            "pos_embed",
            "0_attn_out",
            "0_mlp_out",
            "1_attn_out",
            "1_mlp_out",
        ]
        stack = cache.decompose_resid(1, mlp_input=True)
        within = decomposition_tolerance(stack)
        torch.testing.assert_close(stack.sum(0), cache["resid_mid", 1], **within)
        _, attn_labels = cache.decompose_resid(mode="attn", incl_embeds=False, return_labels=True)
        assert attn_labels == ["0_attn_out", "1_attn_out"]


@pytest.mark.parametrize("expand_neurons", [True, False])
def test_full_resid_decomposition_sums_to_the_stream(run, expand_neurons):
    model, _, _, cache = run
    stack, labels = cache.get_full_resid_decomposition(
        expand_neurons=expand_neurons, return_labels=True
    )
    within = decomposition_tolerance(stack)
    torch.testing.assert_close(stack.sum(0), cache["resid_post", -1], **within)
    n_heads = model.cfg.n_layers * model.cfg.n_heads
    assert labels[:n_heads] == [f"L{i}H{h}" for i in range(2) for h in range(4)]
    assert labels[-3:] == ["embed", "pos_embed", "bias"]
    if not model.cfg.attn_only:
        n_mlp = 2 * model.cfg.d_mlp if expand_neurons else 2
        assert len(labels) == n_heads + n_mlp + 3
        assert labels[n_heads] == ("L0N0" if expand_neurons else "0_mlp_out")
        mid = cache.get_full_resid_decomposition(1, mlp_input=True, expand_neurons=expand_neurons)
        within = decomposition_tolerance(mid)
        torch.testing.assert_close(mid.sum(0), cache["resid_mid", 1], **within)


def test_head_results_plus_bias_equal_attn_out(run):
    model, tokens, _, cache = run
    heads = cache.stack_head_results()  # [n_layers * n_heads, batch, pos, d_model]
    by_layer = heads.reshape(2, 4, *heads.shape[1:])
    per_layer = by_layer.sum(1)
    for layer in range(2):
        torch.testing.assert_close(
            per_layer[layer] + model.blocks[layer].attn.b_O,
            cache["attn_out", layer],
            **decomposition_tolerance(by_layer[layer]),
        )
    # The same numbers when the model caches attn.hook_result itself.
    kind = (
        "attn_only"
        if model.cfg.attn_only
        else "ln_mlp"
        if model.cfg.normalization_type
        else "no_ln"
    )
    with_result = make_model(kind, use_attn_result=True)
    with_result.load_state_dict(model.state_dict())
    _, result_cache = with_result.run_with_cache(tokens)
    assert "blocks.0.attn.hook_result" in result_cache
    within = tolerance(torch.float32, reduction=model.cfg.d_head, magnitude=heads)
    torch.testing.assert_close(result_cache.stack_head_results(), heads, **within)


def test_stack_head_results_remainder_and_empty(run):
    _, _, _, cache = run
    stack, labels = cache.stack_head_results(1, incl_remainder=True, return_labels=True)
    assert labels == ["L0H0", "L0H1", "L0H2", "L0H3", "remainder"]
    within = decomposition_tolerance(stack)
    torch.testing.assert_close(stack.sum(0), cache["resid_pre", 1], **within)
    empty = cache.stack_head_results(0)
    assert empty.shape == (0, *cache["resid_pre", 0].shape)


def test_neuron_results_sum_to_mlp_out():
    model = make_model("ln_mlp")
    _, cache = model.run_with_cache(torch.arange(6)[None])
    neurons, labels = cache.stack_neuron_results(2, return_labels=True)
    assert labels[:2] == ["L0N0", "L0N1"] and labels[-1] == "L1N63"
    for layer in range(2):
        layer_neurons = neurons[layer * 64 : (layer + 1) * 64]
        summed = layer_neurons.sum(0) + model.blocks[layer].mlp.b_out
        within = sum_tolerance(layer_neurons)
        torch.testing.assert_close(summed, cache["mlp_out", layer], **within)
    picked = cache.get_neuron_results(1, neuron_slice=[3, 7], pos_slice=-1)
    torch.testing.assert_close(picked, neurons[[64 + 3, 64 + 7]][:, :, -1].movedim(0, 1))
    with pytest.raises(ValueError, match="out of range for d_mlp=64"):
        cache.stack_neuron_results(2, neuron_slice=[64])


def test_accumulated_resid_labels_and_values(run):
    model, _, _, cache = run
    stack, labels = cache.accumulated_resid(incl_mid=True, return_labels=True)
    if model.cfg.attn_only:  # no resid_mid: the stream after attention is the block output
        assert labels == ["0_pre", "1_pre", "final_post"]
    else:
        assert labels == ["0_pre", "0_mid", "1_pre", "1_mid", "final_post"]
        torch.testing.assert_close(stack[1], cache["resid_mid", 0])
    torch.testing.assert_close(stack[-1], cache["resid_post", 1])
    _, labels = cache.accumulated_resid(1, return_labels=True)
    assert labels == ["0_pre", "1_pre"]


POS_SLICES = [None, -1, 2, slice(1, 5), [0, 3, 8]]


@pytest.mark.parametrize("pos_slice", POS_SLICES)
@pytest.mark.parametrize(
    "method, kwargs",
    [
        ("decompose_resid", {"apply_ln": True}),
        ("decompose_resid", {"layer": 1}),
        ("accumulated_resid", {"incl_mid": True, "layer": 1, "apply_ln": True}),
        ("stack_head_results", {"apply_ln": True}),
        ("stack_head_results", {"layer": 1, "incl_remainder": True}),
    ],
)
def test_matches_transformer_lens_activation_cache(run, method, kwargs, pos_slice):
    """TransformerLens's ActivationCache, given our cache dict and model, is the reference."""
    model, _, _, cache = run
    if model.cfg.attn_only and kwargs.get("incl_mid"):
        kwargs = {**kwargs, "incl_mid": False}  # TransformerLens raises KeyError; see above
    reference = TransformerLensCache(dict(cache.cache_dict), model)
    expected, expected_labels = getattr(reference, method)(
        **kwargs, pos_slice=pos_slice, return_labels=True
    )
    actual, labels = getattr(cache, method)(**kwargs, pos_slice=pos_slice, return_labels=True)
    assert labels == expected_labels
    # The same components, normalised by the cached scale or not: sums of up to d_model terms.
    within = tolerance(torch.float32, reduction=model.cfg.d_model, magnitude=expected)
    torch.testing.assert_close(actual, expected, **within)


def test_stack_neuron_results_matches_transformer_lens():
    model = make_model("ln_mlp")
    _, cache = model.run_with_cache(torch.arange(7)[None])
    reference = TransformerLensCache(dict(cache.cache_dict), model)
    for kwargs in ({"apply_ln": True}, {"pos_slice": -1, "incl_remainder": True}):
        expected, expected_labels = reference.stack_neuron_results(2, return_labels=True, **kwargs)
        actual, labels = cache.stack_neuron_results(2, return_labels=True, **kwargs)
        assert labels == expected_labels
        within = tolerance(torch.float32, reduction=model.cfg.d_mlp, magnitude=expected)
        torch.testing.assert_close(actual, expected, **within)


def test_apply_ln_to_stack_sums_to_the_normalised_stream():
    model = make_model("ln_mlp")
    _, cache = model.run_with_cache(torch.arange(8)[None])
    ln = model.ln_final
    stack = cache.get_full_resid_decomposition(apply_ln=True)
    normalised = stack.sum(0) * ln.w + ln.b  # w and b near 1 and 0: the stack's scale
    within = decomposition_tolerance(stack)
    torch.testing.assert_close(normalised, cache["ln_final.hook_normalized"], **within)
    stack = cache.decompose_resid(1, mlp_input=True, apply_ln=True, pos_slice=-1)
    ln2 = model.blocks[1].ln2
    torch.testing.assert_close(
        stack.sum(0) * ln2.w + ln2.b,
        cache["normalized", 1, "ln2"][:, -1],
        **decomposition_tolerance(stack),
    )


@pytest.mark.parametrize("pos_slice", [-1, None])
def test_logit_attrs_sum_to_the_logits(run, pos_slice):
    """Summed attributions equal the logits less the constant ln_final.b @ W_U + b_U term."""
    model, tokens, logits, cache = run
    stack = cache.get_full_resid_decomposition(pos_slice=pos_slice, expand_neurons=False)
    correct, wrong = tokens[:, 0], tokens[:, 1]
    if pos_slice is None:
        correct, wrong = tokens, tokens.roll(1, dims=1)
    ln_bias = getattr(model.ln_final, "b", None)
    bias_logits = model.b_U + (ln_bias @ model.W_U if ln_bias is not None else 0)
    at_pos = logits[:, pos_slice] if pos_slice is not None else logits
    expected = (at_pos - bias_logits).gather(-1, correct[..., None])[..., 0]
    attributions = cache.logit_attrs(stack, correct, pos_slice=pos_slice)
    assert attributions.shape == (stack.shape[0], *correct.shape)
    within = attribution_tolerance(attributions, at_pos)
    torch.testing.assert_close(attributions.sum(0), expected, **within)

    expected_diff = expected - (at_pos - bias_logits).gather(-1, wrong[..., None])[..., 0]
    diff = cache.logit_attrs(stack, correct, wrong, pos_slice=pos_slice)
    torch.testing.assert_close(diff.sum(0), expected_diff, **attribution_tolerance(diff, at_pos))

    # apply_ln=True then a plain dot product with ln_final.w * W_U gives the same split.
    normalised = cache.get_full_resid_decomposition(pos_slice=pos_slice, apply_ln=True)
    ln_weight = getattr(model.ln_final, "w", None)
    directions = model.W_U[:, correct].movedim(0, -1)
    if ln_weight is not None:
        directions = directions * ln_weight
    by_hand = (normalised * directions).sum(-1)
    torch.testing.assert_close(by_hand.sum(0), expected, **attribution_tolerance(by_hand, at_pos))


def test_logit_attrs_one_token_per_example_covers_every_position(run):
    _, tokens, _, cache = run
    stack = cache.decompose_resid()  # [component, batch, pos, d_model]
    per_example = cache.logit_attrs(stack, tokens[:, 0])
    spelled_out = cache.logit_attrs(stack, tokens[:, :1].expand_as(tokens))
    torch.testing.assert_close(per_example, spelled_out)


def test_remove_batch_dim_cache():
    model = make_model("ln_mlp")
    tokens = torch.arange(6)
    logits, cache = model.run_with_cache(tokens[None], remove_batch_dim=True)
    stack = cache.decompose_resid(pos_slice=-1)
    assert stack.shape == (6, 32)
    attributions = cache.logit_attrs(stack, 4, pos_slice=-1)
    bias = model.b_U[4] + model.ln_final.b @ model.W_U[:, 4]
    within = attribution_tolerance(attributions[:, None], logits[0, -1])
    torch.testing.assert_close(attributions.sum() + bias, logits[0, -1, 4], **within)


def test_bad_arguments_give_clear_errors():
    model = make_model("attn_only")
    _, cache = model.run_with_cache(torch.arange(5)[None])
    with pytest.raises(ValueError, match="layer=3 is out of range for a 2-layer model"):
        cache.decompose_resid(3)
    with pytest.raises(ValueError, match="out of range"):
        cache.stack_head_results(-4)
    with pytest.raises(ValueError, match="mlp_input"):
        cache.accumulated_resid(1, mlp_input=True)
    with pytest.raises(ValueError, match="attention-only"):
        cache.stack_neuron_results(1)
    with pytest.raises(ValueError, match="mode must be"):
        cache.decompose_resid(mode="heads")
    with pytest.raises(ValueError, match="pass the pos_slice"):
        cache.apply_ln_to_stack(cache.decompose_resid(pos_slice=-1))
    with pytest.raises(ValueError, match=r"Token ids must lie in \[0, 50\)"):
        cache.logit_attrs(cache.decompose_resid(), 50)
    with pytest.raises(ValueError, match="same shape"):
        cache.logit_attrs(cache.decompose_resid(), torch.tensor([1]), torch.tensor([1, 2]))
    _, partial = model.run_with_cache(torch.arange(5)[None], names_filter="hook_embed")
    with pytest.raises(KeyError, match="widen run_with_cache's names_filter"):
        partial.decompose_resid()


def test_cache_in_another_dtype():
    """A cache stored in float64 (run_with_cache(dtype=...)) still decomposes and attributes."""
    model = make_model("ln_mlp")
    tokens = torch.arange(6)[None]
    logits, cache = model.run_with_cache(tokens, dtype=torch.float64)
    stack = cache.get_full_resid_decomposition(pos_slice=-1, expand_neurons=False)
    assert stack.dtype == torch.float64
    attributions = cache.logit_attrs(stack, 3, pos_slice=-1)
    bias = model.b_U[3] + model.ln_final.b @ model.W_U[:, 3]
    within = attribution_tolerance(attributions[:, None].float(), logits[0, -1])  # float32's
    torch.testing.assert_close((attributions.sum() + bias).float(), logits[0, -1, 3], **within)
    with pytest.raises(ValueError, match=r"Block index 2 is out of range: pass 0..1"):
        cache.get_neuron_results(2)


@pytest.mark.parametrize("moe", ["mixtral", "gpt_oss"])
def test_moe_decomposition_takes_each_layers_moe_output_as_one_component(moe):
    """A mixture of experts has no layer-wide neurons (each expert has its own): with
    expand_neurons=False each layer's MoE output is one component, and the default names
    that option instead of failing on a missing hook (TransformerLens: a KeyError)."""
    gpt_oss = dict(experts_swiglu_limit=7.0, use_attn_sinks=True) if moe == "gpt_oss" else {}
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=D_VOCAB, n_ctx=16,
        act_fn="silu", gated_mlp=True, normalization_type="RMS",
        positional_embedding_type="rotary", rotary_dim=8, num_experts=4, experts_per_token=2,
        seed=0, **gpt_oss,
    )  # fmt: skip
    model = HookedTransformer(cfg).eval()
    _, cache = model.run_with_cache(torch.randint(0, D_VOCAB, (2, 6)))
    stack, labels = cache.get_full_resid_decomposition(expand_neurons=False, return_labels=True)
    assert labels == ["L0H0", "L0H1", "L1H0", "L1H1", "0_mlp_out", "1_mlp_out", "embed", "bias"]
    torch.testing.assert_close(stack[4], cache["mlp_out", 0])
    torch.testing.assert_close(stack.sum(0), cache["resid_post", 1], **sum_tolerance(stack))
    for call in (cache.get_full_resid_decomposition, cache.stack_neuron_results):
        with pytest.raises(ValueError, match=r"mixtures of experts.*expand_neurons=False"):
            call()
