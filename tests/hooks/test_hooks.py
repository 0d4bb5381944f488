"""Hook points: every documented hook fires with its shape; hooks never leak."""

from __future__ import annotations

import functools

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from tests.support.tolerances import model_tolerance, sum_tolerance

BATCH, POS = 2, 7


def make_model(**overrides) -> HookedTransformer:
    cfg = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, d_mlp=64, d_vocab=50, n_ctx=16, seed=0)
    return HookedTransformer(HookedTransformerConfig(**{**cfg, **overrides})).eval()


def expected_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """Every hook of DESIGN.md's table with its documented shape."""
    b, p, m, h, d = BATCH, POS, cfg.d_model, cfg.n_heads, cfg.d_head
    shapes = {"hook_embed": (b, p, m), "hook_pos_embed": (b, p, m)}
    if cfg.normalization_type:
        shapes |= {"ln_final.hook_scale": (b, p, 1), "ln_final.hook_normalized": (b, p, m)}
    for layer in range(cfg.n_layers):
        block = f"blocks.{layer}."
        shapes |= {
            block + "hook_resid_pre": (b, p, m),
            block + "hook_resid_post": (b, p, m),
            block + "hook_attn_out": (b, p, m),
            block + "attn.hook_q": (b, p, h, d),
            block + "attn.hook_k": (b, p, h, d),
            block + "attn.hook_v": (b, p, h, d),
            block + "attn.hook_z": (b, p, h, d),
            block + "attn.hook_attn_scores": (b, h, p, p),
            block + "attn.hook_pattern": (b, h, p, p),
        }
        if cfg.normalization_type:
            # With per-head attention inputs, ln1 normalises each head's copy.
            per_head = (h,) if cfg.use_attn_in or cfg.use_split_qkv_input else ()
            shapes |= {
                block + "ln1.hook_scale": (b, p, *per_head, 1),
                block + "ln1.hook_normalized": (b, p, *per_head, m),
            }
        if cfg.use_attn_result:
            shapes[block + "attn.hook_result"] = (b, p, h, m)
        if cfg.use_attn_in:
            shapes[block + "hook_attn_in"] = (b, p, h, m)
        if cfg.use_split_qkv_input:
            for name in ("hook_q_input", "hook_k_input", "hook_v_input"):
                shapes[block + name] = (b, p, h, m)
        if not cfg.attn_only:
            shapes |= {
                block + "hook_resid_mid": (b, p, m),
                block + "hook_mlp_out": (b, p, m),
                block + "mlp.hook_pre": (b, p, cfg.d_mlp),
                block + "mlp.hook_post": (b, p, cfg.d_mlp),
            }
            if cfg.normalization_type:
                shapes |= {
                    block + "ln2.hook_scale": (b, p, 1),
                    block + "ln2.hook_normalized": (b, p, m),
                }
            if cfg.use_hook_mlp_in:
                shapes[block + "hook_mlp_in"] = (b, p, m)
    return shapes


CONFIGS = {
    "default": {},
    "all-opt-in-hooks": dict(
        use_attn_result=True, use_attn_in=True, use_split_qkv_input=True, use_hook_mlp_in=True
    ),
    "attn-only": dict(attn_only=True),
    "no-layer-norm": dict(normalization_type=None, attn_only=True),
}


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=list(CONFIGS))
def test_every_hook_fires_with_documented_shape(overrides):
    model = make_model(**overrides)
    tokens = torch.randint(0, 50, (BATCH, POS))
    logits, cache = model.run_with_cache(tokens)
    expected = expected_shapes(model.cfg)
    assert set(cache.keys()) == set(expected) == set(model.hook_dict)
    for name, shape in expected.items():
        assert tuple(cache[name].shape) == shape, name
    # The opt-in hooks change nothing about the result.
    plain = make_model(
        **{k: v for k, v in overrides.items() if k in ("attn_only", "normalization_type")}
    )
    expected_logits = plain(tokens)
    within = model_tolerance(plain.cfg, expected_logits)
    torch.testing.assert_close(logits, expected_logits, **within)


