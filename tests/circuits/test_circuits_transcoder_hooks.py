"""Hooks named after the transcoders' input and output (circuit-tracer's
``blocks.{layer}.mlp.hook_in`` / ``mlp.hook_out``), and its hook-level helpers on them:
``_get_activation_caching_hooks`` and ``setup_intervention_with_freeze``."""

from __future__ import annotations

from functools import cache

import pytest
import torch

from interp.circuits import ReplacementModel
from tests.support.tolerances import tolerance

PROMPT = "ROMEO:\nIt seems she hangs upon the chee"


@cache
def replacement() -> ReplacementModel:
    return ReplacementModel.from_pretrained("shakespeare-char", "shakespeare-char-transcoders")


def test_mlp_output_hook_runs_at_the_mlp_output() -> None:
    model = replacement()
    tokens = model.ensure_tokenized(PROMPT)

    def zero(acts, hook):
        assert hook.name == "blocks.1.mlp.hook_out" and hook.layer() == 1
        return torch.zeros_like(acts)

    ours = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.mlp.hook_out", zero)])
    expected = model.model.run_with_hooks(
        tokens, fwd_hooks=[("blocks.1.hook_mlp_out", lambda acts, hook: torch.zeros_like(acts))]
    )
    torch.testing.assert_close(ours, expected, rtol=0, atol=0)
    assert not any(point.has_hooks for point in model.model.hook_dict.values())


def test_caching_hooks_give_get_activations() -> None:
    model = replacement()
    tokens = model.ensure_tokenized(PROMPT)
    activations, hooks = model._get_activation_caching_hooks()
    logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
    expected_logits, expected = model.get_activations(tokens)
    torch.testing.assert_close(torch.stack(activations), expected, rtol=0, atol=0)
    torch.testing.assert_close(logits, expected_logits, rtol=0, atol=0)


def test_frozen_run_is_the_clean_run_and_freezes_what_it_says() -> None:
    model = replacement()
    tokens = model.ensure_tokenized(PROMPT)
    clean_logits, clean = model.get_activations(tokens)
    layers = range(model.cfg.n_layers)
    activations, freeze = model.setup_intervention_with_freeze(tokens, constrained_layers=layers)
    # the recording run takes the unfused norm path (its scales are read): rounding apart
    within = tolerance(torch.float32, reduction=model.cfg.d_mlp, depth=2 * model.cfg.n_layers)
    torch.testing.assert_close(activations, clean, **within)
    frozen_logits = model.run_with_hooks(tokens, fwd_hooks=freeze)
    within = tolerance(
        torch.float32, reduction=model.cfg.d_mlp, depth=2 * model.cfg.n_layers,
        magnitude=clean_logits,
    )  # fmt: skip
    torch.testing.assert_close(frozen_logits, clean_logits, **within)
    # With every MLP frozen, an edit at layer 0's output reaches layer 3's MLP output only
    # through its transcoder's skip path (the frozen output plus the skip's change).
    assert model.skip_transcoder
    seen: dict[str, torch.Tensor] = {}

    def keep(key):
        return lambda acts, hook: seen.__setitem__(key, acts.clone())

    def push(acts, hook):
        return acts + 1.0

    def run(tag, extra):
        reads = [("blocks.3.mlp.hook_in", keep(f"in_{tag}")), ("blocks.3.mlp.hook_out", keep(tag))]
        return model.run_with_hooks(tokens, fwd_hooks=[*freeze, *extra, *reads])

    frozen_logits = run("reference", [])
    pushed_logits = run("pushed", [("blocks.0.mlp.hook_out", push)])
    skip_change = model.transcoders.skip(3, seen["in_pushed"]) - model.transcoders.skip(
        3, seen["in_reference"]
    )
    within = tolerance(torch.float32, reduction=model.cfg.d_model, magnitude=seen["reference"])
    torch.testing.assert_close(seen["pushed"] - seen["reference"], skip_change, **within)
    assert not torch.allclose(pushed_logits, frozen_logits)  # the edit does reach the logits


def test_a_hook_cannot_replace_the_transcoders_input() -> None:
    model = replacement()
    tokens = model.ensure_tokenized(PROMPT)

    def double(acts, hook):
        return acts * 2

    with pytest.raises(ValueError, match="read there, not replaced"):
        model.run_with_hooks(
            tokens, fwd_hooks=[("blocks.0.mlp.hook_in", lambda acts, hook: acts * 2)]
        )
    assert not any(point.has_hooks for point in model.model.hook_dict.values())
    assert not model.model.blocks[0].mlp._forward_pre_hooks
