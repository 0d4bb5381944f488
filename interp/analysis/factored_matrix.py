"""FactoredMatrix: a matrix kept as the product ``A @ B`` of two thin factors.

A head's QK circuit ``W_Q @ W_K^T`` and OV circuit ``W_V @ W_O`` are d_model x d_model but
have rank at most d_head. Keeping the factors makes products, SVD, eigenvalues and norms cost
O(d_model * d_head^2) instead of O(d_model^3), and never allocates the d_model x d_model product
unless ``.AB`` asks for it.
"""

from __future__ import annotations

from functools import cached_property

import torch
from jaxtyping import Complex, Float
from torch import Tensor


class FactoredMatrixShapeError(ValueError, AssertionError, RuntimeError):
    """Shapes that do not fit. A ValueError that is also what TransformerLens raises for the
    same input (an AssertionError for inner dimensions, a RuntimeError for leading ones), so
    code written against TransformerLens catches it as before."""


def _for_linalg(x: Tensor) -> Tensor:
    """torch.linalg has no 16-bit SVD / eig kernels: compute those in float32."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class FactoredMatrix:
    """The matrix ``A @ B`` (with optional leading batch dimensions), held as its factors.

    Shapes: ``A [*leading, ldim, mdim]``, ``B [*leading, mdim, rdim]``; the leading dims of
    the two broadcast. ``shape`` is ``(*leading, ldim, rdim)``.

    Example:
        >>> OV = FactoredMatrix(model.W_V, model.W_O)
        >>> OV.shape                                      # [n_layers, n_heads, d_model, d_model]
        torch.Size([2, 1, 128, 128])
        >>> OV[1, 0].S.shape                              # singular values of L1H0's OV, [d_head]
        torch.Size([64])
        >>> (OV[1, 0] @ model.W_U).AB.shape               # [d_model, d_vocab], built only now
        torch.Size([128, 512])
    """

    def __init__(
        self, A: Float[Tensor, "... ldim mdim"], B: Float[Tensor, "... mdim rdim"]
    ) -> None:
        if A.ndim < 2 or B.ndim < 2:
            raise FactoredMatrixShapeError(
                f"FactoredMatrix factors must be matrices (ndim >= 2); got A {tuple(A.shape)}, "
                f"B {tuple(B.shape)}."
            )
        if A.shape[-1] != B.shape[-2]:
            raise FactoredMatrixShapeError(
                f"Inner dimensions differ: A {tuple(A.shape)} has {A.shape[-1]} columns but "
                f"B {tuple(B.shape)} has {B.shape[-2]} rows."
            )
        try:
            leading = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        except RuntimeError as error:
            raise FactoredMatrixShapeError(
                f"Leading dimensions mismatch: those of A {tuple(A.shape)} and B "
                f"{tuple(B.shape)} do not broadcast."
            ) from error
        self.ldim, self.mdim, self.rdim = A.shape[-2], A.shape[-1], B.shape[-1]
        # Broadcasting gives views, so indexing the leading dims of A and B stays consistent.
        self.A = A.broadcast_to(*leading, self.ldim, self.mdim)
        self.B = B.broadcast_to(*leading, self.mdim, self.rdim)
        self.shape = torch.Size((*leading, self.ldim, self.rdim))

    def __repr__(self) -> str:
        return f"FactoredMatrix(shape={tuple(self.shape)}, hidden_dim={self.mdim})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def pair(self) -> tuple[Tensor, Tensor]:
        """The factors ``(A, B)``."""
        return self.A, self.B

    @property
    def has_leading_dims(self) -> bool:
        """Whether there are batch dims before the matrix (e.g. layers and heads)."""
        return self.ndim > 2

    def get_corner(self, k: int = 3) -> Float[Tensor, "..."]:
        """The top-left ``k`` of every axis of ``A @ B`` (leading dims too), forming only the
        ``k x k`` corner, as TransformerLens.

        Example:
            >>> model.OV.get_corner(2).shape   # layers, heads (this model has 1), rows, columns
            torch.Size([2, 1, 2, 2])
        """
        corner = self.A[..., :k, :] @ self.B[..., :, :k]
        return corner[tuple(slice(k) for _ in range(corner.ndim))]

    # ------------------------------------------------------------------ products
    @property
    def AB(self) -> Float[Tensor, "... ldim rdim"]:
        """The dense product ``A @ B`` (allocates ``ldim x rdim`` per leading index)."""
        return self.A @ self.B

    @property
    def BA(self) -> Float[Tensor, "... mdim mdim"]:
        """The small product ``B @ A``; defined only for square matrices (``ldim == rdim``)."""
        self._require_square("BA")
        return self.B @ self.A

    def __matmul__(self, other: Tensor | FactoredMatrix) -> FactoredMatrix | Tensor:
        """``self @ other``: a FactoredMatrix for a matrix or FactoredMatrix, a tensor for a
        vector ``[rdim]`` (result ``[*leading, ldim]``)."""
        if isinstance(other, FactoredMatrix):
            return (self @ other.A) @ other.B
        if not isinstance(other, Tensor):
            return NotImplemented
        if other.shape[-1 if other.ndim == 1 else -2] != self.rdim:
            raise FactoredMatrixShapeError(
                f"Cannot multiply {self} by a tensor of shape {tuple(other.shape)}: it needs "
                f"{self.rdim} rows."
            )
        if other.ndim == 1:
            return (self.A @ (self.B @ other[:, None]))[..., 0]
        self._check_leading(other)
        # Fold the new matrix into whichever side keeps the hidden dimension smallest.
        if self.mdim < self.rdim:
            return FactoredMatrix(self.A, self.B @ other)
        return FactoredMatrix(self.AB, other)

    def __rmatmul__(self, other: Tensor) -> FactoredMatrix | Tensor:
        """``other @ self``: a FactoredMatrix for a matrix, a tensor for a vector ``[ldim]``."""
        if not isinstance(other, Tensor):
            return NotImplemented
        if other.shape[-1] != self.ldim:
            raise FactoredMatrixShapeError(
                f"Cannot multiply a tensor of shape {tuple(other.shape)} by {self}: it needs "
                f"{self.ldim} columns."
            )
        if other.ndim == 1:
            return ((other[None] @ self.A) @ self.B)[..., 0, :]
        self._check_leading(other)
        if self.mdim < self.ldim:
            return FactoredMatrix(other @ self.A, self.B)
        return FactoredMatrix(other, self.AB)

    def __mul__(self, scalar: float | Tensor) -> FactoredMatrix:
        """Multiply by a scalar (folded into ``A``)."""
        if isinstance(scalar, Tensor) and scalar.numel() != 1:
            raise FactoredMatrixShapeError(
                f"* takes a scalar, got a tensor of shape {tuple(scalar.shape)}; use @ for "
                "matrix products."
            )
        return FactoredMatrix(self.A * scalar, self.B)

    __rmul__ = __mul__

    @property
    def T(self) -> FactoredMatrix:
        """The transpose ``B^T @ A^T`` of the last two dimensions."""
        return FactoredMatrix(self.B.transpose(-2, -1), self.A.transpose(-2, -1))

    # ---------------------------------------------------------------- decompositions
    @cached_property
    def _svd(self) -> tuple[Tensor, Tensor, Tensor]:
        # A = Ua Sa Va^T and B = Ub Sb Vb^T, so AB = Ua (Sa Va^T Ub Sb) Vb^T: only the small
        # middle matrix needs a fresh SVD.
        Ua, Sa, Vha = torch.linalg.svd(_for_linalg(self.A), full_matrices=False)
        Ub, Sb, Vhb = torch.linalg.svd(_for_linalg(self.B), full_matrices=False)
        middle = Sa[..., :, None] * (Vha @ Ub) * Sb[..., None, :]
        Um, Sm, Vhm = torch.linalg.svd(middle, full_matrices=False)
        return Ua @ Um, Sm, Vhb.transpose(-2, -1) @ Vhm.transpose(-2, -1)

    def svd(
        self,
    ) -> tuple[Float[Tensor, "... ldim k"], Float[Tensor, "... k"], Float[Tensor, "... rdim k"]]:
        """``(U, S, V)`` with ``U @ S.diag_embed() @ V.mT == AB``; ``k = min(ldim, mdim, rdim)``
        and S is sorted in decreasing order."""
        return self._svd

    @property
    def U(self) -> Float[Tensor, "... ldim k"]:
        return self._svd[0]

    @property
    def S(self) -> Float[Tensor, "... k"]:
        return self._svd[1]

    @property
    def V(self) -> Float[Tensor, "... rdim k"]:
        return self._svd[2]

    @property
    def Vh(self) -> Float[Tensor, "... rdim k"]:
        """TransformerLens's name for ``V``, which is not transposed despite the name:
        ``AB == U @ S.diag_embed() @ Vh.mT``."""
        return self._svd[2]

    @property
    def eigenvalues(self) -> Complex[Tensor, "... mdim"]:
        """The eigenvalues of ``AB`` apart from its zero ones: those of the small ``BA``
        (if ``BAv = kv`` then ``AB(Av) = k(Av)``)."""
        return torch.linalg.eigvals(_for_linalg(self.BA))

    def norm(self) -> Float[Tensor, "..."]:
        """The Frobenius norm, ``sqrt(sum(S^2))``, one per leading index."""
        return self.S.pow(2).sum(-1).sqrt()

    def collapse_l(self) -> Float[Tensor, "... k rdim"]:
        """``S V^T``: the product with its left orthogonal factor ``U`` dropped."""
        return self.S[..., :, None] * self.V.transpose(-2, -1)

    def collapse_r(self) -> Float[Tensor, "... ldim k"]:
        """``U S``: the product with its right orthogonal factor ``V^T`` dropped."""
        return self.U * self.S[..., None, :]

    def make_even(self) -> FactoredMatrix:
        """The same matrix factored as ``(U sqrt(S)) @ (sqrt(S) V^T)``."""
        root = self.S.sqrt()
        return FactoredMatrix(self.U * root[..., None, :], root[..., :, None] * self.V.mT)

    # ------------------------------------------------------------------ indexing
    def unsqueeze(self, dim: int) -> FactoredMatrix:
        """Insert a leading dimension of size 1 at ``dim`` (counted among the leading dims)."""
        if not -(self.ndim - 1) <= dim <= self.ndim - 2:
            raise IndexError(f"unsqueeze dim={dim} is outside the leading dims of {self}.")
        dim = dim if dim >= 0 else dim - 2
        return FactoredMatrix(self.A.unsqueeze(dim), self.B.unsqueeze(dim))

    def __getitem__(self, index) -> FactoredMatrix:
        """Index the leading dims, then optionally rows and columns, without forming ``AB``.

        An integer row or column index keeps that axis with size 1 (the result is still a
        matrix). Example: ``model.OV[1]`` is layer 1's heads, ``model.OV[1, 4, :10, :10]`` a corner.
        """
        index = index if isinstance(index, tuple) else (index,)
        if any(item is None or item is Ellipsis for item in index):
            raise IndexError("FactoredMatrix indexing does not support None or ...; index dims.")
        n_leading = self.ndim - 2
        if len(index) > self.ndim:
            raise IndexError(f"Too many indices ({len(index)}) for {self}.")
        leading = index[:n_leading]
        row, col = (*index[n_leading:], slice(None), slice(None))[:2]
        row, col = (slice(i, i + 1 or None) if isinstance(i, int) else i for i in (row, col))
        return FactoredMatrix(
            self.A[(*leading, row, slice(None))], self.B[(*leading, slice(None), col)]
        )

    def _check_leading(self, other: Tensor) -> None:
        """The leading dims of a matrix ``other`` must broadcast with ours."""
        try:
            torch.broadcast_shapes(self.shape[:-2], other.shape[:-2])
        except RuntimeError:
            raise FactoredMatrixShapeError(
                f"Leading dimensions mismatch: {self} and a tensor of shape "
                f"{tuple(other.shape)} do not broadcast."
            ) from None

    def _require_square(self, what: str) -> None:
        if self.ldim != self.rdim:
            raise FactoredMatrixShapeError(
                f"{what} needs a square matrix; {self} is {self.ldim} x {self.rdim}."
            )
