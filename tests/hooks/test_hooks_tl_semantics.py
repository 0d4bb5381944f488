"""Hook semantics against TransformerLens: the same scenario on an interp root module and a
TransformerLens one (same layers, same weights) must call the same hooks, in the same order,
and give the same gradients."""

from __future__ import annotations

import logging

import pytest
import torch
import transformer_lens
import transformer_lens.hook_points as tl_hook_points
from torch import nn

import interp
import interp.hook_points as hook_points
from tests.support.tolerances import tolerance


def tiny(root_cls: type, hook_point_cls: type) -> nn.Module:
    """linear(hook_in(x)) -> hook_out -> sum of squares, as a root module of ``root_cls``."""

    class Tiny(root_cls):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.linear = nn.Linear(4, 4)
            self.hook_in = hook_point_cls()
            self.hook_out = hook_point_cls()
            self.setup()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.hook_out(self.linear(self.hook_in(x))).pow(2).sum()

    return Tiny()


def both() -> dict[str, nn.Module]:
    return {
        "interp": tiny(hook_points.HookedRootModule, hook_points.HookPoint),
        "transformer_lens": tiny(transformer_lens.HookedRootModule, tl_hook_points.HookPoint),
    }


def remove(handle) -> None:
    """Detach what add_hook returned (interp's handle, or TransformerLens's LensHandle)."""
    handle.hook.remove() if isinstance(handle, tl_hook_points.LensHandle) else handle.remove()


X = torch.arange(8.0).reshape(2, 4) / 8


def test_tl_import_path_works_after_import_interp():
    assert interp.hook_points.HookPoint is interp.HookPoint
    assert interp.hook_points.HookedRootModule is interp.HookedRootModule
    handle = interp.HookPoint().add_hook(lambda x, hook: None, level=2)
    assert isinstance(handle, hook_points.LensHandle) and handle.context_level == 2


def test_a_hook_that_removes_itself_does_not_skip_the_next_one():
    def scenario(model: nn.Module) -> list[str]:
        seen = []

        def first(x, hook):
            seen.append("first")
            remove(handle)

        handle = model.hook_dict["hook_in"].add_hook(first)
        model.hook_dict["hook_in"].add_hook(lambda x, hook: seen.append("second"))
        model(X)
        model(X)
        return seen

    calls = {framework: scenario(model) for framework, model in both().items()}
    assert calls["interp"] == calls["transformer_lens"] == ["first", "second", "second"]


def test_a_hook_that_adds_to_its_own_point_runs_the_new_hook_from_the_next_pass():
    def scenario(model: nn.Module) -> list[str]:
        seen = []

        def spawner(x, hook):
            seen.append("spawner")
            if len(seen) < 50:  # a hook list read while it grows would loop up to here
                hook.add_hook(lambda x, hook: seen.append("spawned"))

        model.hook_dict["hook_in"].add_hook(spawner)
        for _ in range(3):
            model(X)
            seen.append("|")
        return seen

    calls = {framework: scenario(model) for framework, model in both().items()}
    expected = ["spawner", "|", "spawner", "spawned", "|", "spawner", "spawned", "spawned", "|"]
    assert calls["interp"] == calls["transformer_lens"] == expected


@pytest.mark.parametrize("returns", ["tensor", "1-tuple", "None"])
def test_backward_hooks_may_return_grad_as_a_tensor_a_1_tuple_or_none(returns):
    def double(grad, hook):
        if returns == "None":
            return None
        return (grad * 2,) if returns == "1-tuple" else grad * 2

    grads = {}
    for framework, model in both().items():
        with model.hooks(bwd_hooks=[("hook_out", double)]):
            model(X).backward()
        grads[framework] = model.linear.weight.grad
    torch.testing.assert_close(grads["interp"], grads["transformer_lens"], atol=0, rtol=0)
    plain = tiny(hook_points.HookedRootModule, hook_points.HookPoint)
    plain(X).backward()
    factor = 1 if returns == "None" else 2
    torch.testing.assert_close(grads["interp"], plain.linear.weight.grad * factor)


def fire_counts(model: nn.Module) -> dict[str, int]:
    """How many of each named hook run in one forward (hooks append their names)."""
    model.fired = []
    model(X)
    return {name: model.fired.count(name) for name in sorted(set(model.fired))}


def recorder(model: nn.Module, name: str):
    return lambda x, hook: model.fired.append(name)


