"""Patching metrics: functions of the logits that say how far a patched run is from clean.

The contract, for a ``PatchingMetric``:

* It reads the logits at a few fixed ``positions`` only (default: the last), so the patching
  engine unembeds just those positions. A metric that reads only a few tokens' logits (a
  logit difference) also names them in ``vocab``, so the engine unembeds just those columns.
* ``metric(logits)`` takes full logits [batch, pos, d_vocab] and returns one value per
  sequence, [batch]. ``metric.score(position_logits)`` takes logits already restricted to
  ``metric.positions`` (and to the ``vocab`` columns, in that order, when it is set),
  [batch, n_positions, d_vocab or n_columns]; the engine calls this one.
* A batch may hold many patched runs of the same prompts: rows are run-major (row
  ``run * n_prompts + prompt``), so per-prompt data such as answer tokens [n_prompts, ...] is
  tiled to the batch. The value of a patched run is the mean over its prompts' rows.

Any other callable is a TransformerLens metric, adapted by ``plain_metrics``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor


def _positions(positions: int | Sequence[int]) -> tuple[int, ...]:
    return (positions,) if isinstance(positions, int) else tuple(int(p) for p in positions)


def check_scores(metric: PatchingMetric, values: object, n_rows: int) -> Float[Tensor, " rows"]:
    """``values``, what ``metric.score`` returned for ``n_rows`` rows, if it is one value per
    row (a [rows] tensor); else a ``ValueError`` naming what it returned."""
    if not isinstance(values, Tensor) or values.shape != (n_rows,):
        got = f"shape {tuple(values.shape)}" if isinstance(values, Tensor) else values
        raise ValueError(
            f"{type(metric).__name__}.score returned {got} for {n_rows} rows; a PatchingMetric "
            "returns one value per row, a [rows] tensor."
        )
    return values


def check_metric_token_ids(token_ids: Tensor, what: str, d_vocab: int | None = None) -> None:
    """Raise if ``token_ids`` are not integers, are negative (which would silently index from
    the end of the vocabulary) or, when ``d_vocab`` is given, are not below it.

    Example:
        >>> check_metric_token_ids(torch.tensor([3, 49]), "answer_tokens", d_vocab=50)   # fine
        >>> check_metric_token_ids(torch.tensor([3, 99]), "answer_tokens", d_vocab=50)
        Traceback (most recent call last):
        ValueError: answer_tokens has token ids [99] outside the model's vocabulary [0, 50); ...
    """
    if token_ids.is_floating_point() or token_ids.is_complex() or token_ids.dtype == torch.bool:
        raise ValueError(f"{what} must be integer token ids, got dtype {token_ids.dtype}.")
    outside = token_ids < 0
    if d_vocab is not None:
        outside |= token_ids >= d_vocab
    if outside.any():
        allowed = f"[0, {d_vocab})" if d_vocab is not None else "(ids are non-negative)"
        raise ValueError(
            f"{what} has token ids {sorted(set(token_ids[outside].tolist()))[:5]} outside the "
            f"model's vocabulary {allowed}; pass ids from the model's tokenizer, e.g. "
            "model.to_single_token(' Mary')."
        )


def tile_to_rows(per_prompt: Tensor, n_rows: int) -> Tensor:
    """Repeat per-prompt data [n_prompts, ...] for ``n_rows`` run-major rows.

    Example:
        >>> tile_to_rows(torch.tensor([[1, 2], [3, 4]]), 4)[:, 0]
        tensor([1, 3, 1, 3])
    """
    n_prompts = per_prompt.shape[0]
    if n_rows % n_prompts != 0:
        raise ValueError(
            f"The logits have {n_rows} rows, which is not a whole number of runs of the "
            f"metric's {n_prompts} prompts; pass one answer row per corrupted prompt."
        )
    return per_prompt.repeat(n_rows // n_prompts, *([1] * (per_prompt.ndim - 1)))


class PatchingMetric:
    """Base class of batch-aware metrics that read the logits at fixed ``positions`` (and, if
    ``vocab`` is given, of those token ids only).

    Subclasses implement ``score(position_logits [rows, n_positions, d_vocab]) -> [rows]``;
    with ``vocab``, ``position_logits`` holds just its columns, [rows, n_positions, n_columns].

    Example:
        >>> class TopLogit(PatchingMetric):
        ...     def score(self, position_logits):
        ...         return position_logits[:, -1].max(dim=-1).values
        >>> TopLogit(positions=-1)(model(tokens)).shape   # [batch]
        torch.Size([1])
    """

    def __init__(
        self,
        positions: int | Sequence[int] = -1,
        vocab: Int[Tensor, " n_columns"] | Sequence[int] | None = None,
    ) -> None:
        self.positions = _positions(positions)
        self.vocab = None if vocab is None else torch.as_tensor(vocab).flatten()
        if self.vocab is not None:
            check_metric_token_ids(self.vocab, f"{type(self).__name__}'s vocab")

    def check_vocab(self, d_vocab: int) -> None:
        """Raise if the token ids this metric reads are outside a vocabulary of ``d_vocab``."""
        if self.vocab is not None:
            check_metric_token_ids(self.vocab, f"{type(self).__name__}'s vocab", d_vocab)

    def score(self, position_logits: Float[Tensor, "rows n_positions d_vocab"]) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement score().")

    def __call__(self, logits: Float[Tensor, "batch pos d_vocab"]) -> Float[Tensor, " batch"]:
        if logits.ndim != 3:
            raise ValueError(
                f"A metric takes logits [batch, pos, d_vocab], got shape {tuple(logits.shape)}."
            )
        self.check_vocab(logits.shape[-1])
        position_logits = logits[:, list(self.positions)]
        if self.vocab is not None:
            position_logits = position_logits[..., self.vocab.to(logits.device)]
        return self.score(position_logits)


class FunctionMetric(PatchingMetric):
    """A plain function of position logits [rows, n_positions, d_vocab] -> [rows], declared
    batch-aware; with ``vocab``, the function gets just those token columns.

    Example:
        >>> metric = FunctionMetric(lambda logits: logits[:, -1, 42], positions=-1)
        >>> same = FunctionMetric(lambda logits: logits[:, -1, 0], vocab=[42])   # column 0: 42
        >>> logits = model(tokens)
        >>> torch.equal(metric(logits), same(logits)), metric(logits).shape   # [batch]
        (True, torch.Size([1]))
    """

    def __init__(
        self,
        function: Callable[[Tensor], Tensor],
        positions: int | Sequence[int] = -1,
        vocab: Int[Tensor, " n_columns"] | Sequence[int] | None = None,
    ) -> None:
        super().__init__(positions, vocab)
        self.function = function

    def score(self, position_logits: Tensor) -> Tensor:
        return self.function(position_logits)


class LogitDiff(PatchingMetric):
    """Logit of the right answer minus the wrong one at ``position``, per row.

    ``answer_tokens`` is [n_prompts, 2] (right, wrong), [n_prompts, n_pairs, 2] (mean over
    pairs), or [2] for every prompt.

    Example:
        >>> # After the repeat's "9" (position -2) the answer is 211, which followed it before:
        >>> metric = LogitDiff(torch.tensor([[211, 7]]), position=-2)   # [n_prompts, 2]
        >>> values = metric(model(tokens))   # [batch]
        >>> values.shape, round(values[0].item())
        (torch.Size([1]), 14)
    """

    def __init__(self, answer_tokens: Int[Tensor, "... 2"], position: int = -1) -> None:
        answer_tokens = torch.as_tensor(answer_tokens)
        if answer_tokens.shape[-1] != 2 or not 1 <= answer_tokens.ndim <= 3:
            raise ValueError(
                "answer_tokens must be [2], [n_prompts, 2] or [n_prompts, n_pairs, 2] (right, "
                f"wrong) token ids, got shape {tuple(answer_tokens.shape)}."
            )
        check_metric_token_ids(answer_tokens, "LogitDiff's answer_tokens")
        answer_tokens = answer_tokens.reshape(-1, 1, 2) if answer_tokens.ndim < 3 else answer_tokens
        # Only the answers' logits are read: their ids are the vocab, and each answer's column
        # in it is answer_columns.
        vocab, answer_columns = torch.unique(answer_tokens, return_inverse=True)
        super().__init__(position, vocab)
        self.answer_tokens = answer_tokens  # [n_prompts, n_pairs, 2]
        self.answer_columns = answer_columns  # [n_prompts, n_pairs, 2]

    def check_vocab(self, d_vocab: int) -> None:
        check_metric_token_ids(self.answer_tokens, "LogitDiff's answer_tokens", d_vocab)

    def score(self, position_logits: Tensor) -> Float[Tensor, " rows"]:
        last = position_logits[:, -1]  # [rows, n_columns]
        answers = tile_to_rows(self.answer_columns.to(last.device), last.shape[0])
        picked = last.gather(-1, answers.flatten(1)).view(answers.shape)  # [rows, n_pairs, 2]
        return (picked[..., 0] - picked[..., 1]).mean(dim=-1)


class AnswerProbability(PatchingMetric):
    """Softmax probability of the answer token at ``position``, per row.

    ``answer_tokens`` is [n_prompts] or a single id for every prompt.

    Example:
        >>> probability = AnswerProbability(torch.tensor([211]), position=-2)(model(tokens))
        >>> round(probability[0].item(), 3)   # the induction head's prediction: [batch]
        0.995
    """

    def __init__(self, answer_tokens: Int[Tensor, " n_prompts"] | int, position: int = -1):
        super().__init__(position)
        self.answer_tokens = torch.as_tensor(answer_tokens).reshape(-1, 1)  # [n_prompts, 1]
        check_metric_token_ids(self.answer_tokens, "AnswerProbability's answer_tokens")

    def check_vocab(self, d_vocab: int) -> None:
        check_metric_token_ids(self.answer_tokens, "AnswerProbability's answer_tokens", d_vocab)

    def score(self, position_logits: Tensor) -> Float[Tensor, " rows"]:
        probs = position_logits[:, -1].float().softmax(dim=-1)
        answers = tile_to_rows(self.answer_tokens.to(probs.device), probs.shape[0])
        return probs.gather(-1, answers)[:, 0]


class KLDivergence(PatchingMetric):
    """KL(clean || patched) of the next-token distributions at ``positions``, summed over
    those positions, per row: 0 when the patch restores the clean prediction.

    Example:
        >>> corrupted_tokens = tokens.clone()
        >>> corrupted_tokens[0, 10] = 7   # the first copy's last token, 211, becomes 7
        >>> metric = KLDivergence(model(tokens), positions=-2)
        >>> metric(model(tokens)).tolist()   # [batch]: the clean run itself
        [0.0]
        >>> bool(metric(model(corrupted_tokens))[0] > 10)   # predicts 7 instead of 211
        True
    """

    def __init__(
        self,
        clean_logits: Float[Tensor, "n_prompts pos d_vocab"],
        positions: int | Sequence[int] = -1,
    ) -> None:
        super().__init__(positions)
        self.clean_log_probs = (
            clean_logits[:, list(self.positions)].detach().float().log_softmax(-1)
        )

    def check_vocab(self, d_vocab: int) -> None:
        if self.clean_log_probs.shape[-1] != d_vocab:
            raise ValueError(
                f"KLDivergence's clean_logits have {self.clean_log_probs.shape[-1]} columns but "
                f"the model's vocabulary has {d_vocab}; pass the clean logits of this model."
            )

    def score(self, position_logits: Tensor) -> Float[Tensor, " rows"]:
        log_probs = position_logits.float().log_softmax(dim=-1)
        clean = tile_to_rows(self.clean_log_probs.to(log_probs.device), log_probs.shape[0])
        return (clean.exp() * (clean - log_probs)).sum(dim=(-1, -2))


# A normalised metric warns when |clean - corrupted| is below this fraction of the scores'
# magnitude (at least 1): float32 rounding then moves its values by more than ~0.1%.
ILL_CONDITIONED_GAP = 1e-4


class NormalizedMetric(PatchingMetric):
    """``(metric - corrupted) / (clean - corrupted)``: 0 = the corrupted run, 1 = the clean run.

    ``clean_value`` and ``corrupted_value`` are the base metric's means over the prompts of the
    clean and corrupted runs (``from_logits`` computes them), as in ARENA's IOI notebook; the
    normalisation is affine, so a run's mean over prompts is the normalised mean.

    Example:
        >>> corrupted_tokens = tokens.clone()
        >>> corrupted_tokens[0, 10] = 7   # the first copy's last token, 211, becomes 7
        >>> clean_logits, corrupt_logits = model(tokens), model(corrupted_tokens)
        >>> base = LogitDiff(torch.tensor([[211, 7]]), position=-2)
        >>> metric = NormalizedMetric.from_logits(base, clean_logits, corrupt_logits)
        >>> metric(clean_logits).item(), metric(corrupt_logits).item()
        (1.0, 0.0)
    """

    def __init__(self, base: PatchingMetric, clean_value: float, corrupted_value: float) -> None:
        super().__init__(base.positions, base.vocab)
        clean_value, corrupted_value = float(clean_value), float(corrupted_value)
        if not (math.isfinite(clean_value) and math.isfinite(corrupted_value)):
            raise ValueError(
                f"The clean ({clean_value}) and corrupted ({corrupted_value}) scores must be "
                "finite to normalise by them; check the logits and the answer tokens."
            )
        if clean_value == corrupted_value:
            raise ValueError(
                f"The clean and corrupted runs score the same ({clean_value}), so there is "
                "nothing to normalise by; pick prompts whose answers differ."
            )
        gap = abs(clean_value - corrupted_value)
        scale = max(1.0, abs(clean_value), abs(corrupted_value))
        if gap < ILL_CONDITIONED_GAP * scale:
            warnings.warn(
                f"The clean ({clean_value:.9g}) and corrupted ({corrupted_value:.9g}) scores "
                f"differ by only {gap:.3g}, and the normalised metric divides by that gap: its "
                f"values are ill-conditioned (float32 rounding, ~1e-7 x {scale:.3g}, becomes "
                f"~{1.2e-7 * scale / gap:.2g} of the 0-to-1 range). Pick prompts or answers on "
                "which the clean and corrupted runs differ more, or use the unnormalised metric.",
                UserWarning,
                stacklevel=2,
            )
        self.base = base
        self.clean_value = clean_value
        self.corrupted_value = corrupted_value

    def check_vocab(self, d_vocab: int) -> None:
        self.base.check_vocab(d_vocab)

    @classmethod
    def from_logits(
        cls,
        base: PatchingMetric,
        clean_logits: Float[Tensor, "n_prompts pos d_vocab"],
        corrupted_logits: Float[Tensor, "n_prompts pos d_vocab"],
    ) -> NormalizedMetric:
        """Normalise ``base`` by its mean values on the clean and corrupted logits."""
        clean_value, corrupted_value = base(clean_logits.detach()), base(corrupted_logits.detach())
        return cls(base, float(clean_value.mean()), float(corrupted_value.mean()))

    def score(self, position_logits: Tensor) -> Float[Tensor, " rows"]:
        value = self.base.score(position_logits)
        return (value - self.corrupted_value) / (self.clean_value - self.corrupted_value)


def normalized_logit_diff(
    answer_tokens: Int[Tensor, "... 2"],
    clean_logits: Float[Tensor, "n_prompts pos d_vocab"],
    corrupted_logits: Float[Tensor, "n_prompts pos d_vocab"],
    position: int = -1,
) -> NormalizedMetric:
    """The normalised patching metric for a logit difference (0 = corrupted, 1 = clean).

    Example:
        >>> corrupted_tokens = tokens.clone()
        >>> corrupted_tokens[0, 10] = 7   # the first copy's last token, 211, becomes 7
        >>> clean_logits, clean_cache = model.run_with_cache(tokens)
        >>> metric = normalized_logit_diff(
        ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
        >>> result = interp.patching.get_act_patch_resid_pre(
        ...     model, corrupted_tokens, clean_cache, metric)
        >>> round(result[0, 10].item(), 2)   # the clean token 211 at position 10 restores it
        1.0
    """
    return NormalizedMetric.from_logits(
        LogitDiff(answer_tokens, position), clean_logits, corrupted_logits
    )
