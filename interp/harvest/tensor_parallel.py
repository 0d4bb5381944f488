"""Harvesting a tensor-parallel model in sharded mode: no gather traffic, each rank writes
what it holds, and the reader puts the parts back together.

With ``harvest(model, ...)`` given a tensor-parallel model (``from_pretrained(...,
tp_size=N)``, on every rank of ``torchrun``), the forwards run inside
``interp.distributed.sharded_hooks``: a per-head or per-neuron hook (``attn.hook_z``,
``mlp.hook_post``, ...) gives each rank its heads' or neurons' columns of the stored vectors.
Data shard ``i`` is then a set of files:

- ``shard-{i}.safetensors`` (tensor-parallel rank 0): the token ids, every residual-width
  hook (whole on every rank, stored once) and rank 0's columns of every split hook;
- ``tp{r}/shard-{i}.safetensors`` (rank ``r`` > 0): rank ``r``'s columns of every split hook
  (where key/value heads are shared by several ranks, the first of them alone stores them).

The manifest's ``tensor_parallel`` entry names each split hook's column ranges and the
ranks that hold them, and every shard record lists its parts' files, sizes and sha256;
``ActivationStore`` reads a split hook's columns from each part, side by side, so it returns
what a one-process harvest returns. The statistics are the whole vectors' too: each column's
mean and variance come from the rank that holds it, and each vector's norm from its squared
parts summed over the ranks (one all-reduce of ``[tokens]`` a batch and split hook).

With data parallel x tensor parallel (``world = dp x tp``), each copy of the model harvests
shards ``i % dp_size == dp_rank``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from interp.distributed import sharded_hooks
from interp.distributed.hooks import GatheredHookPoint
from interp.harvest.distributed import Ranks
from interp.harvest.shards import complete_shard, read_shard_stats, shard_info
from interp.harvest.stats import RunningStats
from interp.harvest.writer import ShardWriter


@dataclass(frozen=True)
class TPRanks(Ranks):
    """``Ranks`` of a tensor-parallel harvest: the whole world waits and broadcasts together
    (``rank`` 0 writes the manifest), but shards are dealt to the model's copies
    (``dp_rank`` of ``dp_size``), every rank of a copy running them together."""

    tp_rank: int = 0
    tp_size: int = 1
    dp_rank: int = 0
    dp_size: int = 1
    tp: Any = None

    def owns(self, shard_index: int) -> bool:
        return shard_index % self.dp_size == self.dp_rank


def tp_ranks(model: Any) -> TPRanks:
    """The harvest's ranks for a tensor-parallel ``model`` (its process group is running)."""
    tp = model.tp
    return TPRanks(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        tp_rank=tp.rank,
        tp_size=tp.size,
        dp_rank=tp.dp_rank,
        dp_size=tp.dp_size,
        tp=tp,
    )


@dataclass(frozen=True)
class SplitHook:
    """A harvested hook split over the ranks: rank ``r`` holds stored columns
    ``columns[r]`` ([first, end) of the hook's flattened vector); ``owners`` are the ranks
    whose columns make the whole, in order."""

    columns: tuple[tuple[int, int], ...]
    owners: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"columns": [list(c) for c in self.columns], "owners": list(self.owners)}


def split_hooks(model: Any, shapes: dict[str, list[int]]) -> dict[str, SplitHook]:
    """Each harvested hook (``shapes``: hook -> per-token shape) that the model splits."""
    points = model.hook_dict
    split = {}
    for hook, shape in shapes.items():
        point = points[hook]
        if not isinstance(point, GatheredHookPoint):
            continue
        layout = point.layout
        axis = layout.dim % (len(shape) + 2) - 2  # the axis in one token's shape
        inner = math.prod(shape[axis + 1 :])
        columns = tuple((start * inner, (start + layout.count) * inner) for start in layout.starts)
        split[hook] = SplitHook(columns, tuple(layout.owners()))
    return split


def part_folder(out: Path, tp_rank: int) -> Path:
    """Where rank ``tp_rank`` writes its part of each shard."""
    return out if tp_rank == 0 else out / f"tp{tp_rank}"


def stored_here(hooks: list[str], split: dict[str, SplitHook], tp_rank: int) -> list[str]:
    """The hooks this rank stores: its columns of a split hook it owns; residual-width hooks
    on rank 0 alone."""
    return [
        hook for hook in hooks if (tp_rank in split[hook].owners if hook in split else tp_rank == 0)
    ]


