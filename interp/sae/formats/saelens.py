"""SAELens folders (``cfg.json`` + ``sae_weights.safetensors``): reading 6.x (``metadata``)
and pre-6.0 (flat, renamed fields) configs, and writing 6.x.

Example:
    >>> import tempfile
    >>> folder = save_saelens(interp.load_sae("shakespeare-char-resid-l1"), tempfile.mkdtemp())
    >>> sorted(path.name for path in folder.iterdir())
    ['cfg.json', 'sae_weights.safetensors']
    >>> load_saelens(folder).cfg.d_sae
    1024
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from interp.sae.formats.build import build_sae, fold_input_scale, sae_config
from interp.sae.formats.files import SAEFormatError, read_json, read_safetensors
from interp.sae.registry import SAE_CLASS_REGISTRY
from interp.sae.sae import ARCHITECTURES, SAE

SAELENS_CFG, SAELENS_WEIGHTS = "cfg.json", "sae_weights.safetensors"


def _pre_6_config(raw: dict[str, Any]) -> dict[str, Any]:
    renames = {
        "hook_point": "hook_name",
        "hook_point_head_index": "hook_head_index",
        "activation_fn_str": "activation_fn",
        "hook_point_layer": "hook_layer",
    }
    cfg = {renames.get(key, key): value for key, value in raw.items()}
    cfg.setdefault("architecture", "standard")
    cfg.setdefault("apply_b_dec_to_input", True)
    if cfg.get("activation_fn") == "topk":
        cfg["architecture"] = "topk"
        cfg["k"] = (cfg.get("activation_fn_kwargs") or {}).get("k")
    normalize = cfg.get("normalize_activations")
    if isinstance(normalize, bool) or normalize is None:
        cfg["normalize_activations"] = "expected_average_only_in" if normalize else "none"
    cfg.setdefault(
        "reshape_activations", "hook_z" if "hook_z" in cfg.get("hook_name", "") else "none"
    )
    return cfg


def _is_pre_6(raw: dict[str, Any]) -> bool:
    version = raw.get("sae_lens_version") or (raw.get("metadata") or {}).get("sae_lens_version")
    if version is None:
        return "metadata" not in raw
    major = re.match(r"(\d+)", str(version))
    return major is None or int(major.group(1)) < 6


def saelens_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """A SAELens ``cfg.json`` (6.x with ``metadata``, or pre-6.0 flat) as one flat dict of
    fields (our ``SAEConfig`` keywords; the rest becomes metadata)."""
    if _is_pre_6(raw):
        return _pre_6_config(raw)
    fields = {key: value for key, value in raw.items() if key != "metadata"}
    fields.update(raw.get("metadata") or {})
    return fields


def load_saelens(folder: Path, device: Any = None, dtype: Any = None, **overrides: Any) -> SAE:
    cfg_path = folder / SAELENS_CFG
    fields = saelens_fields(read_json(cfg_path))
    fields.update(overrides)
    architecture = fields.get("architecture")
    # the one implementation's forms, or a registered class of its own (TemporalSAE)
    if architecture not in ARCHITECTURES and architecture not in SAE_CLASS_REGISTRY:
        raise SAEFormatError(
            f"{cfg_path}: architecture {architecture!r} is not supported; supported: "
            f"{sorted(set(ARCHITECTURES) | set(SAE_CLASS_REGISTRY))}."
        )
    for required in ("d_in", "d_sae"):
        if required not in fields:
            raise SAEFormatError(f"{cfg_path}: missing field {required!r}.")
    tensors = read_safetensors(folder / SAELENS_WEIGHTS)
    if "scaling_factor" in tensors:  # legacy: multiplies the features before the decoder
        factor = tensors.pop("scaling_factor")
        tensors["W_dec"] = tensors["W_dec"] * factor[:, None]
    scale = fields.pop("norm_scaling_factor", None)
    cfg = sae_config(cfg_path, **fields)
    if cfg.normalize_activations == "expected_average_only_in" and scale is not None:
        fold_input_scale(tensors, scale, scale)
        cfg.normalize_activations = "none"
    return build_sae(cfg, tensors, folder / SAELENS_WEIGHTS, device, dtype)


def save_saelens(sae: SAE, path: str | Path) -> Path:
    """Write ``sae`` as a SAELens 6.x folder; returns the folder."""
    sae.save_model(path)
    return Path(path)
