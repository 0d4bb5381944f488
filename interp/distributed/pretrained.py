"""``HookedTransformer.from_pretrained(..., tp_size=N)``: this rank's shard of a Hugging Face
checkpoint (a folder or hub id), processed as ``from_pretrained`` processes a whole model.
Called on every rank of ``torchrun --nproc_per_node N``."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from interp.distributed.processing import process_weights_tp
from interp.distributed.sharded_loading import load_hf_folder_tp
from interp.loading.checkpoint import printable, read_config_json
from interp.loading.pretrained import _local_folder, check_model_name
from interp.loading.processing import skipped_steps
from interp.loading.transformer_lens.toy_config import is_transformer_lens_config


def load_pretrained_tp(
    name_or_path: str | Path,
    tp_size: int,
    device: torch.device | str | None = None,
    dtype: torch.dtype | str | None = None,
    tokenizer: Any = None,
    hf_model: Any = None,
    *,
    model_class: type[nn.Module],
    **steps: bool,
) -> Any:
    """This rank's shard of ``name_or_path`` (see ``load_hf_folder_tp``), with the weight
    processing ``steps`` (``fold_ln=...``; one the model cannot take is skipped with a
    warning, as ``load_pretrained`` does). ``model.cfg.tp_size`` is ``tp_size``."""
    check_model_name(name_or_path, "from_pretrained")
    if hf_model is not None:
        raise ValueError(
            f"tp_size={tp_size} loads each rank's slices from a checkpoint's files; an "
            "in-memory hf_model is whole in every process. Save it with save_pretrained and "
            "pass the folder instead."
        )
    folder, repo_id = _local_folder(str(name_or_path))
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{printable(folder)} has no config.json.")
    config = read_config_json(config_path)
    if "interp_format" in config or is_transformer_lens_config(config):
        kind = "interp's own format" if "interp_format" in config else "TransformerLens's format"
        raise ValueError(
            f"{printable(folder)} is in {kind}; tp_size={tp_size} loads Hugging Face checkpoint "
            "folders (config.json and safetensors or pytorch_model.bin files) and hub ids."
        )
    model, tp = load_hf_folder_tp(
        folder, tp_size, device, dtype, tokenizer, repo_id, model_class=model_class
    )
    skipped = skipped_steps(model, **steps)
    if skipped:  # as load_pretrained: the steps this model cannot take, with a warning
        warnings.warn(
            f"{model.cfg.model_name!r}: {'; '.join(skipped.values())}. So "
            f"{' and '.join(skipped)} cannot apply and were skipped (as TransformerLens does).",
            stacklevel=3,
        )
        steps.update(dict.fromkeys(skipped, False))
    return process_weights_tp(model, tp, **steps)
