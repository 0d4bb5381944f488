"""Small TransformerLens 2.18 names: a settable ``HookedRootModule.context_level``,
``cfg.is_layer_norm_activation()``, ``utils.override_or_use_default_value`` and
``utils.is_library_available``."""

from __future__ import annotations

import sys
import threading

import pytest

from interp import HookedTransformer, HookedTransformerConfig, utils


@pytest.fixture
def model() -> HookedTransformer:
    cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=10, n_ctx=8, seed=0)
    return HookedTransformer(cfg)


def test_context_level_is_settable_and_tags_the_hooks_contexts_add(model):
    assert model.context_level == 0
    model.context_level = 5
    assert model.context_level == 5
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda x, hook: x)]):
        assert model.context_level == 6
        assert model.blocks[0].hook_resid_pre.fwd_hooks[0].context_level == 6
    assert model.context_level == 5
    assert not model.blocks[0].hook_resid_pre.fwd_hooks
    seen = []
    thread = threading.Thread(target=lambda: seen.append(model.context_level))
    thread.start()
    thread.join()
    assert seen == [0]  # per thread, as interp's hooks() contexts are
    model.context_level = 0
    assert model.context_level == 0


@pytest.mark.parametrize("level", [-1, 1.5, True, "1"])
def test_bad_context_level_is_a_value_error(model, level):
    with pytest.raises(ValueError, match="context_level must be an integer >= 0"):
        model.context_level = level
    assert model.context_level == 0


@pytest.mark.parametrize(
    ("act_fn", "expected"),
    [("solu_ln", True), ("gelu", False), ("gelu_new", False), ("silu", False), (None, False)],
)
def test_is_layer_norm_activation(act_fn, expected):
    values = dict(n_layers=1, d_model=16, n_heads=2, d_vocab=10, n_ctx=8)
    if act_fn is None:
        cfg = HookedTransformerConfig(**values, attn_only=True, act_fn=None)
    elif act_fn == "solu_ln":
        cfg = HookedTransformerConfig(**values)
        cfg.act_fn = act_fn  # the check is on the name, as TransformerLens's
    else:
        cfg = HookedTransformerConfig(**values, act_fn=act_fn)
    assert cfg.is_layer_norm_activation() is expected


@pytest.mark.parametrize(
    ("default", "override", "expected"),
    [(True, None, True), (True, False, False), (False, True, True), (1, 0, 0), ("a", None, "a")],
)
def test_override_or_use_default_value(default, override, expected):
    assert utils.override_or_use_default_value(default, override=override) == expected
    assert utils.override_or_use_default_value(default) == default


def test_is_library_available_does_not_import():
    assert utils.is_library_available("torch") and utils.is_library_available("json")
    assert not utils.is_library_available("no_such_library_anywhere")
    assert not utils.is_library_available("no_such_library_anywhere.sub")
    name = "wave"  # a standard-library module nothing here imports
    was_loaded = name in sys.modules
    assert utils.is_library_available(name)
    assert (name in sys.modules) == was_loaded
