"""How a model splits over ``tp_size`` ranks: which sizes are valid, each rank's share of the
heads, key/value heads and neurons (its local config), where each hook's activation is cut
(``ShardLayout``), and which part of each checkpoint tensor a rank reads.

Attention heads and MLP neurons split evenly; with fewer key/value heads than ranks
(grouped-query attention), each rank keeps the one key/value head its query heads read, so
a key/value head is held by several ranks. A mixture of experts splits every expert's
neurons (each rank runs every expert on its tokens, with its share of the neurons), so the
routing, and every expert's hooks, are those of one process.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from interp.config import HookedTransformerConfig
from interp.distributed.collectives import ShardLayout
from interp.loading.checkpoint import Ranges, Shape

# The families a tensor-parallel load has been checked on against one process, and the
# checkpoint tensors among theirs that fuse several projections along their split axis
# (each part is split on its own): name suffix -> the parts' sizes.
SUPPORTED_FAMILIES = (
    "GPT-2",
    "Llama",
    "Mistral",
    "Gemma",
    "Gemma 2",
    "Gemma 3",
    "Mixtral",
    "Qwen2",
    "Qwen3",
    "Qwen2-MoE",
    "Qwen3-MoE",
    "GPT-NeoX",
    "Phi",
    "GPT-J",
    "GPT-Neo",
    "OPT",
)


def _fused_parts(cfg: HookedTransformerConfig, name: str) -> list[int] | None:
    """The sizes of the parts a fused checkpoint tensor ``name`` concatenates along its
    split axis, or None for a tensor that is one projection."""
    if name.endswith(("attn.c_attn.weight", "attn.c_attn.bias")):  # GPT-2's q, k, v
        return [cfg.n_heads * cfg.d_head] * 3
    # GPT-NeoX's query_key_value interleaves q, k, v head by head: a run of heads is one
    # contiguous slice, read as a single part.
    return None


def valid_sizes(cfg: HookedTransformerConfig) -> list[int]:
    """The tensor-parallel sizes ``cfg`` splits into: each divides the heads and the MLP's
    neurons, and the key/value heads divide by it or it by them.

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=64, n_ctx=8, n_heads=4, d_mlp=96,
        ...                               n_key_value_heads=2)
        >>> valid_sizes(cfg)
        [1, 2, 4]
    """
    return [size for size in range(1, cfg.n_heads + 1) if _problem(cfg, size) is None]


def _problem(cfg: HookedTransformerConfig, size: int) -> str | None:
    n_kv = cfg.n_key_value_heads or cfg.n_heads
    if cfg.n_heads % size:
        return "attention heads"
    if n_kv % size and size % n_kv:
        return "key/value heads"
    widths = [] if cfg.attn_only else [cfg.d_mlp, cfg.d_mlp_shared_expert]
    if any(width is not None and width % size for width in widths):
        return "MLP neurons"
    return None


def check_tp_size(cfg: HookedTransformerConfig, tp_size: int, family: str | None) -> None:
    """A ``ValueError`` naming the head counts and the valid sizes when ``tp_size`` does not
    split ``cfg``, or the model has a part tensor parallel does not split yet (raised from
    the config alone, before any weight is read, identically on every rank).

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=64, n_ctx=8, n_heads=4, d_mlp=96)
        >>> check_tp_size(cfg, 3, "Llama")
        Traceback (most recent call last):
        ...
        ValueError: tp_size=3 does not split this model's attention heads ...
    """
    if family is not None and family not in SUPPORTED_FAMILIES:
        raise ValueError(
            f"tp_size={tp_size}: tensor parallel supports the {', '.join(SUPPORTED_FAMILIES)} "
            f"families so far, not {family}; load it without tp_size."
        )
    unsupported = {
        "a SoLU MLP's norm over the neurons": cfg.act_fn == "solu_ln",
        "QK norms across heads (OLMo 2)": cfg.use_qk_norm and cfg.qk_norm_across_heads,
        "gpt-oss's experts": cfg.experts_swiglu_limit is not None,
        "per-head attention inputs (use_attn_in, use_split_qkv_input)": cfg.use_attn_in
        or cfg.use_split_qkv_input,
    }
    for what, present in unsupported.items():
        if present:
            raise ValueError(f"tp_size={tp_size}: tensor parallel does not split {what} yet.")
    problem = _problem(cfg, tp_size)
    if problem is not None:
        n_kv = cfg.n_key_value_heads or cfg.n_heads
        raise ValueError(
            f"tp_size={tp_size} does not split this model's {problem} (n_heads={cfg.n_heads}, "
            f"n_key_value_heads={n_kv}, d_mlp={cfg.d_mlp}): the ranks must share the heads and "
            f"neurons evenly. Valid sizes: {valid_sizes(cfg)}."
        )


@dataclass(frozen=True)
class ShardPlan:
    """Rank ``rank`` of ``size``'s share of a model with config ``cfg``."""

    cfg: HookedTransformerConfig
    rank: int
    size: int

    @property
    def n_kv(self) -> int:
        return self.cfg.n_key_value_heads or self.cfg.n_heads

    def local_config(self) -> HookedTransformerConfig:
        """``cfg`` with this rank's head, key/value head and neuron counts (its blocks'
        shapes; the embedding, norms and unembedding stay whole)."""
        local = copy.copy(self.cfg)
        local.extra = dict(self.cfg.extra)
        local.n_heads = self.cfg.n_heads // self.size
        if self.cfg.n_key_value_heads is not None:
            local.n_key_value_heads = max(self.n_kv // self.size, 1)
        if self.cfg.d_mlp is not None and not self.cfg.attn_only:
            local.d_mlp = self.cfg.d_mlp // self.size
        if self.cfg.d_mlp_shared_expert is not None:
            local.d_mlp_shared_expert = self.cfg.d_mlp_shared_expert // self.size
        return local

    def heads(self, dim: int) -> ShardLayout:
        """The query heads' layout along ``dim``."""
        count = self.cfg.n_heads // self.size
        return ShardLayout(dim, self.cfg.n_heads, count, tuple(r * count for r in range(self.size)))

    def kv_heads(self, dim: int) -> ShardLayout:
        """The key/value heads' layout: split, or one per rank, shared by several ranks."""
        count = max(self.n_kv // self.size, 1)
        n_parts = self.n_kv // count
        starts = tuple((r * n_parts // self.size) * count for r in range(self.size))
        return ShardLayout(dim, self.n_kv, count, starts)

    def neurons(self, width: int, dim: int = -1) -> ShardLayout:
        """A layer of ``width`` neurons' layout along ``dim``."""
        count = width // self.size
        return ShardLayout(dim, width, count, tuple(r * count for r in range(self.size)))

    def checkpoint_ranges(self, name: str, full: Shape, local: Shape) -> tuple[int, Ranges] | None:
        """The axis and ranges of checkpoint tensor ``name`` (shape ``full``) this rank
        reads, given the shape ``local`` its share has; None when it reads it whole.

        Each (fused) part of ``n_parts`` equal shards takes shard ``rank * n_parts // size``:
        ``rank`` when every rank has its own, fewer when ranks share key/value heads.
        """
        if tuple(full) == tuple(local):
            return None
        axes = [axis for axis, (a, b) in enumerate(zip(full, local, strict=True)) if a != b]
        if len(axes) != 1 or len(full) != len(local):
            raise ValueError(f"{name}: cannot split shape {full} into {local}.")
        axis = axes[0]
        full_parts = _fused_parts(self.cfg, name) or [full[axis]]
        n_fused = len(full_parts)
        if local[axis] % n_fused:
            raise ValueError(f"{name}: cannot split shape {full} into {local}.")
        ranges, offset = [], 0
        for part in full_parts:
            count = local[axis] // n_fused
            n_shards = part // count
            index = self.rank * n_shards // self.size
            ranges.append((offset + index * count, offset + (index + 1) * count))
            offset += part
        return axis, ranges
