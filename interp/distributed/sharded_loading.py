"""Loading a rank's shard of a Hugging Face checkpoint: every rank reads only its slices of
the block tensors (its heads' rows of a query projection, its neurons' columns of a down
projection) straight from the files, and the family's own conversion runs on them with the
rank's head and neuron counts (``ShardPlan.local_config``).

A ``ShardedSource`` is the checkpoint as one rank sees it: each tensor has the shape of the
rank's share, and taking it reads only that share (``TensorSource.take_slice``). The share
of each tensor comes from comparing the family's tensor shapes for the whole model and for
the rank's (the one axis that differs is split), fused projections part by part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from interp.config import HookedTransformerConfig
from interp.distributed.layers import install_tensor_parallel
from interp.distributed.plan import ShardPlan, check_tp_size
from interp.distributed.process_group import TPGroup, raise_together, tensor_parallel_group
from interp.loading.checkpoint import (
    Ranges,
    Shape,
    TensorSource,
    build_model,
    printable,
    read_config_json,
    resolve_dtype,
)
from interp.loading.families import family_for
from interp.loading.families.gpt2 import GPT2, hf_shapes
from interp.loading.hf import _checked_config, _model_name, folder_tokenizer, hf_folder_source


def checkpoint_shapes(family: Any, cfg: HookedTransformerConfig, hf_config: dict) -> dict:
    """The shape of every checkpoint tensor (by the family's canonical name) a model of
    ``cfg`` has."""
    if family is GPT2:
        return hf_shapes(cfg)
    rows = family.table(cfg, family.text_values(hf_config))
    return {row.checkpoint: row.shape for row in rows if row.checkpoint is not None}


def canonical_name(family: Any, name: str) -> str | None:
    if family is GPT2:
        return name.removeprefix("transformer.")
    return family.canonical_name(name)


class ShardedSource(TensorSource):
    """``source`` as rank ``plan.rank`` reads it: each tensor that the rank splits has the
    shape of its share, and taking it reads that share alone."""

    def __init__(self, source: TensorSource, plan: ShardPlan, family: Any, hf_config: dict):
        full = checkpoint_shapes(family, plan.cfg, hf_config)
        local = checkpoint_shapes(family, plan.local_config(), hf_config)
        self.slices: dict[str, tuple[int, Ranges]] = {}
        shapes: dict[str, Shape] = {}
        for name, shape in source.shapes.items():
            canonical = canonical_name(family, name)
            spec = None
            if canonical in full and canonical in local:
                spec = plan.checkpoint_ranges(canonical, full[canonical], local[canonical])
            if spec is not None:
                self.slices[name] = spec
                shape = local[canonical]
            shapes[name] = shape
        super().__init__(shapes, self._read_share)
        self.source = source

    def _read_share(self, name: str) -> Tensor:
        if name not in self.slices:
            return self.source.take(name)
        axis, ranges = self.slices[name]
        return self.source.take_slice(name, axis, ranges)


def load_hf_folder_tp(
    folder: str | Path,
    tp_size: int,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    tokenizer: Any = None,
    repo_id: str | None = None,
    *,
    model_class: type[nn.Module],
) -> tuple[Any, TPGroup]:
    """This rank's shard of a Hugging Face checkpoint folder as a ``model_class``, and its
    ``TPGroup``: called on every rank. Errors (a size that does not split the heads, a
    checkpoint that does not fit) are raised on every rank, before any weight is read when
    the config alone shows them.
    """
    dtype = resolve_dtype(dtype, torch.float32)
    folder = Path(folder)
    config_path = folder / "config.json"
    hf_config = read_config_json(config_path)
    family = family_for(hf_config)
    cfg = _checked_config(
        config_path, family.name, lambda: family.hooked_config(hf_config, dtype=dtype)
    )
    tp = tensor_parallel_group(tp_size, device)
    check_tp_size(cfg, tp_size, family.name)  # the same on every rank: raised by all
    cfg.tp_size = tp_size
    plan = ShardPlan(cfg, tp.rank, tp.size)
    model, error = None, None
    try:
        model = _load_shard(
            folder, hf_config, family, cfg, plan, tp, tokenizer, repo_id, model_class
        )
    except Exception as caught:  # a file one rank cannot read: every rank raises
        error = caught
    raise_together(error, tp, "Loading the checkpoint")
    return model, tp


def _load_shard(
    folder: Path,
    hf_config: dict,
    family: Any,
    cfg: HookedTransformerConfig,
    plan: ShardPlan,
    tp: TPGroup,
    tokenizer: Any,
    repo_id: str | None,
    model_class: type[nn.Module],
) -> Any:
    what = f"The checkpoint in {printable(folder)}"
    cfg.model_name = _model_name(cfg, hf_config, folder, repo_id)
    if family.default_tokenizer is None:
        cfg.tokenizer_name = hf_config.get("_name_or_path") or folder.name
    weights = hf_folder_source(folder)
    family.checked_tensors(weights, cfg, hf_config, what)  # every name and shape, none read
    sharded = ShardedSource(weights, plan, family, hf_config)
    tensors = family.checked_tensors(sharded, plan.local_config(), hf_config, what)
    if tokenizer is None:
        tokenizer = folder_tokenizer(folder, family.default_tokenizer == "gpt2", cfg.d_vocab)
    model = build_model(
        cfg,
        tensors,
        tokenizer,
        tp.device,
        printable(folder),
        fresh=True,
        model_class=model_class,
        prepare=lambda model: install_tensor_parallel(model, plan, tp),
    )
    weights.warn_non_finite(what)
    return model