def test_opt_in_hooks_can_edit_activations():
    model = make_model(use_split_qkv_input=True, use_attn_result=True)
    tokens = torch.randint(0, 50, (1, POS))

    # Zeroing head 1's value input equals zeroing head 1's value vectors (up to b_V).
    def zero_head_1(x, hook):
        x[:, :, 1] = 0
        return x

    logits = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_v_input", zero_head_1)])
    _, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_v_input")
    assert not torch.equal(logits, model(tokens))
    # hook_result summed over heads, plus b_O, is the attention output.
    _, cache = model.run_with_cache(tokens)
    heads = cache["result", 0]  # each head's z @ W_O, against the whole layer's
    torch.testing.assert_close(
        heads.sum(2) + model.blocks[0].attn.b_O,
        cache["attn_out", 0],
        **sum_tolerance(heads, dim=2, reduction=model.cfg.n_heads * model.cfg.d_head),
    )


def test_names_filter_forms():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    _, by_str = model.run_with_cache(tokens, names_filter="blocks.1.hook_resid_pre")
    _, by_list = model.run_with_cache(tokens, names_filter=["hook_embed", "blocks.0.attn.hook_z"])
    _, by_fn = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("pattern"))
    assert list(by_str) == ["blocks.1.hook_resid_pre"]
    assert set(by_list) == {"hook_embed", "blocks.0.attn.hook_z"}
    assert set(by_fn) == {"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"}


def test_cache_options_device_dtype_and_batch_dim():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 5))
    _, cache = model.run_with_cache(
        tokens, device="cpu", dtype=torch.float16, remove_batch_dim=True
    )
    assert cache["resid_pre", 0].shape == (5, 32) and cache["resid_pre", 0].dtype == torch.float16
    assert not cache.has_batch_dim


def test_run_with_hooks_edits_and_removes_its_hooks():
    model = make_model()
    tokens = torch.randint(0, 50, (2, 5))
    clean = model(tokens)
    ablated = model.run_with_hooks(
        tokens, fwd_hooks=[("blocks.0.hook_attn_out", lambda x, hook: x * 0)]
    )
    assert not torch.allclose(ablated, clean)
    assert not any(hp.has_hooks for hp in model.hook_points())
    torch.testing.assert_close(model(tokens), clean, atol=0, rtol=0)


def test_hook_argument_and_layer():
    model = make_model()
    seen = []
    model.run_with_hooks(
        torch.zeros(1, 3, dtype=torch.long),
        fwd_hooks=[
            (lambda n: n.endswith("hook_z"), lambda z, hook: seen.append((hook.name, hook.layer())))
        ],
    )
    assert seen == [("blocks.0.attn.hook_z", 0), ("blocks.1.attn.hook_z", 1)]
    with pytest.raises(ValueError, match="not inside a transformer block"):
        model.hook_dict["hook_embed"].layer()


def test_hooks_context_nests_and_removes_only_its_own():
    model = make_model()
    calls = []
    outer = ("hook_embed", lambda x, hook: calls.append("outer"))
    inner = ("hook_embed", lambda x, hook: calls.append("inner"))
    with model.hooks(fwd_hooks=[outer]):
        with model.hooks(fwd_hooks=[inner]):
            model(torch.zeros(1, 2, dtype=torch.long))
        model(torch.zeros(1, 2, dtype=torch.long))
    model(torch.zeros(1, 2, dtype=torch.long))
    assert calls == ["outer", "inner", "outer"]