def test_levels_permanence_and_removal_match_transformer_lens():
    history = {}
    for framework, model in both().items():
        point = model.hook_dict["hook_in"]
        point.add_hook(recorder(model, "plain"))
        point.add_hook(recorder(model, "level 1"), level=1)
        point.add_hook(recorder(model, "level 2"), level=2)
        point.add_perma_hook(recorder(model, "permanent"))
        point.add_hook(recorder(model, "first"), prepend=True)
        model.add_hook("hook_in", recorder(model, "root level 2"), level=2)
        point.add_hook(lambda grad, hook: None, dir="bwd")
        model.fired = []
        model(X)
        steps = [list(model.fired)]
        point.remove_hooks(level=2)  # TransformerLens's default direction: forward only
        steps += [fire_counts(model), len(point.bwd_hooks)]
        model.remove_all_hook_fns(level=1)
        steps.append(fire_counts(model))
        model.remove_all_hook_fns()
        steps += [fire_counts(model), len(point.bwd_hooks)]
        model.reset_hooks(including_permanent=True)
        steps.append(fire_counts(model))
        history[framework] = steps
    assert history["interp"] == history["transformer_lens"]
    assert history["interp"][-1] == {}


def test_context_levels_and_reset_hooks_end_match_transformer_lens():
    history = {}
    for framework, model in both().items():
        steps = [model.context_level]
        with model.hooks(fwd_hooks=[("hook_in", recorder(model, "outer"))]):
            with model.hooks(fwd_hooks=[("hook_out", recorder(model, "inner"))]):
                steps.append(model.context_level)
                steps.append([h.context_level for h in model.hook_dict["hook_out"].fwd_hooks])
                steps.append(fire_counts(model))
            steps += [model.context_level, fire_counts(model)]
        steps.append(model.context_level)
        with model.hooks(fwd_hooks=[("hook_in", recorder(model, "kept"))], reset_hooks_end=False):
            pass
        steps.append(fire_counts(model))
        model.reset_hooks()
        steps.append(fire_counts(model))
        history[framework] = steps
    assert history["interp"] == history["transformer_lens"]
    assert history["interp"][-2:] == [{"kept": 1}, {}]


def test_clear_contexts_matches_transformer_lens():
    def remember(x, hook):
        hook.ctx["seen"] = hook.ctx.get("seen", 0) + 1

    history = {}
    for framework, model in both().items():
        point = model.hook_dict["hook_in"]
        model.run_with_hooks(X, fwd_hooks=[("hook_in", remember)])
        steps = [dict(point.ctx)]
        model.run_with_hooks(X, fwd_hooks=[("hook_in", remember)], clear_contexts=True)
        steps.append(dict(point.ctx))
        model.run_with_hooks(X, fwd_hooks=[("hook_in", remember)])
        model.reset_hooks(clear_contexts=False)
        steps.append(dict(point.ctx))
        model.reset_hooks()
        steps.append(dict(point.ctx))
        history[framework] = steps
    assert history["interp"] == history["transformer_lens"] == [{"seen": 1}, {}, {"seen": 1}, {}]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(bwd_hooks=True),
        dict(bwd_hooks=True, reset_hooks_end=False),
        dict(bwd_hooks=False),
        dict(bwd_hooks=False, reset_hooks_end=False),
    ],
    ids=["bwd", "bwd-kept", "fwd-only", "fwd-only-kept"],
)
def test_run_with_hooks_warns_about_backward_hooks_exactly_when_transformer_lens_does(
    kwargs, caplog
):
    kwargs = dict(kwargs)
    bwd = [("hook_out", lambda grad, hook: None)] if kwargs.pop("bwd_hooks") else []
    messages = {}
    for framework, model in both().items():
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            model.run_with_hooks(
                X, fwd_hooks=[("hook_in", lambda x, hook: None)], bwd_hooks=bwd, **kwargs
            )
        messages[framework] = [r.getMessage() for r in caplog.records]
        model.reset_hooks()
    assert len(messages["interp"]) == len(messages["transformer_lens"])
    for ours, theirs in zip(messages["interp"], messages["transformer_lens"], strict=True):
        assert theirs.startswith("WARNING: Hooks will be reset at the end of run_with_hooks.")
        assert ours.startswith(theirs) and "reset_hooks_end=False" in ours


def test_backward_hooks_of_run_with_hooks_fire_later_only_with_reset_hooks_end_false(caplog):
    model = tiny(hook_points.HookedRootModule, hook_points.HookPoint)
    grads = []

    def keep(grad, hook):
        grads.append(grad.clone())

    with caplog.at_level(logging.WARNING):
        out = model.run_with_hooks(X, bwd_hooks=[("hook_out", keep)])
    out.backward()
    assert grads == [] and "removes the backward hooks" in caplog.text  # removed, as warned

    out = model.run_with_hooks(X, bwd_hooks=[("hook_out", keep)], reset_hooks_end=False)
    out.backward()
    activation = model.linear(X)
    within = tolerance(torch.float32, reduction=X.shape[-1], magnitude=2 * activation)
    torch.testing.assert_close(grads[0], 2 * activation, **within)  # d(sum a^2)/da
    assert model.hook_dict["hook_out"].has_hooks
    model.reset_hooks()
    assert not any(hp.has_hooks for hp in model.hook_dict.values())
