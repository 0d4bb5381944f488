"""Building one ``SAE`` from any format's fields and SAELens-named tensors: the config
(unknown fields kept in ``extra``), every tensor checked for name, shape and finite values,
and input/output scales folded into the weights.

Example:
    >>> source = Path("sae.safetensors")   # only named in error messages
    >>> tensors = {"W_enc": torch.zeros(8, 32), "W_dec": torch.zeros(32, 8),
    ...            "b_enc": torch.zeros(32), "b_dec": torch.zeros(8)}
    >>> cfg = sae_config(source, d_in=8, d_sae=32, hook_name="blocks.0.hook_resid_post")
    >>> build_sae(cfg, tensors, source, device=None, dtype=None).W_enc.shape
    torch.Size([8, 32])
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.sae.config import ARCHITECTURES, CORE_METADATA, config_class
from interp.sae.formats.files import SAEFormatError
from interp.sae.sae import SAE, SAEConfig, dtype_to_str, str_to_dtype


def build_sae(
    cfg: SAEConfig,
    tensors: dict[str, Tensor],
    source: Path,
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
) -> SAE:
    """An SAE from ``cfg`` and SAELens-named tensors, after checking names, shapes, values.

    Built on the meta device and given the tensors themselves (``load_state_dict(...,
    assign=True)``, as SAELens loads): the weights are never held twice."""
    if dtype is not None:
        cfg.dtype = dtype_to_str(str_to_dtype(dtype))
    cfg.device = "meta"
    sae = SAE(cfg)
    expected = dict(sae.named_parameters())
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise SAEFormatError(
            f"{source}: a {cfg.architecture} SAE needs tensors {sorted(expected)}; "
            f"missing {missing}, unexpected {unexpected}."
        )
    for name, param in expected.items():
        tensor = tensors[name]
        if tuple(tensor.shape) != tuple(param.shape):
            raise SAEFormatError(
                f"{source}: tensor {name} has shape {tuple(tensor.shape)}, expected "
                f"{tuple(param.shape)} (d_in={cfg.d_in}, d_sae={cfg.d_sae}, "
                f"d_out={cfg.output_width})."
            )
        if not torch.isfinite(tensor).all():
            bad = int((~torch.isfinite(tensor)).sum())
            raise SAEFormatError(f"{source}: tensor {name} holds {bad} NaN or infinite values.")
    state = {name: tensors[name].to(param.dtype) for name, param in expected.items()}
    sae.load_state_dict(state, assign=True)
    cfg.device = str(next(iter(state.values())).device)
    if device is not None:
        sae.to(device)
    return sae


def sae_config(source: Path, **fields: Any) -> SAEConfig:
    """The config of ``fields``: the class of their architecture, its fields given, every
    other one (context_size, ...) kept in the metadata."""
    try:
        cfg_class = config_class(fields.get("architecture", "standard"))
    except ValueError as error:
        raise SAEFormatError(f"{source}: {error}") from None
    names = {f.name for f in dataclasses.fields(cfg_class) if f.init} | set(CORE_METADATA)
    if ARCHITECTURES.get(fields.get("architecture"), ("",))[0] == "topk" and "k" not in fields:
        raise SAEFormatError(f"{source}: A topk SAE needs k, a positive int; set cfg k.")
    known = {key: value for key, value in fields.items() if key in names}
    extra = {key: value for key, value in fields.items() if key not in names}
    try:
        return SAEConfig(**known, extra=extra)
    except (ValueError, TypeError) as error:
        raise SAEFormatError(f"{source}: {error}") from None


def fold_input_scale(tensors: dict[str, Tensor], scale_in: float, scale_out: float) -> None:
    """Fold ``x * scale_in`` before the encoder and ``/ scale_out`` after the decoder into the
    weights (SAELens's ``fold_activation_norm_scaling_factor`` when the two are equal)."""
    tensors["W_enc"] = tensors["W_enc"] * scale_in
    tensors["W_dec"] = tensors["W_dec"] / scale_out
    tensors["b_dec"] = tensors["b_dec"] / scale_out
