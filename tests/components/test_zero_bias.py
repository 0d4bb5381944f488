"""Leaving out an all-zero bias on the CPU (``bias_is_skippable``) changes no number, keeps
gradients flowing to biases that need them, notices a bias edited in place at once, and is
not even checked for short inputs (a decoding step), where the check would cost more."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.components.activations import MIN_ROWS_TO_CHECK_BIAS, affine, bias_is_skippable
from tests.support.tolerances import tolerance


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("zero_bias", [True, False])
def test_affine_equals_addmm(dtype: torch.dtype, zero_bias: bool) -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 20, 16, generator=generator).to(dtype)  # 80 rows: the bias is checked
    weight = torch.randn(16, 7, generator=generator).to(dtype)
    bias = (
        torch.zeros(7, dtype=dtype) if zero_bias else torch.randn(7, generator=generator).to(dtype)
    )
    assert bias_is_skippable(bias, rows=80) == zero_bias
    expected = torch.addmm(bias, x.reshape(-1, 16), weight).view(4, 20, 7)
    assert torch.equal(affine(x, weight, bias), expected)


def test_a_zero_bias_that_needs_a_gradient_gets_it() -> None:
    x = torch.randn(4, 16, 8)
    weight = torch.randn(8, 3, requires_grad=True)
    bias = torch.zeros(3, requires_grad=True)
    assert not bias_is_skippable(bias, rows=64)
    affine(x, weight, bias).sum().backward()
    assert torch.equal(bias.grad, torch.full((3,), 64.0))
    with torch.no_grad():
        assert bias_is_skippable(bias, rows=64)


def test_short_inputs_add_the_bias_without_checking_it() -> None:
    assert not bias_is_skippable(torch.zeros(5), rows=MIN_ROWS_TO_CHECK_BIAS - 1)
    assert bias_is_skippable(torch.zeros(5), rows=MIN_ROWS_TO_CHECK_BIAS)


def llama_shaped_model() -> interp.HookedTransformer:
    cfg = interp.HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        n_heads=4,
        d_head=8,
        n_key_value_heads=2,
        d_mlp=64,
        d_vocab=50,
        n_ctx=16,
        act_fn="silu",
        gated_mlp=True,
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_dim=8,
        seed=0,
    )
    return interp.HookedTransformer(cfg).eval()


def test_a_bias_edited_in_place_is_used_at_once() -> None:
    """Every bias of a Llama-shaped model starts at zero; edits through ``.data`` (which do not
    bump the version counter) and in place must change the very next forward."""
    model = llama_shaped_model()
    # 8 x 16 = 128 rows: enough for the bias to be checked (MIN_ROWS_TO_CHECK_BIAS).
    tokens = torch.randint(0, 50, (8, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = model(tokens)
        model.unembed.b_U.data += 0.5
        expected = plain + 0.5  # one rounding of the sum, at its size
        within = tolerance(torch.float32, magnitude=expected)
        assert torch.allclose(model(tokens), expected, **within)
        model.unembed.b_U.zero_()
        assert torch.equal(model(tokens), plain)

        model.blocks[1].mlp.b_out.data.fill_(0.25)
        shifted = model(tokens)
        model.blocks[1].mlp.b_out.zero_()
        assert not torch.allclose(shifted, plain)
        model.blocks[0].attn.b_Q.data.normal_()
        assert not torch.allclose(model(tokens), plain)
