"""``apply_ln_to_stack`` and ``logit_attrs`` on stacks of every shape (no component axis,
one, several; with and without a position or batch axis), and the stack builders with
``apply_ln=True``, against what TransformerLens 2.18 computed on the same weights
(tests/tl218_reference/make_cache.py wrote the fixtures)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp import HookedTransformerConfig
from interp.loading.transformer_lens import load_transformer_lens_state_dict

REFERENCE = Path(__file__).parents[1] / "tl218_reference"
MANIFEST = json.loads((REFERENCE / "cache_cases.json").read_text())
CONFIG = MANIFEST["config"]


def decode(value):
    """A slice argument from the manifest: {"tuple": [...]} is a (start, stop) tuple."""
    return tuple(value["tuple"]) if isinstance(value, dict) else value


@pytest.fixture(scope="module")
def runs():
    """Per model: its fixture tensors, TL's logits check, and interp's two caches."""
    loaded = {}
    for name, model_info in MANIFEST["models"].items():
        tensors = load_file(REFERENCE / f"cache_{name}.safetensors")
        params = {k.removeprefix("param."): v for k, v in tensors.items() if k.startswith("param.")}
        cfg = HookedTransformerConfig(**CONFIG, **model_info)
        model = load_transformer_lens_state_dict(params, cfg).eval()
        tokens = tensors["tokens"]
        with torch.no_grad():
            logits, batch = model.run_with_cache(tokens)
            one_logits, one = model.run_with_cache(tokens[:1])
        caches = {"batch": batch, "one": one.remove_batch_dim()}
        loaded[name] = (tensors, caches, {"batch": logits, "one": one_logits})
    return loaded


def tolerance(expected: torch.Tensor, reduced: int = 1) -> float:
    """The cached scales come from two forward passes (TL's and ours) through n_layers blocks
    whose largest reduction is d_mlp long: a few eps * sqrt(d_mlp) per layer, relative; a
    dot product over ``reduced`` entries adds sqrt(reduced)."""
    eps = torch.finfo(expected.dtype).eps
    per_layer = 8 * eps * math.sqrt(CONFIG["d_mlp"])
    magnitude = float(expected.abs().max()) if expected.numel() else 1.0
    return CONFIG["n_layers"] * per_layer * math.sqrt(reduced) * magnitude


def test_the_state_dict_gives_transformer_lens_logits(runs):
    for tensors, _, logits in runs.values():
        for cache_name, actual in logits.items():
            expected = tensors[f"logits.{cache_name}"]
            torch.testing.assert_close(actual, expected, atol=tolerance(expected), rtol=0)


def case_id(case: dict) -> str:
    kwargs = ",".join(f"{k}={v}" for k, v in case["kwargs"].items())
    tokens = f",{case['tokens']}" if "tokens" in case else ""
    return f"{case['model']}-{case['cache']}-{case['method']}-{case['stack']}-{kwargs}{tokens}"


@pytest.mark.parametrize("case", MANIFEST["cases"], ids=case_id)
def test_matches_transformer_lens(runs, case):
    tensors, caches, _ = runs[case["model"]]
    cache = caches[case["cache"]]
    stack = tensors.get(f"stack.{case['cache']}.{case['stack']}")
    kwargs = {key: decode(value) for key, value in case["kwargs"].items()}
    expected = tensors[case["result"]]
    if case["method"] == "apply_ln_to_stack":
        actual = cache.apply_ln_to_stack(stack, **kwargs)
        atol = tolerance(expected)
    elif case["method"] != "logit_attrs":  # a stack builder with apply_ln=True
        actual = getattr(cache, case["method"])(**kwargs)
        atol = tolerance(expected)
    else:
        tokens = tensors[f"tokens.{case['tokens']}"]
        wrong = case["incorrect_tokens"]
        wrong = None if wrong is None else tensors[f"tokens.{wrong}"]
        actual = cache.logit_attrs(stack, tokens, wrong, **kwargs)
        atol = tolerance(expected, reduced=CONFIG["d_model"])
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, atol=atol, rtol=0)


def test_the_fixture_covers_each_stack_shape():
    shapes = {(case["stack"], case["method"]) for case in MANIFEST["cases"]}
    for stack in ("stream", "stream_last", "heads", "heads_last", "accumulated_last"):
        assert (stack, "apply_ln_to_stack") in shapes and (stack, "logit_attrs") in shapes


def test_interp_builds_the_same_stacks(runs):
    """The fixture's inputs are the stacks interp's own methods give."""
    tensors, caches, _ = runs["ln"]
    cache = caches["batch"]
    n_layers, n_heads = CONFIG["n_layers"], CONFIG["n_heads"]
    built = {
        "accumulated_last": cache.accumulated_resid(incl_mid=True, pos_slice=-1),
        "heads_last": cache.stack_head_results(pos_slice=-1).unflatten(0, (n_layers, n_heads)),
    }
    for name, stack in built.items():
        expected = tensors[f"stack.batch.{name}"]
        torch.testing.assert_close(stack, expected, atol=tolerance(expected), rtol=0)


# ----------------------------------------------------------------------- bad shapes
@pytest.fixture(scope="module")
def cache(runs):
    return runs["ln"][1]["batch"]


def test_a_stack_without_room_for_its_axes_names_its_shape(cache):
    with pytest.raises(ValueError, match=r"shape \(16,\) lacks the axes \[\.\.\., batch, pos, "):
        cache.apply_ln_to_stack(torch.zeros(16))


def test_a_stack_built_with_another_pos_slice_names_both_shapes(cache):
    stack = cache.accumulated_resid(pos_slice=-1)  # [component, batch, d_model]
    with pytest.raises(ValueError, match=r"\(3, 3, 16\) does not end in .* \(3, 6\).*pos_slice"):
        cache.apply_ln_to_stack(stack)


def test_has_batch_dim_false_needs_one_example(cache):
    stack = cache.accumulated_resid()[:, 1]
    with pytest.raises(ValueError, match=r"batch_slice=\[0, 2\] keeps 2 examples"):
        cache.apply_ln_to_stack(stack, batch_slice=[0, 2], has_batch_dim=False)


def test_batch_slice_on_a_cache_without_a_batch_axis(runs):
    one = runs["ln"][1]["one"]
    with pytest.raises(ValueError, match=r"batch_slice=0 needs a batch axis"):
        one.apply_ln_to_stack(one.accumulated_resid(), batch_slice=0)


def test_tokens_that_do_not_fit_the_stack(cache):
    stack = cache.accumulated_resid(pos_slice=-1)  # [component, 3, d_model]
    with pytest.raises(ValueError, match=r"Tokens of shape \(2,\) do not fit .* \(3,\)"):
        cache.logit_attrs(stack, torch.tensor([1, 2]), pos_slice=-1)
    with pytest.raises(ValueError, match=r"Tokens of shape \(3, 6\) do not fit"):
        cache.logit_attrs(stack, torch.zeros(3, 6, dtype=torch.long), pos_slice=-1)
