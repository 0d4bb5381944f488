"""FactoredMatrix against the dense product on random matrices, and against TransformerLens."""

from __future__ import annotations

import math

import pytest
import torch
from transformer_lens.FactoredMatrix import FactoredMatrix as TransformerLensFactoredMatrix

from interp import FactoredMatrix, HookedTransformer, HookedTransformerConfig
from interp.utils import get_corner
from tests.support.tolerances import tolerance


def random(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.fixture
def factored():
    """A [3, 2]-batch of 12 x 12 matrices of rank 4 (leading dims broadcast from A and B)."""
    return FactoredMatrix(random(3, 1, 12, 4, seed=1), random(2, 4, 12, seed=2))


def test_shape_and_product(factored):
    assert factored.shape == (3, 2, 12, 12) and factored.ndim == 4 and factored.mdim == 4
    dense = random(3, 1, 12, 4, seed=1) @ random(2, 4, 12, seed=2)
    torch.testing.assert_close(factored.AB, dense)
    torch.testing.assert_close(factored.BA, factored.B @ factored.A)


def test_matmul_with_tensors_and_factored_matrices(factored):
    dense = factored.AB
    matrix, vector = random(12, 5, seed=3), random(12, seed=4)
    torch.testing.assert_close((factored @ matrix).AB, dense @ matrix)
    torch.testing.assert_close(factored @ vector, dense @ vector)
    torch.testing.assert_close((matrix.T @ factored).AB, matrix.T @ dense)
    torch.testing.assert_close(vector @ factored, vector @ dense)
    other = FactoredMatrix(random(12, 3, seed=5), random(3, 7, seed=6))
    product = factored @ other
    assert isinstance(product, FactoredMatrix)
    torch.testing.assert_close(product.AB, dense @ other.AB)
    wide = random(12, 30, seed=7)  # more columns than the hidden dim: stays factored
    assert (factored @ wide).mdim == 4
    torch.testing.assert_close((2.5 * factored).AB, 2.5 * dense)


def test_transpose(factored):
    torch.testing.assert_close(factored.T.AB, factored.AB.transpose(-2, -1))


def test_svd_matches_dense(factored):
    U, S, V = factored.svd()
    assert U.shape == (3, 2, 12, 4) and S.shape == (3, 2, 4) and V.shape == (3, 2, 12, 4)
    dense = factored.AB
    torch.testing.assert_close(S, torch.linalg.svdvals(dense)[..., :4])
    torch.testing.assert_close(U @ torch.diag_embed(S) @ V.transpose(-2, -1), dense)
    eye = torch.eye(4, dtype=U.dtype)
    torch.testing.assert_close(U.transpose(-2, -1) @ U, eye.expand(3, 2, 4, 4))
    torch.testing.assert_close(factored.collapse_r() @ V.transpose(-2, -1), dense)
    torch.testing.assert_close(U @ factored.collapse_l(), dense)
    torch.testing.assert_close(factored.make_even().AB, dense)


def test_norm_matches_dense(factored):
    torch.testing.assert_close(factored.norm(), torch.linalg.matrix_norm(factored.AB))


def test_eigenvalues_match_dense(factored):
    small = factored.eigenvalues  # [3, 2, 4]: the non-zero eigenvalues
    dense = torch.linalg.eigvals(factored.AB)  # [3, 2, 12]: those plus 8 zeros
    for index in [(0, 0), (1, 1), (2, 0)]:
        # A non-symmetric matrix's eigenvalues move by up to sqrt(eps) of its norm (where two
        # nearly coincide), not eps: the bound of that perturbation.
        close = math.sqrt(torch.finfo(torch.float64).eps) * factored.AB[index].norm().item()
        distances = (small[index][:, None] - dense[index][None, :]).abs()
        assert distances.min(dim=1).values.max() < close  # every small eigenvalue is a dense one
        unmatched = dense[index][distances.min(dim=0).values > close]
        assert unmatched.abs().max() < close  # and the dense ones left over are zero


def test_indexing(factored):
    dense = factored.AB
    torch.testing.assert_close(factored[1].AB, dense[1])
    torch.testing.assert_close(factored[2, 1].AB, dense[2, 1])
    torch.testing.assert_close(factored[:, -1].AB, dense[:, -1])
    torch.testing.assert_close(factored[0, 1, 2:5, 3:9].AB, dense[0, 1, 2:5, 3:9])
    torch.testing.assert_close(factored[0, 1, 4].AB, dense[0, 1, 4:5])
    torch.testing.assert_close(factored[0, 1, -1, -1].AB, dense[0, 1, -1:, -1:])
    torch.testing.assert_close(factored.unsqueeze(1).AB, dense.unsqueeze(1))
    torch.testing.assert_close(factored.unsqueeze(-1).AB, dense.unsqueeze(-3))


def test_bad_shapes_are_explained():
    with pytest.raises(ValueError, match="Inner dimensions differ"):
        FactoredMatrix(random(5, 3), random(4, 5))
    with pytest.raises(ValueError, match="do not broadcast"):
        FactoredMatrix(random(2, 5, 3), random(3, 3, 5))
    square = FactoredMatrix(random(5, 3), random(3, 5))
    with pytest.raises(ValueError, match="needs 5 rows"):
        square @ random(4, 2)
    with pytest.raises(ValueError, match="square"):
        _ = FactoredMatrix(random(5, 3), random(3, 4)).eigenvalues
    with pytest.raises(IndexError, match="Too many indices"):
        square[0, 0, 0]


def test_model_qk_and_ov_circuits():
    cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_heads=2, d_vocab=20, n_ctx=8, seed=0)
    model = HookedTransformer(cfg)
    assert model.QK.shape == (2, 2, 16, 16) and model.QK.mdim == 8
    torch.testing.assert_close(model.QK[1, 0].AB, model.W_Q[1, 0] @ model.W_K[1, 0].T)
    torch.testing.assert_close(model.OV[0, 1].AB, model.W_V[0, 1] @ model.W_O[0, 1])


@pytest.mark.parametrize(
    "a_shape, b_shape", [((5, 3), (3, 6)), ((2, 5, 3), (3, 6)), ((4, 2, 5, 3), (4, 2, 3, 6))]
)
@pytest.mark.parametrize("k", [1, 2, 3, 10])
def test_has_leading_dims_and_get_corner_match_transformer_lens(a_shape, b_shape, k):
    generator = torch.Generator().manual_seed(0)
    A, B = torch.randn(a_shape, generator=generator), torch.randn(b_shape, generator=generator)
    ours, theirs = FactoredMatrix(A, B), TransformerLensFactoredMatrix(A, B)
    assert ours.has_leading_dims == theirs.has_leading_dims == (len(a_shape) > 2)
    within = tolerance(torch.float32, reduction=A.shape[-1], magnitude=ours.AB)
    torch.testing.assert_close(ours.get_corner(k), theirs.get_corner(k), **within)
    torch.testing.assert_close(ours.get_corner(k), get_corner(ours.AB, k), **within)
