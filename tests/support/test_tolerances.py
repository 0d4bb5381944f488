"""tests/support/tolerances.py: its bounds hold for real float32 and bfloat16 products, and stay far
below the size of a wrong result (a test using them can still fail)."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformerConfig
from tests.support.tolerances import error_bound, model_error_bound, sum_tolerance, tolerance


@pytest.mark.parametrize("n", [16, 256, 4096])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_product_is_within_the_bound_of_its_float64_value(n, dtype):
    generator = torch.Generator().manual_seed(n)
    a = torch.randn(64, n, generator=generator, dtype=torch.float64)
    b = torch.randn(n, 32, generator=generator, dtype=torch.float64)
    a, b = a.to(dtype).double(), b.to(dtype).double()  # inputs exact in both
    exact = a @ b
    rounded = (a.to(dtype) @ b.to(dtype)).double()
    torch.testing.assert_close(rounded, exact, **tolerance(dtype, reduction=n, magnitude=exact))


def test_a_sum_of_terms_is_within_its_bound():
    terms = torch.randn(1000, 50, generator=torch.Generator().manual_seed(0)) * 10
    exact = terms.double().sum(0)
    torch.testing.assert_close(terms.sum(0).double(), exact, **sum_tolerance(terms))
    torch.testing.assert_close(terms.flip(0).sum(0), terms.sum(0), **sum_tolerance(terms))


def test_bounds_stay_far_below_a_wrong_result():
    """A relative error of 1e-3 (a wrong scale, a missing bias, a dropped term) is outside
    the float32 bound of a GPT-2-small-sized forward, so parity tests still catch it."""
    gpt2_small = HookedTransformerConfig(
        n_layers=12, d_model=768, n_heads=12, d_mlp=3072, d_vocab=50257, n_ctx=1024
    )
    assert model_error_bound(gpt2_small) < 1e-3
    assert error_bound(torch.float32, reduction=256) < 1e-4
    assert error_bound(torch.bfloat16) < 0.1  # a few bfloat16 steps
    assert error_bound(torch.float32, depth=4) == 2 * error_bound(torch.float32)
