"""Turning the final residual streams of patched runs into one metric value per run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from interp.components import affine
from interp.patching.metrics import PatchingMetric, check_scores
from interp.patching.plain_metrics import MetricReads, infer_metric_reads, metric_value

# Logits (elements) computed at once for plain metrics, which are called run by run.
LOGITS_BUDGET = 2**24


class MetricEvaluator:
    """Turns final residual streams of patched runs into one metric value per run.

    Batch-aware metrics (``PatchingMetric``) see all rows of a batch at their positions (and
    only their ``vocab`` columns are unembedded). Other callables are called once per run
    (TransformerLens style) with that run's logits: restricted to ``metric_positions`` when
    given; otherwise full-size, but with only the logits the metric was found to read
    (``infer_metric_reads``, on the corrupted run) computed, the others NaN. Those full-size
    logits are one buffer, rewritten for each run: a metric's value is copied out of it
    before the next run's logits are written (a metric such as ``logits[0, -1, answer]``
    returns a view into it). ``positions`` is what is unembedded (None: every position).
    """

    def __init__(
        self,
        model: Any,
        metric: Callable[[Tensor], Tensor],
        metric_positions: int | Sequence[int] | None,
        corrupted_final: Float[Tensor, "prompt pos d_model"],
    ) -> None:
        self.model = model
        self.metric = metric
        self.batched = isinstance(metric, PatchingMetric)
        self.corrupted_final = corrupted_final
        self.n_prompts, n_pos = corrupted_final.shape[:2]
        self.unembed_weight, self.unembed_bias = model.unembed.W_U, model.unembed.b_U
        self.reads: MetricReads | None = None  # what a plain metric reads, when found
        if self.batched:
            metric.check_vocab(self.unembed_bias.shape[0])
            positions, vocab = metric.positions, metric.vocab
        elif metric_positions is not None:
            positions, vocab = metric_positions, None
        else:
            with torch.no_grad():
                corrupted_logits = self.logits(corrupted_final)
            self.reads = infer_metric_reads(metric, corrupted_logits)
            positions, vocab = (None, None)
            if self.reads is not None:
                positions, vocab = self.reads.positions, self.reads.vocab
                self.full_logits = torch.full_like(corrupted_logits, float("nan"))
        if isinstance(positions, int):
            positions = (positions,)
        if positions is not None:
            bad = [p for p in positions if not -n_pos <= p < n_pos]
            if bad:
                raise ValueError(
                    f"Metric positions {bad} are outside the {n_pos}-token prompt; use "
                    "positions in [-n_pos, n_pos), e.g. -1 for the last token."
                )
            positions = tuple(p % n_pos for p in positions)
        self.positions = positions
        if vocab is not None:
            vocab = vocab.to(self.unembed_bias.device)
            self.unembed_weight = self.unembed_weight[:, vocab]  # [d_model, n_columns]
            self.unembed_bias = self.unembed_bias[vocab]

    @property
    def read_positions(self) -> Sequence[int]:
        return range(self.corrupted_final.shape[1]) if self.positions is None else self.positions

    def read(
        self, final: Float[Tensor, "rows pos d_model"]
    ) -> Float[Tensor, "rows n_read d_model"]:
        """The positions of full final residual streams that the metric reads."""
        return final if self.positions is None else final[:, list(self.positions)]

    def logits(
        self, resid: Float[Tensor, "rows n_read d_model"]
    ) -> Float[Tensor, "rows n_read n_columns"]:
        """The model's logits (soft-capped as its ``unembed`` caps them), ``vocab`` columns."""
        logits = affine(self.model.ln_final(resid), self.unembed_weight, self.unembed_bias)
        cap = self.model.cfg.output_logits_soft_cap
        if cap > 0:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def evaluate(self, resid: Float[Tensor, "rows n_read d_model"]) -> Float[Tensor, " n_runs"]:
        """Metric per run for the final residuals at the positions it reads (``read``), rows
        run-major; returns [n_runs] float32."""
        n_runs = resid.shape[0] // self.n_prompts
        if self.batched:
            values = check_scores(self.metric, self.metric.score(self.logits(resid)), len(resid))
            return values.float().view(n_runs, self.n_prompts).mean(dim=1)
        # Several runs' logits at a time (one read of the unembedding), within a memory budget.
        run_logits_size = self.n_prompts * resid.shape[1] * self.unembed_bias.shape[0]
        runs_per_chunk = max(1, LOGITS_BUDGET // run_logits_size)
        values = []
        for chunk in resid.split(runs_per_chunk * self.n_prompts):
            for run_logits in self.logits(chunk).split(self.n_prompts):
                values.append(self.per_run_value(run_logits))
        return torch.stack(values)

    def per_run_value(self, logits: Float[Tensor, "prompt n_read n_columns"]) -> Float[Tensor, ""]:
        """The metric of one run's logits, a 0-d float32 tensor of its own (never a view of
        the logits, which the next run overwrites)."""
        if self.reads is not None:  # full-size logits, NaN where the metric does not read
            logits = self.reads.keep(logits, self.full_logits)
        value = metric_value(self.metric(logits), self.n_prompts, logits.shape)
        return value.detach().to(logits.device, torch.float32, copy=True)