def test_a_hook_that_raises_leaves_no_hook_attached():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    before = model(tokens)

    def broken(x, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        with model.hooks(
            fwd_hooks=[
                ("blocks.0.hook_resid_pre", lambda x, hook: x * 2),
                ("blocks.1.attn.hook_pattern", broken),
            ]
        ):
            model(tokens)
    with pytest.raises(RuntimeError, match="boom"):
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.hook_resid_pre", broken)])
    with pytest.raises(RuntimeError, match="boom"):
        model.add_hook("blocks.0.hook_attn_out", broken)
        model.run_with_cache(tokens)  # the caching hooks go; the user's own hook stays
    model.reset_hooks()
    assert not any(hp.has_hooks for hp in model.hook_points())
    torch.testing.assert_close(model(tokens), before, atol=0, rtol=0)


def test_prepend_permanent_and_reset():
    model = make_model()
    order = []
    model.add_hook("hook_embed", lambda x, hook: order.append("first"))
    model.add_hook("hook_embed", lambda x, hook: order.append("prepended"), prepend=True)
    model.add_perma_hook("hook_embed", lambda x, hook: order.append("permanent"))
    model(torch.zeros(1, 2, dtype=torch.long))
    assert order == ["prepended", "first", "permanent"]
    model.reset_hooks()
    order.clear()
    model(torch.zeros(1, 2, dtype=torch.long))
    assert order == ["permanent"]
    model.reset_hooks(including_permanent=True)
    assert not any(hp.has_hooks for hp in model.hook_points())


def test_backward_hooks_see_gradients():
    model = make_model()
    tokens = torch.randint(0, 50, (2, 6))
    grads = {}

    def save_grad(grad, hook):
        grads[hook.name] = grad.clone()

    with model.hooks(bwd_hooks=[("blocks.1.hook_resid_pre", save_grad)]):
        resid = model(tokens, stop_at_layer=1).detach().requires_grad_(True)
        model(tokens, return_type="loss").backward()
    # Reference: the gradient of the loss with respect to resid_pre of block 1, by autograd.
    loss = model(resid, start_at_layer=1, tokens=tokens, return_type="loss")
    (expected,) = torch.autograd.grad(loss, resid)
    within = model_tolerance(model.cfg, expected)  # back through a part of the model
    torch.testing.assert_close(grads["blocks.1.hook_resid_pre"], expected, **within)
    assert not any(hp.has_hooks for hp in model.hook_points())


def test_run_with_cache_incl_bwd_keeps_gradients():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 6))
    loss, cache = model.run_with_cache(
        tokens, return_type="loss", incl_bwd=True, names_filter=lambda n: "resid" in n
    )
    assert "blocks.0.hook_resid_pre_grad" in cache
    assert cache["blocks.0.hook_resid_pre_grad"].shape == cache["resid_pre", 0].shape
    with pytest.raises(ValueError, match="scalar"):
        model.run_with_cache(tokens, incl_bwd=True)


# ------------------------------------------------------------------------------ bad input
def test_unknown_hook_name_lists_closest_names_and_attaches_nothing():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    before = model(tokens)
    with pytest.raises(KeyError, match="blocks.0.attn.hook_pattern"):
        model.run_with_hooks(
            tokens,
            fwd_hooks=[
                ("hook_embed", lambda x, hook: x * 0),
                ("blocks.0.attn.hook_patern", lambda x, hook: x),
            ],
        )
    with pytest.raises(KeyError, match="blocks.0.hook_resid_pre"):
        model.run_with_cache(tokens, names_filter=["blocks.0.hook_resid_pr"])
    with pytest.raises(KeyError, match="Closest valid names"):
        model.add_hook("blocks.9.hook_resid_pre", lambda x, hook: x)
    assert not any(hp.has_hooks for hp in model.hook_points())
    torch.testing.assert_close(model(tokens), before, atol=0, rtol=0)


def test_wrong_hook_return_shape_names_hook_and_both_shapes():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    before = model(tokens)

    def drop_a_position(resid, hook):
        return resid[:, 1:]

    with pytest.raises(ValueError) as error:
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.hook_resid_mid", drop_a_position)])
    message = str(error.value)
    assert "blocks.1.hook_resid_mid" in message and "drop_a_position" in message
    assert "(1, 3, 32)" in message and "(1, 4, 32)" in message
    with pytest.raises(TypeError, match="returned list"):
        model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", lambda x, hook: [x])])
    assert not any(hp.has_hooks for hp in model.hook_points())
    torch.testing.assert_close(model(tokens), before, atol=0, rtol=0)


