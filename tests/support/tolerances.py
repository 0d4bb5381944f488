"""How far apart two floating-point computations of the same values may be, from the dtype's
precision and the size of the computation, never from what one machine printed.

Two computations of one quantity (ours and Hugging Face's, a fused path and the explicit one,
one thread and two) round differently: another summation order, another kernel, another
formula for the same function. Each rounding is off by at most half an ulp, ``eps / 2`` of the
value. A sum of ``n`` terms rounded one at a time carries ``n`` such errors of random sign: they
add like a random walk, to about ``sqrt(n) * eps / 2`` of the sum's size (Higham and Mary's
probabilistic bound; blocked and pairwise sums, which BLAS uses, do better). The difference of
two such computations is about ``sqrt(2)`` times one's error, and the largest of the thousands
of elements a test compares lies within about 5 standard deviations: ``SAFETY = 8`` covers both.
A sub-layer (a norm, an attention, an MLP, the unembedding) chains a few such sums, whose
errors add in quadrature, to at most ``sqrt(n) * eps``: the ``eps`` (not ``eps / 2``) of the
bound, with room for a few ulp of error in elementwise functions (exp, tanh, erf, rsqrt) whose
implementations differ. Sub-layers write one after the other into the residual stream, each
with rounding errors of its own: they add as those of a sum do, so the bound grows with
``sqrt(depth)``, the square root of the number of sub-layers chained.
Half-precision sums (bfloat16, float16) accumulate in float32, on the CPU as in CUDA kernels,
and round once to the dtype: their error is float32's ``sqrt(n) * eps`` plus the dtype's
``eps``, not ``sqrt(n)`` of the dtype's.

The bound is relative to ``magnitude``, the typical size of the values compared (and of what
was summed to make them): an element that is a near-zero difference of large terms is off by
as much as the terms' rounding. ``atol`` is that bound, and ``rtol`` the same relative bound
for the elements larger than ``magnitude``.
"""

from __future__ import annotations

import math

import torch

SAFETY = 8.0


def error_bound(
    dtype: torch.dtype,
    *,
    reduction: int = 1,
    depth: int = 1,
    magnitude: float | torch.Tensor = 1.0,
) -> float:
    """The largest difference two computations of values of about ``magnitude`` in ``dtype``
    should show: ``SAFETY * (eps + accumulator eps * sqrt(reduction)) * sqrt(depth) * magnitude``
    (the accumulator: float32 for half dtypes, the dtype itself otherwise), with ``reduction`` the
    length of the longest sum (the inner dimension of a matmul) and ``depth`` the number of
    sub-layers chained. A tensor ``magnitude`` stands for its root mean square."""
    eps = torch.finfo(dtype).eps
    accumulator_eps = min(eps, torch.finfo(torch.float32).eps)
    per_layer = eps + accumulator_eps * math.sqrt(reduction)
    return SAFETY * per_layer * math.sqrt(depth) * _magnitude(magnitude)


def tolerance(
    dtype: torch.dtype,
    *,
    reduction: int = 1,
    depth: int = 1,
    magnitude: float | torch.Tensor = 1.0,
) -> dict[str, float]:
    """``atol`` and ``rtol`` for ``torch.testing.assert_close`` comparing two computations:
    ``error_bound`` at ``magnitude``, and relative to the elements larger than it."""
    relative = error_bound(dtype, reduction=reduction, depth=depth)
    return {"atol": relative * _magnitude(magnitude), "rtol": relative}


def model_error_bound(
    cfg,
    magnitude: float | torch.Tensor = 1.0,
    dtype: torch.dtype | None = None,
    spliced: tuple[int, ...] = (),
) -> float:
    """``error_bound`` of a whole forward pass of a model with config ``cfg`` (a
    ``HookedTransformerConfig``): its longest sum is the widest of d_model, d_mlp and the
    heads' concatenated width; each layer chains an attention and an MLP, and the final norm
    and unembedding one more. ``spliced``: the widths of sub-layers added to the forward (an
    SAE's d_sae), one more each."""
    widths = [cfg.d_model, cfg.n_heads * cfg.d_head, cfg.d_mlp or 0, *spliced]
    depth = 2 * cfg.n_layers + 1 + len(spliced)
    return error_bound(dtype or cfg.dtype, reduction=max(widths), depth=depth, magnitude=magnitude)


def model_tolerance(
    cfg,
    magnitude: float | torch.Tensor = 1.0,
    dtype: torch.dtype | None = None,
    spliced: tuple[int, ...] = (),
) -> dict[str, float]:
    """``tolerance`` for a whole forward pass (``model_error_bound``)."""
    return {
        "atol": model_error_bound(cfg, magnitude, dtype, spliced),
        "rtol": model_error_bound(cfg, 1.0, dtype, spliced),
    }


def within_contract(contract: float, derived: float) -> float:
    """The bound to assert for a figure the project states (the README's "fp32 logits within
    1e-4 of Hugging Face's"): the contract, unless the computation's own rounding bound is
    larger, where the contract cannot hold on every machine and that bound is asserted."""
    return max(contract, derived)


def logits_bound(cfg, expected: torch.Tensor) -> float:
    """The README's contract for fp32 logits against Hugging Face's (or TransformerLens's, or
    the same model loaded another way): within 1e-4, or the forward's own rounding bound at the
    largest of ``expected`` where that is larger."""
    return within_contract(1e-4, model_error_bound(cfg, expected.detach().abs().max().item()))


def mean_bound(centred: torch.Tensor, dim: int) -> float:
    """The largest mean along ``dim`` that a tensor centred there (its mean subtracted) may
    keep: the rounding of two means (the one subtracted, the one measured) of its size."""
    return error_bound(
        centred.dtype, reduction=centred.shape[dim], depth=2, magnitude=centred.detach()
    )


def sum_tolerance(
    terms: torch.Tensor, dim: int = 0, reduction: int | None = None
) -> dict[str, float]:
    """``tolerance`` for the sum of ``terms`` along ``dim`` (a decomposition: heads, neurons,
    layers) against the same total computed another way: ``reduction`` (by default the number
    of terms; more when each term is itself a sum, e.g. a head's ``d_head`` products) sums, of
    values no larger than the sum of the terms' sizes (the classic bound's scale)."""
    return tolerance(
        terms.dtype,
        reduction=reduction or terms.shape[dim],
        magnitude=terms.detach().abs().sum(dim),
    )


def _magnitude(magnitude: float | torch.Tensor) -> float:
    """A float as it is; a tensor's root mean square (its typical element)."""
    if isinstance(magnitude, torch.Tensor):
        return magnitude.detach().double().pow(2).mean().sqrt().item()
    return magnitude