def write_shards(ranks: TPRanks, out: Path, plan: Any, batch_size: int, shards: Any) -> int:
    """This rank's part of its copy's shards (``shards``: the (index, rows) of every
    shard); returns the number of shards of the whole harvest. A shard is redone unless
    every rank of the copy has its part complete (decided together)."""
    split = split_hooks(plan.model, plan.shapes)
    mine = stored_here(plan.hook_names, split, ranks.tp_rank)
    widths = {
        hook: (
            split[hook].columns[ranks.tp_rank][1] - split[hook].columns[ranks.tp_rank][0]
            if hook in split
            else plan.widths[hook]
        )
        for hook in mine
    }
    folder = part_folder(out, ranks.tp_rank)
    folder.mkdir(parents=True, exist_ok=True)
    writer = ShardWriter(folder, widths, plan.rows_per_shard * plan.kept, plan.dtype)
    n_shards = 0
    try:
        for index, rows in shards:
            n_shards = index + 1
            if not ranks.owns(index) or _all_complete(ranks, folder, index):
                continue
            buffers = writer.buffers()
            stats = _run_shard(plan, rows, mine, split, batch_size, buffers, ranks)
            info = shard_info(index, plan.rows_per_shard, len(rows), plan.kept)
            writer.submit(index, buffers, len(rows) * plan.kept, stats, info)
    finally:
        writer.close()
    ranks.barrier()
    return n_shards


def _all_complete(ranks: TPRanks, folder: Path, index: int) -> bool:
    """Whether every rank of this copy has its part of shard ``index`` complete."""
    missing = torch.tensor([0 if complete_shard(folder, index) is not None else 1])
    dist.all_reduce(missing, group=ranks.tp.group)
    return int(missing) == 0


def _run_shard(
    plan: Any,
    rows: np.ndarray,
    mine: list[str],
    split: dict[str, SplitHook],
    batch_size: int,
    buffers: Any,
    ranks: TPRanks,
) -> dict[str, RunningStats]:
    """``harvester._run_shard`` in sharded mode: this rank's columns, and the statistics of
    its columns with each vector's whole norm."""
    model, positions, hooks = plan.model, plan.position_slice, plan.hook_names
    stats: dict[str, RunningStats] = {}
    offset = 0
    for start in range(0, len(rows), batch_size):
        tokens = torch.as_tensor(rows[start : start + batch_size], device=model.device)
        with torch.inference_mode(), sharded_hooks(model):
            _, cache = model.run_with_cache(tokens, names_filter=hooks, return_type=None)
            kept_ids = tokens[:, positions].reshape(-1).to(torch.int32)
            n = kept_ids.shape[0]
            for hook in hooks:
                if hook not in split and hook not in mine:  # stored by rank 0
                    continue
                vectors = cache[hook][:, positions].reshape(n, -1).to(plan.dtype)
                norms = _whole_norms(vectors, hook in mine, ranks) if hook in split else None
                if hook not in mine:  # shared key/value heads: their owner stores them
                    continue
                batch_stats = RunningStats.of(vectors)
                if norms is not None:  # each vector's whole norm, not its columns'
                    batch_stats.norm_sum = norms.sum()
                stats[hook] = stats[hook].merge(batch_stats) if hook in stats else batch_stats
                buffers.activations[hook][offset : offset + n].copy_(vectors)
            buffers.token_ids[offset : offset + n].copy_(kept_ids)
        offset += n
    return stats


def _whole_norms(vectors: Tensor, owner: bool, ranks: TPRanks) -> Tensor:
    """Each stored vector's L2 norm [n] (float64), from every owner's columns."""
    squares = vectors.to(torch.float64).square().sum(1)
    if not owner:  # shared key/value heads: counted once, by their owner
        squares = torch.zeros_like(squares)
    dist.all_reduce(squares, group=ranks.tp.group)
    return squares.sqrt()


def finish_records(
    out: Path,
    index: int,
    record: dict[str, Any],
    stats: dict[str, RunningStats],
    split: dict[str, SplitHook],
) -> tuple[dict[str, Any], dict[str, RunningStats]]:
    """Shard ``index``'s record with its parts (``parts``: each other rank's file, bytes,
    sha256), and its whole vectors' statistics from rank 0's (``stats``: a part of every
    hook) and the parts' (split hooks' columns side by side)."""
    stats = dict(stats)
    ranks_needed = sorted({r for h in split.values() for r in h.owners if r != 0})
    parts, part_stats = [], {}
    for rank in ranks_needed:
        folder = part_folder(out, rank)
        part = complete_shard(folder, index, verify=False)
        if part is None:
            raise RuntimeError(
                f"Rank {rank}'s part of shard {index} is missing from {folder} after the "
                "harvest (did a rank fail?); run the same command again to redo it."
            )
        name = f"{folder.name}/{part['file']}"
        parts.append({"rank": rank, "file": name, "bytes": part["bytes"], "sha256": part["sha256"]})
        held = [h for h in split if rank in split[h].owners]
        part_stats[rank] = read_shard_stats(folder, index, held)
    for hook, layout in split.items():
        pieces = [stats[hook] if r == 0 else part_stats[r][hook] for r in layout.owners]
        first = pieces[0]
        stats[hook] = RunningStats(
            count=first.count,
            mean=torch.cat([p.mean for p in pieces]),
            m2=torch.cat([p.m2 for p in pieces]),
            norm_sum=first.norm_sum,
        )
    return {**record, "parts": parts}, stats
