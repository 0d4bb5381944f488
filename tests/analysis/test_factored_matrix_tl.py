"""FactoredMatrix as TransformerLens 2.18's: products with scalars, matrices, vectors and other
FactoredMatrices under its broadcasting rules (and the hidden dimension it keeps), ``.Vh``, and
the exceptions its tests expect (AssertionError / RuntimeError, which ours also are)."""

from __future__ import annotations

import einops
import pytest
import torch
from torch import randn

from interp import FactoredMatrix

torch.manual_seed(0)


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal up to float32 rounding of products over at most a few dozen terms."""
    scale = expected.abs().max().clamp(min=1)
    torch.testing.assert_close(actual, expected, atol=64 * torch.finfo().eps * scale, rtol=0)


@pytest.mark.parametrize("scalar", [torch.rand(1), 0.37, 3], ids=["tensor", "float", "int"])
@pytest.mark.parametrize("leading", [(), (6,)])
def test_scalar_multiplication_from_either_side(scalar, leading):
    a, b = randn(*leading, 2, 3), randn(*leading, 3, 4)
    fm = FactoredMatrix(a, b)
    close((fm * scalar).AB, (a @ b) * scalar)
    close((scalar * fm).AB, (a @ b) * scalar)


@pytest.mark.parametrize("not_scalar", [torch.rand(2, 2), torch.rand(2)])
def test_multiplying_by_a_non_scalar_tensor_is_an_assertion_and_value_error(not_scalar):
    fm = FactoredMatrix(randn(2, 3), randn(3, 4))
    for product in (lambda: fm * not_scalar, lambda: not_scalar * fm):
        with pytest.raises(AssertionError):
            product()
        with pytest.raises(ValueError, match="use @ for matrix products"):
            product()


@pytest.mark.parametrize(
    ("a", "b", "matrix"),
    [(randn(2, 3), randn(3, 4), randn(4, 5)), (randn(2, 6), randn(6, 4), randn(4, 5)),
     (randn(2, 4), randn(4, 4), randn(4, 5))],
    ids=["rdim > mdim", "rdim < mdim", "rdim == mdim"],
)  # fmt: skip
@pytest.mark.parametrize(
    ("fm_leading", "matrix_leading", "result_leading"),
    [((), (), ()), ((2,), (), (2,)), ((), (2, 12), (2, 12)), ((2,), (2,), (2,))],
)
def test_times_a_matrix_keeps_the_smaller_hidden_dim_and_broadcasts(
    a, b, matrix, fm_leading, matrix_leading, result_leading
):
    a, b = a.expand(*fm_leading, *a.shape), b.expand(*fm_leading, *b.shape)
    matrix = matrix.expand(*matrix_leading, *matrix.shape)
    fm = FactoredMatrix(a, b)
    product = fm @ matrix
    close(product.AB, (a @ b) @ matrix)
    assert (product.ldim, product.mdim, product.rdim) == (2, min(fm.mdim, 4), 5)
    assert product.A.shape[:-2] == product.B.shape[:-2] == result_leading
    # The same from the left: matrix.mT @ fm.T
    left = matrix.mT @ fm.T
    close(left.AB, matrix.mT @ (a @ b).mT)
    assert (left.ldim, left.mdim, left.rdim) == (5, min(fm.mdim, 4), 2)


@pytest.mark.parametrize(
    ("a", "b"),
    [((randn(3, 3), randn(3, 3)), (randn(3, 3), randn(3, 3))),
     ((randn(1, 2), randn(2, 1)), (randn(1, 6), randn(6, 1))),
     ((randn(5, 2), randn(2, 1)), (randn(1, 1), randn(1, 1))),
     ((randn(1, 2), randn(2, 5)), (randn(5, 3), randn(3, 1))),
     ((randn(3, 4), randn(4, 5)), (randn(5, 6), randn(6, 7))),
     ((randn(8, 6), randn(6, 5)), (randn(5, 7), randn(7, 3))),
     ((randn(7, 6), randn(6, 3)), (randn(3, 7), randn(7, 8)))],
)  # fmt: skip
@pytest.mark.parametrize(
    ("a_leading", "b_leading"), [((), ()), ((2,), ()), ((), (2,)), ((2, 9), (9,))]
)
def test_times_a_factored_matrix(a, b, a_leading, b_leading):
    a = [t.expand(*a_leading, *t.shape) for t in a]
    b = [t.expand(*b_leading, *t.shape) for t in b]
    left, right = FactoredMatrix(*a), FactoredMatrix(*b)
    product = left @ right
    close(product.AB, (a[0] @ a[1]) @ (b[0] @ b[1]))
    assert product.ldim == left.ldim and product.rdim == right.rdim
    assert product.mdim == min(left.mdim, left.rdim, right.ldim, right.mdim)
    leading = torch.broadcast_shapes(a_leading, b_leading)
    assert product.A.shape[:-2] == product.B.shape[:-2] == leading


@pytest.mark.parametrize(
    ("left", "right", "error"),
    [((randn(2, 3, 4), randn(2, 4, 6)), (randn(4, 6, 7), randn(4, 7, 2)), RuntimeError),
     ((randn(2, 9, 3, 4), randn(2, 9, 4, 6)), (randn(2, 6, 7), randn(2, 7, 2)), RuntimeError),
     ((randn(3, 4), randn(4, 6)), (randn(5, 6), randn(6, 7)), AssertionError),
     ((randn(3, 4), randn(4, 6)), (randn(2, 5, 6), randn(2, 6, 7)), AssertionError)],
    ids=["leading", "two leading vs one", "inner", "inner with batch"],
)  # fmt: skip
def test_dimension_mismatches_raise_what_transformer_lens_raises(left, right, error):
    with pytest.raises(error):
        FactoredMatrix(*left) @ FactoredMatrix(*right)
    with pytest.raises(ValueError):
        FactoredMatrix(*left) @ FactoredMatrix(*right)


def test_constructor_broadcasts_and_names_a_mismatch():
    fm = FactoredMatrix(torch.ones(4, 5, 3), torch.ones(2, 4, 3, 7))
    assert fm.A.shape == (2, 4, 5, 3) and fm.shape == (2, 4, 5, 7) and fm.has_leading_dims
    with pytest.raises(RuntimeError, match=r"[Mm]ismatch"):
        FactoredMatrix(torch.ones(9, 5, 3), torch.ones(2, 4, 3, 7))


def test_vectors_collapse_to_tensors():
    a, b = torch.rand(6, 2, 3), torch.rand(6, 3, 4)
    fm = FactoredMatrix(a, b)
    close(fm @ torch.ones(4), (a @ b) @ torch.ones(4))
    close(torch.ones(2) @ fm, torch.ones(2) @ (a @ b))  # TL 2.18 keeps a stray axis here


def test_vh_is_the_right_singular_vectors_untransposed():
    fm = FactoredMatrix(randn(3, 6, 7), randn(3, 7, 5))
    U, S, Vh = fm.svd()
    assert Vh is fm.Vh and torch.equal(fm.Vh, fm.V) and Vh.shape == (3, 5, 5)
    close(U @ torch.diag_embed(S) @ Vh.mT, fm.AB)
    close(Vh.mT @ Vh, torch.eye(5).expand(3, 5, 5))
    close(fm.collapse_l(), S[..., :, None] * Vh.mT)
    even = fm.make_even()
    close(even.AB, fm.AB)


def test_non_square_ba_and_eigenvalues_are_assertion_errors():
    fm = FactoredMatrix(randn(6, 7), randn(7, 3))
    for what in ("BA", "eigenvalues"):
        with pytest.raises(AssertionError, match="needs a square matrix"):
            getattr(fm, what)


def test_product_with_a_batch_of_matrices_matches_einops_reference():
    """The model's OV circuit times the unembedding: a [layers, heads] batch of products."""
    W_V, W_O, W_U = randn(2, 4, 16, 4), randn(2, 4, 4, 16), randn(16, 30)
    ov_u = FactoredMatrix(W_V, W_O) @ W_U
    expected = einops.einsum(W_V, W_O, W_U, "l h m d, l h d n, n v -> l h m v")
    close(ov_u.AB, expected)
    assert ov_u.mdim == 4
