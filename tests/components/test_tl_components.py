"""Components called as TransformerLens calls them, positional arguments in its order, so
code that compares its own layers with the model's works; TransformerLens's activation
functions; the opt-in hook errors. References: TransformerLens 2.18 on the same weights."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.components import ACTIVATIONS
from interp.model.opt_in_hooks import OptInHookError
from tests.support.tl218_components import CASES, case, close, model_of

MODELS = ["solu_shortformer", "causal", "rotary", "bidirectional"]


@pytest.mark.parametrize("name", MODELS)
def test_component_calls_equal_transformer_lens(name):
    model, expected = model_of(f"components_{name}"), case(f"components_{name}")
    tokens, x = expected["tokens"], expected["x"]
    additive, mask, past_mask = expected["additive"], LEFT_PADDED, expected["past_mask"]
    block = model.blocks[0]
    calls = {
        "embed": lambda: model.embed(tokens),
        "ln1": lambda: block.ln1(x),
        "ln_final": lambda: model.ln_final(x),
        "attn": lambda: block.attn(x, x, x),
        "attn_additive": lambda: block.attn(x, x, x, None, additive),
        "attn_masked": lambda: block.attn(x, x, x, None, None, mask),
        "mlp": lambda: block.mlp(x),
        "block": lambda: block(x),
        "block_masked": lambda: block(x, None, None, mask),
        "block1": lambda: model.blocks[1](x),
    }
    if name != "rotary":
        calls |= {
            "pos_embed": lambda: model.pos_embed(tokens),
            "pos_embed_offset": lambda: model.pos_embed(tokens, 3),
            "pos_embed_masked": lambda: model.pos_embed(tokens, 0, mask),
            "pos_embed_offset_masked": lambda: model.pos_embed(tokens, 2, past_mask),
        }
    if name == "solu_shortformer":
        pos = model.pos_embed(tokens)
        calls["block_shortformer"] = lambda: block(x, pos)
        calls["block_shortformer_masked"] = lambda: block(x, pos, None, mask)
    assert set(calls) == set(expected) - {"tokens", "x", "additive", "past_mask"}
    with torch.no_grad():
        for key, call in calls.items():
            close(call(), expected[key], depth=3)


LEFT_PADDED = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1] * 7])


def test_pos_embed_rows_are_w_pos_for_the_token_positions():
    model = model_of("components_causal")
    tokens = torch.zeros(2, 4, dtype=torch.long)
    torch.testing.assert_close(model.pos_embed(tokens)[1], model.W_pos[:4])
    torch.testing.assert_close(model.pos_embed(tokens, past_kv_pos_offset=5)[0], model.W_pos[5:9])
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    shifted = model.pos_embed(tokens, 0, mask)
    torch.testing.assert_close(shifted[0, 1:], model.W_pos[:3])
    assert (shifted[0, 0] == 0).all()  # padding gets no position embedding


def test_a_mask_that_does_not_cover_the_keys_is_a_clear_error():
    model = model_of("components_causal")
    x = torch.zeros(2, 3, model.cfg.d_model)
    with pytest.raises(ValueError, match=r"expected \[batch, 3\]"):
        model.blocks[0].attn(x, x, x, None, None, torch.ones(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"expected \[batch, 3\]"):
        model.blocks[0](x, None, None, torch.ones(2, 4, dtype=torch.long))


def test_attention_refuses_a_position_bias():
    model = model_of("components_causal")
    x = torch.zeros(1, 3, model.cfg.d_model)
    with pytest.raises(ValueError, match="position_bias"):
        model.blocks[0].attn(x, x, x, None, None, None, torch.zeros(1, 2, 3, 3))


def test_components_accept_a_config_dict():
    cfg = model_of("components_causal").cfg.to_dict()
    for component in (
        interp.components.Embed,
        interp.components.PosEmbed,
        interp.components.MLP,
        interp.components.TransformerBlock,
        interp.components.Unembed,
        interp.components.Attention,
        interp.components.LayerNorm,
    ):
        component(cfg)


def test_activation_functions_equal_transformer_lens():
    expected = case("activations")
    assert sorted(interp.utils.SUPPORTED_ACTIVATIONS) == CASES["activations"]["supported"]
    assert sorted(interp.utils.ACTIVATION_FN_DICT) == CASES["activations"]["act_fn_dict"]
    for name, fn in interp.utils.SUPPORTED_ACTIVATIONS.items():
        for inputs in ("grid", "rows"):
            # The same formulas: equal bit for bit.
            torch.testing.assert_close(
                fn(expected[inputs]), expected[f"{name}.{inputs}"], atol=0, rtol=0
            )
    for name in ("gelu_new", "gelu_fast", "solu", "gelu_pytorch_tanh", "xielu"):
        got = getattr(interp.utils, name)(expected["rows"])
        torch.testing.assert_close(got, expected[f"utils.{name}"], atol=0, rtol=0)
    # The model's own (fused) activations compute the same functions, to float32 rounding.
    for name, fn in ACTIVATIONS.items():
        close(fn(expected["rows"]), expected[f"{name}.rows"], depth=1, reduction=1)


def test_trainable_xielu_starts_at_the_fixed_one():
    x = case("activations")["rows"]
    close(interp.utils.XIELU()(x).detach(), interp.utils.xielu(x), depth=1, reduction=1)


@pytest.mark.parametrize("hook", sorted(CASES["opt_in_errors"]["errors"]))
def test_opt_in_hooks_that_are_off_name_their_switch(hook):
    model = model_of("solu_shortformer")
    flag = CASES["opt_in_errors"]["errors"][hook].split(" if ")[1].split()[0]
    flag = flag.removesuffix("_hook")  # TransformerLens says use_attn_result_hook
    for add in (
        lambda: model.add_hook(hook, lambda act, hook: None),
        lambda: model.run_with_hooks(
            case("solu_shortformer")["tokens"], fwd_hooks=[(hook, lambda act, hook: None)]
        ),
        lambda: model.run_with_cache(case("solu_shortformer")["tokens"], names_filter=[hook]),
    ):
        with pytest.raises(AssertionError, match=f"set_{flag}\\(True\\)") as error:
            add()
        assert isinstance(error.value, (OptInHookError, KeyError))
        assert str(error.value).startswith(f"Cannot add hook {hook} if {flag} is False")
    assert not any(point.has_hooks for point in model.hook_points())
    getattr(model, f"set_{flag}")(True)
    model.add_hook(hook, lambda act, hook: None)
    model.reset_hooks()


def test_hook_mlp_in_on_an_attention_only_model_is_refused():
    model = model_of("attn_only_shortformer")
    with pytest.raises(KeyError, match="No hook point named"):
        model.add_hook("blocks.0.hook_mlp_in", lambda act, hook: None)
    with pytest.raises(ValueError, match="attention-only"):
        model.set_use_hook_mlp_in(True)


def test_editing_the_position_embeddings_in_place_leaves_w_pos():
    model = model_of("components_causal")
    before = model.W_pos.detach().clone()
    tokens = torch.zeros(1, 4, dtype=torch.long)
    with torch.no_grad():
        model.pos_embed(tokens).zero_()

        def zero(pos_embed, hook):
            pos_embed.zero_()

        model.run_with_hooks(tokens, fwd_hooks=[("hook_pos_embed", zero)])
    torch.testing.assert_close(model.W_pos.detach(), before, atol=0, rtol=0)


def test_attention_takes_transformer_lens_constructor_arguments():
    cfg = interp.HookedTransformerConfig(
        n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=8, d_vocab=10,
        use_local_attn=True, window_size=3, attn_types=["global", "local"],
    )  # fmt: skip
    assert interp.components.Attention(cfg, "local", 0).window_size == 3
    assert interp.components.Attention(cfg, "global", 1).window_size is None
    assert interp.components.Attention(cfg, layer_id=1).window_size == 3  # from attn_types
    with pytest.raises(ValueError, match="attn_type='sliding'"):
        interp.components.Attention(cfg, "sliding", 0)
