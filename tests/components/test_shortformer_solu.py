"""Shortformer models (positions added to the query and key inputs only) and SoLU MLPs
(``solu``, ``solu_ln`` with ``hook_mid`` and ``mlp.ln``), against TransformerLens 2.18 on the
same random weights: logits and every activation of its cache, under its names; weight
processing of SoLU models; start_at_layer and batched patching on shortformer models."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformerConfig
from interp.components.tl_buffers import weights_state_dict
from interp.loading.processing import process_weights, skipped_steps
from interp.patching import get_act_patch_resid_pre
from tests.support.tl218_components import CASES, case, close, model_of

FORWARD_CASES = [
    "attn_only_shortformer",
    "attn_only_shortformer_left_padded",
    "solu_shortformer",
    "solu_shortformer_left_padded",
    "gelu_shortformer",
    "gelu_shortformer_left_padded",
    "solu_standard",
    "solu_lnpre",
    "solu_plain",
    "xielu",
    "solu_shortformer_opt_in",
    "solu_shortformer_attn_in",
]


def _opt_in(model, name: str) -> None:
    if name.endswith("opt_in"):
        model.set_use_attn_result(True)
        model.set_use_split_qkv_input(True)
        model.set_use_hook_mlp_in(True)
    elif name.endswith("attn_in"):
        model.set_use_attn_result(True)
        model.set_use_hook_mlp_in(True)
        model.set_use_attn_in(True)


@pytest.mark.parametrize("name", FORWARD_CASES)
def test_logits_and_every_hook_equal_transformer_lens(name):
    model, expected = model_of(name), case(name)
    _opt_in(model, name)
    mask = expected.get("attention_mask")
    logits, cache = model.run_with_cache(expected["tokens"], attention_mask=mask)
    tl_hooks = sorted(key.removeprefix("cache.") for key in expected if key.startswith("cache."))
    assert sorted(cache.keys()) == tl_hooks
    for hook in tl_hooks:
        close(cache[hook], expected[f"cache.{hook}"], depth=8)
    close(logits, expected["logits"], depth=8)


def test_solu_ln_hook_names_and_parameters():
    model = model_of("solu_shortformer")
    assert {"blocks.0.mlp.ln.w", "blocks.0.mlp.ln.b"} <= set(dict(model.named_parameters()))
    names = set(model.hook_dict)
    for hook in ("mlp.hook_mid", "mlp.ln.hook_scale", "mlp.ln.hook_normalized"):
        assert f"blocks.1.{hook}" in names
    assert "pos_embed.W_pos" in dict(model.named_parameters())
    assert model.W_pos is model.pos_embed.W_pos


def test_shortformer_residual_stream_has_no_positions():
    model = model_of("attn_only_shortformer")
    tokens = case("attn_only_shortformer")["tokens"]
    _, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], cache["hook_embed"])
    residual, _, shortformer_pos_embed, _ = model.input_to_embed(tokens)
    torch.testing.assert_close(residual, cache["hook_embed"])
    torch.testing.assert_close(shortformer_pos_embed, cache["hook_pos_embed"])


@pytest.mark.parametrize("name", ["attn_only_shortformer", "solu_shortformer"])
def test_start_at_layer_adds_the_positions_as_the_full_forward(name):
    model, tokens = model_of(name), case(name)["tokens"]
    full = model(tokens)
    _, cache = model.run_with_cache(tokens)
    resumed = model(cache["blocks.1.hook_resid_pre"], start_at_layer=1)
    close(resumed, full, depth=8)
    explicit = model(
        cache["blocks.1.hook_resid_pre"],
        start_at_layer=1,
        shortformer_pos_embed=cache["hook_pos_embed"],
    )
    close(explicit, full, depth=8)


def test_batched_patching_equals_one_forward_per_index_on_a_shortformer_model():
    model = model_of("solu_shortformer")
    clean = case("solu_shortformer")["tokens"]
    corrupted = clean.clone()
    corrupted[:, 2] = (corrupted[:, 2] + 1) % model.cfg.d_vocab
    _, clean_cache = model.run_with_cache(clean)

    def metric(logits):
        return logits[:, -1, 0].mean()

    batched = get_act_patch_resid_pre(model, corrupted, clean_cache, metric)
    exact = torch.empty_like(batched)  # [layer, pos]: one forward per index
    for layer in range(model.cfg.n_layers):
        for position in range(clean.shape[1]):

            def patch(resid, hook, position=position):
                resid[:, position] = clean_cache[hook.name][:, position]
                return resid

            name = f"blocks.{layer}.hook_resid_pre"
            exact[layer, position] = metric(
                model.run_with_hooks(corrupted, fwd_hooks=[(name, patch)])
            )
    close(batched, exact, depth=8)


@pytest.mark.parametrize("name", ["solu_standard"])
def test_processing_a_solu_model_equals_transformer_lens(name):
    expected = case(f"processed_{name}")
    model = model_of(f"processed_{name}")
    tokens = expected["tokens"]
    close(model(tokens).log_softmax(-1), expected["log_probs_before"], depth=8)
    model.process_weights_(fold_ln=True, center_writing_weights=True, center_unembed=True)
    assert model.cfg.normalization_type == CASES[f"processed_{name}"]["normalization_type"]
    state = weights_state_dict(model)  # the fixture holds TL's parameters, not its buffers
    tl_state = {k.removeprefix("state."): v for k, v in expected.items() if k.startswith("state.")}
    assert sorted(state) == sorted(tl_state)
    for key, value in tl_state.items():
        close(state[key], value, depth=2)
    close(model(tokens), expected["logits"], depth=8)
    assert "blocks.0.mlp.ln.hook_scale" in model.hook_dict  # LayerNormPre keeps the hooks


def test_shortformer_processing_is_skipped_as_transformer_lens_does():
    model = model_of("solu_shortformer")
    steps = dict(fold_ln=True, center_writing_weights=True, center_unembed=True)
    assert set(skipped_steps(model, **steps)) == set(steps)
    with pytest.raises(ValueError, match="shortformer"):
        process_weights(model, fold_ln=True, center_writing_weights=False, center_unembed=False)
    # The steps that do apply leave the log-probabilities unchanged.
    tokens = case("solu_shortformer")["tokens"]
    before = model(tokens).log_softmax(-1)
    process_weights(model, fold_ln=False)
    close(model(tokens).log_softmax(-1), before, depth=8)


def test_xielu_parameters_are_the_mlps():
    model = model_of("xielu")
    assert {"blocks.0.mlp.act_fn.alpha_p", "blocks.0.mlp.act_fn.alpha_n"} <= set(
        dict(model.named_parameters())
    )


def test_solu_ln_in_a_gated_mlp_is_refused():
    with pytest.raises(ValueError, match="gated_mlp=True"):
        HookedTransformerConfig(
            n_layers=1, d_model=8, n_ctx=4, d_head=4, act_fn="solu_ln", gated_mlp=True
        )
