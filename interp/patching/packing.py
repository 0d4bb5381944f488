"""Patched runs packed end to end along the position axis, in batches.

A run that first changes position ``s`` computes positions ``s:`` only. Runs of different
lengths are not padded to a common length: they are laid end to end, so a batch is
[prompt, packed_pos, d_model] and an attention mask keeps each run to its own positions and
to the corrupted run's prefix before its ``s``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.patching.evaluation import MetricEvaluator

# Attention over a packed batch scores every packed position against every other (the mask
# discards other runs' pairs), so its cost per position grows with the packed length. At this
# length it is a few percent of the block's matmuls.
MAX_PACKED_LENGTH = 256


@dataclass
class PatchRun:
    """One patched run: patch ``hook_name`` (in block ``layer``) at ``index``."""

    number: int  # position in the caller's list of indices
    index: tuple[int, ...]
    hook_name: str
    layer: int
    first_changed: int = 0


class PackedBatch:
    """Patched runs packed end to end along the position axis.

    Run ``i`` holds positions ``first_changed:`` of its prompts at packed positions
    ``offsets[i]:offsets[i] + n_pos - first_changed``; every row (prompt) has the same layout.
    Runs are ordered by the layer they enter at, the order in which they join the batch.
    """

    def __init__(self, runs: list[PatchRun], n_pos: int) -> None:
        self.runs = sorted(runs, key=lambda run: (run.layer, run.first_changed))
        self.n_pos = n_pos
        self.lengths = [n_pos - run.first_changed for run in self.runs]
        self.offsets = list(itertools.accumulate(self.lengths, initial=0))[:-1]
        # The corrupted run's keys and values that some run attends to: those before its
        # first changed position.
        self.n_prefix = max(run.first_changed for run in self.runs)

    def packed_position(self, run: int, position: int) -> int:
        return self.offsets[run] + position - self.runs[run].first_changed

    def positions(self, n_joined: int, device: torch.device) -> Int[Tensor, "1 packed"]:
        """The position in the prompt of each packed position of the first ``n_joined`` runs
        (run ``i`` holds positions ``first_changed:``), for rotary embeddings and windows."""
        return torch.cat(
            [
                torch.arange(run.first_changed, self.n_pos, device=device)
                for run in self.runs[:n_joined]
            ]
        )[None]

    def allowed_keys(
        self, n_joined: int, device: torch.device, window_size: int | None = None
    ) -> Bool[Tensor, "1 1 packed n_prefix_plus_packed"]:
        """The attention mask of the first ``n_joined`` runs: a packed position sees the
        corrupted prefix before its run's first changed position, then its own run's
        positions up to itself. Keys are the ``n_prefix`` prefix positions, then the packed.
        With ``window_size`` (a "local" layer), a query at prompt position ``i`` also sees only
        keys at prompt positions ``j`` with ``i - j < window_size``, as the model does."""
        lengths = torch.tensor(self.lengths[:n_joined], device=device)
        firsts = torch.tensor([run.first_changed for run in self.runs[:n_joined]], device=device)
        run_of = torch.repeat_interleave(torch.arange(n_joined, device=device), lengths)
        first_of = torch.repeat_interleave(firsts, lengths)  # [packed]
        packed = torch.arange(len(run_of), device=device)
        prefix = torch.arange(self.n_prefix, device=device)[None, :] < first_of[:, None]
        own_run = (run_of[:, None] == run_of[None, :]) & (packed[None, :] <= packed[:, None])
        allowed = torch.cat([prefix, own_run], dim=1)
        if window_size is not None:
            query_position = self.positions(n_joined, device)[0]  # [packed]
            key_position = torch.cat([torch.arange(self.n_prefix, device=device), query_position])
            allowed &= query_position[:, None] - key_position[None, :] < window_size
        return allowed[None, None]

    def metric_outputs(self, read_positions: Sequence[int]) -> list[int]:
        """The packed positions whose final residual the metric reads (ascending)."""
        return sorted(
            {
                self.packed_position(i, position)
                for i, run in enumerate(self.runs)
                for position in read_positions
                if position >= run.first_changed
            }
        )

    def metric_residuals(
        self,
        final: Float[Tensor, "prompt n_out d_model"],
        outputs: list[int] | None,
        evaluator: MetricEvaluator,
    ) -> Float[Tensor, "rows n_read d_model"]:
        """Each run's final residual at the positions the metric reads, run-major rows:
        from ``final`` (the packed positions ``outputs``, or all of them when None) where the
        run changed it, from the corrupted run before its first changed position."""
        source = torch.cat([evaluator.corrupted_final, final], dim=1)
        if outputs is None:
            outputs = list(range(final.shape[1]))
        column_of = {packed: self.n_pos + k for k, packed in enumerate(outputs)}  # in source
        columns = [
            position
            if position < run.first_changed
            else column_of[self.packed_position(i, position)]
            for i, run in enumerate(self.runs)
            for position in evaluator.read_positions
        ]
        gathered = source[:, torch.tensor(columns, device=source.device)]  # [prompt, runs*read, d]
        n_prompts, n_runs, d_model = source.shape[0], len(self.runs), source.shape[-1]
        gathered = gathered.view(n_prompts, n_runs, -1, d_model).transpose(0, 1)
        return gathered.reshape(n_runs * n_prompts, -1, d_model)


def pack_runs(
    runs: list[PatchRun], n_pos: int, n_prompts: int, max_batch_size: int
) -> list[PackedBatch]:
    """Batches of runs in layer order (so a batch spans few layers), each at most
    ``max_batch_size`` sequences (runs x prompts) and ``MAX_PACKED_LENGTH`` packed positions."""
    batches: list[PackedBatch] = []
    current: list[PatchRun] = []
    current_length = 0
    for run in sorted(runs, key=lambda run: (run.layer, run.first_changed)):
        length = n_pos - run.first_changed
        too_many = (len(current) + 1) * n_prompts > max_batch_size
        if current and (too_many or current_length + length > MAX_PACKED_LENGTH):
            batches.append(PackedBatch(current, n_pos))
            current, current_length = [], 0
        current.append(run)
        current_length += length
    if current:
        batches.append(PackedBatch(current, n_pos))
    return batches


def write_packed_attention_rows(
    activation: Float[Tensor, "prompt head packed prefix_plus_packed"],
    patched: Float[Tensor, "prompt head pos pos"],
    offset: int,
    first: int,
    n_prefix: int,
) -> None:
    """Write a run's patched attention rows (queries ``first:``) into the packed layout: keys
    before ``first`` are the corrupted prefix's columns, keys from ``first`` on are the run's
    own packed columns. Other columns are masked for this run and keep their masked value."""
    length = patched.shape[2] - first
    rows = activation[:, :, offset : offset + length]  # a view
    rows[..., :first] = patched[:, :, first:, :first]
    own = n_prefix + offset
    rows[..., own : own + length] = patched[:, :, first:, first:]
