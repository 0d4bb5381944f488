"""Bad arguments to the hook API (a direction that is not "fwd"/"bwd"/"both", a level that is
not a context depth, a hook that is not callable) raise an error naming the value and the
valid ones, before any hook or ``ctx`` changes."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig


def noop(activation, hook):
    return None


@pytest.fixture
def model():
    cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_heads=2, d_mlp=32, d_vocab=20, n_ctx=8)
    model = HookedTransformer(cfg).eval()
    model.add_hook("hook_embed", noop)
    model.add_perma_hook("blocks.0.hook_resid_pre", noop, dir="bwd")
    model.hook_dict["hook_embed"].ctx["kept"] = 1
    return model


def state(model) -> dict:
    """Every hook point's hooks and ctx."""
    return {
        name: (list(point.fwd_hooks), list(point.bwd_hooks), dict(point.ctx))
        for name, point in model.hook_dict.items()
    }


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.reset_hooks(direction="sideways"),
        lambda m: m.reset_hooks(direction=None),
        lambda m: m.remove_all_hook_fns(direction="sideways"),
        lambda m: m.hook_dict["hook_embed"].remove_hooks(dir="sideways"),
    ],
)
def test_removing_in_a_bad_direction_names_it_and_changes_nothing(model, call):
    before = state(model)
    with pytest.raises(ValueError, match=r"=('sideways'|None) is not a hook direction: pass 'fwd'"):
        call(model)
    assert state(model) == before


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.add_hook("hook_embed", noop, dir="both"),
        lambda m: m.add_hook(lambda name: False, noop, dir="sideways"),  # matches no point
        lambda m: m.add_perma_hook("hook_embed", noop, dir="forward"),
        lambda m: m.hook_dict["hook_embed"].add_hook(noop, dir="backward"),
    ],
)
def test_adding_in_a_bad_direction_names_it_and_attaches_nothing(model, call):
    before = state(model)
    with pytest.raises(ValueError, match=r"dir='\w+' is not a hook direction: pass 'fwd' or 'bwd'"):
        call(model)
    assert state(model) == before


def test_both_removes_both_directions(model):
    model.reset_hooks(direction="both", including_permanent=True)
    assert not any(point.has_hooks for point in model.hook_dict.values())


@pytest.mark.parametrize("level", ["1", -1, 1.0, True])
def test_a_level_that_is_not_a_context_depth(model, level):
    before = state(model)
    with pytest.raises(TypeError, match=rf"level={level!r} is not a hooks\(\) context level"):
        model.reset_hooks(level=level)
    with pytest.raises(TypeError, match=rf"level={level!r}"):
        model.add_hook("hook_embed", noop, level=level)
    assert state(model) == before


def test_a_hook_that_is_not_callable_attaches_nothing(model):
    before = state(model)
    with pytest.raises(TypeError, match="must be callable as fn\\(activation, hook\\), got 3"):
        model.add_hook(lambda name: False, 3)
    assert state(model) == before
    model(torch.zeros(1, 3, dtype=torch.long))  # the model still runs


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda m: m.reset_hooks("sideways"), "clear_contexts='sideways'"),
        (lambda m: m.reset_hooks("fwd"), r"clear_contexts='fwd'"),
        (lambda m: m.reset_hooks(including_permanent="yes"), "including_permanent='yes'"),
        (lambda m: m.remove_all_hook_fns(including_permanent=None), "including_permanent=None"),
        (lambda m: m.hooks(reset_hooks_end="no").__enter__(), "reset_hooks_end='no'"),
        (lambda m: m.run_with_hooks(torch.zeros(1, 2, dtype=torch.long), clear_contexts=[]),
         r"clear_contexts=\[\]"),
    ],
)  # fmt: skip
def test_a_flag_that_is_not_a_bool_names_it_and_changes_nothing(model, call, argument):
    before = state(model)
    with pytest.raises(TypeError, match=rf"{argument} is not a flag: pass True or False") as error:
        call(model)
    if "'" in argument:  # a string: perhaps a direction given in the wrong place
        assert "goes in direction=" in str(error.value)
    assert state(model) == before
    assert model.context_level == 0
