"""Plain metrics: any callable that is not a ``PatchingMetric`` is treated as a
TransformerLens metric; this module adapts it to the patching engine.

Any other callable is treated as a TransformerLens metric: it is called once per patched
run, with that run's logits [n_prompts, pos, d_vocab] (or only ``metric_positions`` of them),
and returns a number: a 0-d tensor, a Python float, a 1-element tensor, or one value per prompt
[n_prompts] (averaged); see ``metric_value``. Which of those logits it reads is found once on
the corrupted run (``infer_metric_reads``); only those are computed for the patched runs, the
others are NaN. The logits are a buffer reused from run to run: the value returned is copied
out at once (it may be a view such as ``logits[0, -1, answer]``), but a metric must not keep
the logits themselves.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

METRIC_RETURNS = (
    "a number: a 0-d tensor, a Python float, a 1-element tensor, or one value per prompt "
    "[n_prompts] (averaged)"
)


def metric_value(
    value: object, n_prompts: int, logits_shape: Sequence[int] | None = None
) -> Float[Tensor, ""]:
    """A plain metric's result for one run as a 0-d float tensor, gradients kept.

    Accepts a 0-d or 1-element tensor, a Python or NumPy number or array of one element, or
    one value per prompt [n_prompts] (averaged, as the batched engine averages a run's rows).
    Anything else (None, a string, a bool, a tensor of another shape) is a ``ValueError``
    naming what the metric returned. The result may be a view of the metric's input: copy it
    before that input is overwritten.

    Example:
        >>> logits = model(torch.cat([tokens, tokens]))   # two prompts: [2, pos, d_vocab]
        >>> metric_value(logits[0, -1, 42], n_prompts=2).shape   # 0-d
        torch.Size([])
        >>> metric_value(torch.tensor([1.0, 3.0]), n_prompts=2)   # [2] -> its mean
        tensor(2.)
        >>> metric_value(0.5, n_prompts=2)   # a Python number
        tensor(0.5000)
        >>> metric_value(None, n_prompts=2)
        Traceback (most recent call last):
        ValueError: The patching metric returned NoneType None for its logits (did it forget ...
    """
    given = f"logits of shape {tuple(logits_shape)}" if logits_shape is not None else "its logits"
    if isinstance(value, Tensor):
        tensor = value
    elif isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        tensor = torch.from_numpy(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_):
        tensor = torch.tensor(float(value))
    else:
        hint = " (did it forget to return?)" if value is None else ""
        raise ValueError(
            f"The patching metric returned {type(value).__name__} {_short_repr(value)} for "
            f"{given}{hint}; it must return {METRIC_RETURNS}."
        )
    if tensor.dtype == torch.bool or tensor.dtype.is_complex:
        raise ValueError(
            f"The patching metric returned a {tensor.dtype} tensor for {given}; it must return "
            f"{METRIC_RETURNS}."
        )
    if tensor.numel() == 1:
        return tensor.reshape(()).float()
    if tensor.shape == (n_prompts,):
        return tensor.float().mean()
    raise ValueError(
        f"The patching metric returned a tensor of shape {tuple(tensor.shape)} for {given}; it "
        f"must return {METRIC_RETURNS}, e.g. reduce it with .mean()."
    )


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class MetricReads:
    """The logits a plain metric reads: these ``positions``, and of them only the token
    columns ``vocab`` (None: every column)."""

    positions: tuple[int, ...]
    vocab: Int[Tensor, " n_columns"] | None

    def keep(
        self,
        read: Float[Tensor, "n_prompts n_positions n_columns"],
        full: Float[Tensor, "n_prompts pos d_vocab"],
    ) -> Float[Tensor, "n_prompts pos d_vocab"]:
        """Write the logits that are read, [n_prompts, len(positions), n_columns], into
        ``full`` at their positions and columns; the rest of ``full`` is left as it is."""
        positions = torch.tensor(self.positions, device=full.device)
        if self.vocab is None:
            full[:, positions] = read
        else:
            full[:, positions[:, None], self.vocab.to(full.device)] = read
        return full

    def select(
        self, logits: Float[Tensor, "n_prompts pos d_vocab"]
    ) -> Float[Tensor, "n_prompts n_positions n_columns"]:
        """The logits that are read."""
        selected = logits[:, list(self.positions)]
        return selected if self.vocab is None else selected[..., self.vocab.to(logits.device)]


def infer_metric_reads(
    metric: Callable[[Tensor], Tensor], logits: Float[Tensor, "n_prompts pos d_vocab"]
) -> MetricReads | None:
    """Which logits a plain (TransformerLens-style) metric reads, found on ``logits``.

    The candidates are the entries the metric's gradient touches, then the last position
    (every column). A candidate is taken only if the metric gives the identical value when
    every other logit is NaN; None when no candidate passes (the metric then gets every
    logit). A metric whose choice of logits depends on their values could pass this check
    and later read others: declare a ``PatchingMetric`` or pass ``metric_positions`` then.

    Example:
        >>> logits = model(tokens)   # [1, 21, 512]
        >>> infer_metric_reads(lambda logits: logits[:, -1, 42].mean(), logits)
        MetricReads(positions=(20,), vocab=tensor([42]))
    """
    try:
        expected = metric(logits)
    except Exception as error:  # e.g. an answer id outside the vocabulary
        error.add_note(
            "(raised by the patching metric on the corrupted run's logits, shape "
            f"{tuple(logits.shape)} = [prompt, pos, d_vocab])"
        )
        raise
    metric_value(expected, logits.shape[0], logits.shape)  # raises for what no metric returns
    expected = torch.as_tensor(expected)
    n_pos, d_vocab = logits.shape[1:]
    candidates = [MetricReads((n_pos - 1,), None)]
    touched = _touched_by_gradient(metric, logits)
    if touched is not None and touched.any():
        positions = touched.any(dim=2).any(dim=0).nonzero()[:, 0]
        columns = touched.any(dim=1).any(dim=0).nonzero()[:, 0]
        vocab = None if len(columns) == d_vocab else columns
        candidates.insert(0, MetricReads(tuple(positions.tolist()), vocab))
    for reads in candidates:
        if len(reads.positions) == n_pos and reads.vocab is None:
            return None  # it reads every logit
        poisoned = reads.keep(reads.select(logits), torch.full_like(logits, float("nan")))
        try:
            value = torch.as_tensor(metric(poisoned))
        except Exception:  # e.g. it checks its input is finite: it gets every logit
            continue
        if torch.equal(value, expected):
            return reads
    return None


def _touched_by_gradient(
    metric: Callable[[Tensor], Tensor], logits: Float[Tensor, "n_prompts pos d_vocab"]
) -> Bool[Tensor, "n_prompts pos d_vocab"] | None:
    """Where the metric's gradient is non-zero; None when it has no gradient (it is not
    differentiable, or it fails on a tensor that requires grad, e.g. calls ``.numpy()``)."""
    with torch.enable_grad():
        probe = logits.detach().clone().requires_grad_()
        try:
            value = metric(probe)
        except Exception:  # only a hint is lost; the metric runs without grad later
            return None
        if not (isinstance(value, Tensor) and value.requires_grad):
            return None
        (grad,) = torch.autograd.grad(value.float().sum(), probe)
    return grad != 0