def test_opt_in_hooks_switch_on_and_off_at_run_time():
    model = make_model()
    assert "blocks.0.attn.hook_result" not in model.hook_dict
    model.set_use_attn_result(True)
    model.set_use_split_qkv_input(True)
    _, cache = model.run_with_cache(torch.zeros(1, 3, dtype=torch.long))
    assert cache["result", 1].shape == (1, 3, 4, 32) and "blocks.1.hook_k_input" in cache
    model.set_use_attn_result(False)
    assert "blocks.0.attn.hook_result" not in model.hook_dict


def no_hook_attached(model: HookedTransformer) -> bool:
    return all(not hp.has_hooks for hp in model.hook_dict.values())


def test_wrong_hook_return_dtype_or_device_names_hook_and_both():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    before = model(tokens)

    def to_float64(resid, hook):
        return resid.double()

    def to_meta(resid, hook):
        return torch.empty_like(resid, device="meta")

    def scale(resid, hook, factor):
        return (resid * factor[0]).half()

    def grad_to_half(grad, hook):
        return (grad.half(),)

    with pytest.raises(TypeError) as error:
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_resid_mid", to_float64)])
    assert str(error.value) == (
        "Hook 'to_float64' on blocks.0.hook_resid_mid returned dtype torch.float64, but the "
        "activation has dtype torch.float32; return a tensor of the same dtype (e.g. "
        "`.to(torch.float32)`), or None to leave the activation unchanged."
    )
    with pytest.raises(ValueError) as error:
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", to_meta)])
    assert str(error.value) == (
        "Hook 'to_meta' on blocks.1.attn.hook_z returned a tensor on meta, but the activation "
        "is on cpu; return a tensor of the same device (e.g. `.to('cpu')`), or None to leave "
        "the activation unchanged."
    )
    big = functools.partial(scale, factor=torch.ones(1000))  # named without its arguments
    with pytest.raises(TypeError, match=r"^Hook 'partial\(scale, \.\.\.\)' on hook_embed "):
        model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", big)])
    with pytest.raises(TypeError, match="the gradient has dtype torch.float32"):
        with model.hooks(bwd_hooks=[("blocks.1.hook_resid_pre", grad_to_half)]):
            model(tokens, return_type="loss").backward()
    assert no_hook_attached(model)
    torch.testing.assert_close(model(tokens), before, atol=0, rtol=0)


def test_autocast_lets_a_hook_return_another_float_dtype():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        kept = model.run_with_hooks(
            tokens, fwd_hooks=[("blocks.0.hook_mlp_out", lambda x, hook: x)]
        )
        upcast = model.run_with_hooks(
            tokens, fwd_hooks=[("blocks.0.hook_mlp_out", lambda x, hook: x.float())]
        )
    torch.testing.assert_close(upcast, kept, atol=0, rtol=0)


def ablate(x, hook):
    return x * 0


FWD_FIX = "pass a list of (name, fn) pairs: fwd_hooks=[(name, fn)]"


@pytest.mark.parametrize(
    "fwd_hooks, message",
    [
        (
            ("hook_embed", ablate),
            f"fwd_hooks=('hook_embed', {ablate!r}) is a single (name, fn) pair; {FWD_FIX}.",
        ),
        (
            {"hook_embed": ablate},
            f"fwd_hooks is a dict; {FWD_FIX}, e.g. fwd_hooks=list(hooks.items()).",
        ),
        ("hook_embed", f"fwd_hooks='hook_embed' is not a list; {FWD_FIX}."),
        (
            [("hook_embed", ablate), ablate],
            f"fwd_hooks holds {ablate!r}, which is not a (name, fn) pair; {FWD_FIX}.",
        ),
        (
            [("hook_embed", ablate), ("hook_pos_embed", 3)],
            "fwd_hooks pairs 'hook_pos_embed' with 3; the hook must be callable as "
            "fn(activation, hook).",
        ),
        (
            [("hook_embed", ablate), (3, ablate)],
            "fwd_hooks names the hook point 3; a name is a string "
            "(e.g. 'blocks.0.hook_resid_pre') or a function name -> bool.",
        ),
    ],
    ids=["bare-pair", "dict", "string", "not-a-pair", "not-callable", "bad-name"],
)
def test_malformed_fwd_hooks_say_how_to_pass_them_and_attach_nothing(fwd_hooks, message):
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    before = model(tokens)
    with pytest.raises(TypeError) as error:
        model.run_with_hooks(tokens, fwd_hooks=fwd_hooks)
    assert str(error.value) == message
    with pytest.raises(TypeError) as error:
        with model.hooks(fwd_hooks=[("hook_embed", ablate)], bwd_hooks=("hook_embed", ablate)):
            pass
    assert str(error.value).endswith("pass a list of (name, fn) pairs: bwd_hooks=[(name, fn)].")
    assert no_hook_attached(model)
    torch.testing.assert_close(model(tokens), before, atol=0, rtol=0)


ALLOWED = "None, a hook name, a list of hook names, or a function name -> bool"


@pytest.mark.parametrize(
    "names_filter, message",
    [
        (3, f"names_filter=3 (int); it must be {ALLOWED}."),
        (b"hook_embed", f"names_filter=b'hook_embed' (bytes); it must be {ALLOWED}."),
        (
            ["hook_embed", 3],
            f"names_filter holds 3 (int), which is not a hook name; names_filter must be "
            f"{ALLOWED}.",
        ),
        (
            [["hook_embed"]],
            f"names_filter holds ['hook_embed'] (list), which is not a hook name; "
            f"names_filter must be {ALLOWED}.",
        ),
    ],
    ids=["int", "bytes", "list-with-int", "nested-list"],
)
@pytest.mark.parametrize("return_type", ["logits", None])
def test_names_filter_of_a_wrong_type_says_what_is_allowed(names_filter, message, return_type):
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    with pytest.raises(TypeError) as error:
        model.run_with_cache(tokens, names_filter=names_filter, return_type=return_type)
    assert str(error.value) == message
    with pytest.raises(TypeError, match="names_filter"):
        model.add_caching_hooks(names_filter)
    assert no_hook_attached(model)


def test_incl_bwd_needs_gradients():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    expected = (
        "run_with_cache(incl_bwd=True) runs a backward pass, but gradients are off here "
        "(torch.no_grad() or torch.inference_mode()); backward hooks need gradients: "
        "call it outside torch.no_grad()."
    )
    for no_gradients in (torch.no_grad, torch.inference_mode):
        with no_gradients(), pytest.raises(RuntimeError) as error:
            model.run_with_cache(tokens, return_type="loss", incl_bwd=True)
        assert str(error.value) == expected
    model.requires_grad_(False)
    with pytest.raises(RuntimeError, match=r"call model.requires_grad_\(True\) first"):
        model.run_with_cache(tokens, return_type="loss", incl_bwd=True)
    assert no_hook_attached(model)


def test_caching_hooks_take_transformer_lens_arguments():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    names = ["blocks.0.hook_resid_post", "blocks.1.attn.hook_pattern"]
    _, reference = model.run_with_cache(tokens, names_filter=names, remove_batch_dim=True)
    # TransformerLens's positional order: names_filter, incl_bwd, device, remove_batch_dim, cache.
    mine: dict = {}
    store, fwd, bwd = model.get_caching_hooks(names, False, None, True, mine)
    with model.hooks(fwd, bwd):
        model(tokens)
    assert store is mine and bwd == []
    cache = model.add_caching_hooks(names, remove_batch_dim=True)
    model(tokens)
    model.reset_hooks()
    assert no_hook_attached(model)
    for stored in (store, cache):
        assert set(stored) == set(names)
        for name in names:
            torch.testing.assert_close(stored[name], reference[name], atol=0, rtol=0)
