"""SAELens's config dicts: the pre-6.0 flat form brought to 6.x (``handle_pre_6_0_config``,
``handle_config_defaulting``), and an ``SAE`` built from a 6.x config dict and a SAELens
state dict (what ``SAE.from_pretrained(release, sae_id)`` does after a loader ran).

Example:
    >>> cfg = handle_pre_6_0_config({"d_in": 8, "d_sae": 32, "normalize_activations": True,
    ...                              "hook_point": "blocks.0.hook_resid_pre"})
    >>> cfg["architecture"], cfg["normalize_activations"], cfg["metadata"]["hook_name"]
    ('standard', 'expected_average_only_in', 'blocks.0.hook_resid_pre')
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.sae.formats.build import build_sae, sae_config
from interp.sae.formats.files import SAEFormatError
from interp.sae.sae import ARCHITECTURES, SAE

# The config keys SAELens keeps under ``metadata`` (sae_lens.loading.pretrained_sae_loaders).
LLM_METADATA_KEYS = {
    "model_name",
    "hook_name",
    "model_class_name",
    "hook_head_index",
    "model_from_pretrained_kwargs",
    "prepend_bos",
    "exclude_special_tokens",
    "neuronpedia_id",
    "context_size",
    "seqpos_slice",
    "dataset_path",
    "sae_lens_version",
    "sae_lens_training_version",
    "hook_name_out",
    "hook_head_index_out",
    "hf_hook_name",
    "hf_hook_name_out",
}

# The fields of SAELens's inference config class for each architecture.
_BASE_FIELDS = (
    "d_in",
    "d_sae",
    "dtype",
    "device",
    "apply_b_dec_to_input",
    "normalize_activations",
    "reshape_activations",
    "metadata",
)
_EXTRA_FIELDS = {
    "topk": ("k", "rescale_acts_by_decoder_norm"),
    "batchtopk": ("k", "rescale_acts_by_decoder_norm"),
    "transcoder": ("d_out",),
    "skip_transcoder": ("d_out",),
    "jumprelu_transcoder": ("d_out",),
    "jumprelu_skip_transcoder": ("d_out",),
    "topk_transcoder": ("d_out", "k", "rescale_acts_by_decoder_norm"),
    "topk_skip_transcoder": ("d_out", "k", "rescale_acts_by_decoder_norm"),
}


def config_fields(architecture: str) -> set[str]:
    """The keys SAELens's config class for ``architecture`` has (besides ``architecture``)."""
    return set(_BASE_FIELDS) | set(_EXTRA_FIELDS.get(architecture, ()))


def _version_major(version: Any) -> int | None:
    match = re.match(r"\s*(\d+)", str(version)) if version else None
    return int(match.group(1)) if match else None


def handle_config_defaulting(cfg_dict: dict[str, Any]) -> dict[str, Any]:
    """A config dict from before SAELens 6.0 (no ``sae_lens_version`` >= 6) brought to 6.x."""
    version = cfg_dict.get("sae_lens_version")
    if not version and "metadata" in cfg_dict:
        version = cfg_dict["metadata"].get("sae_lens_version")
    major = _version_major(version)
    if major is None or major < 6:
        cfg_dict = handle_pre_6_0_config(cfg_dict)
    return cfg_dict


def handle_pre_6_0_config(cfg_dict: dict[str, Any]) -> dict[str, Any]:
    """SAELens's 6.x form of a flat pre-6.0 config dict: old names renamed (``hook_point`` ->
    ``hook_name``), defaults filled, boolean ``normalize_activations`` mapped, ``topk``
    activations made the ``topk`` architecture, the run's fields moved under ``metadata``."""
    renames = {
        "hook_point": "hook_name",
        "hook_point_head_index": "hook_head_index",
        "activation_fn_str": "activation_fn",
    }
    new_cfg = {renames.get(key, key): value for key, value in cfg_dict.items()}
    for key, value in (
        ("prepend_bos", True),
        ("dataset_trust_remote_code", True),
        ("apply_b_dec_to_input", True),
        ("finetuning_scaling_factor", False),
        ("sae_lens_training_version", None),
        ("activation_fn", "relu"),
        ("architecture", "standard"),
        ("neuronpedia_id", None),
    ):
        new_cfg.setdefault(key, value)
    hook_z = "hook_z" in new_cfg.get("hook_name", "")
    new_cfg.setdefault("reshape_activations", "hook_z" if hook_z else "none")
    k = (new_cfg.get("activation_fn_kwargs") or {}).get("k")
    if new_cfg.get("activation_fn") == "topk" and k is not None:
        new_cfg["architecture"] = "topk"
        new_cfg["k"] = k
    if isinstance(new_cfg.get("normalize_activations"), bool):
        on = new_cfg["normalize_activations"]
        new_cfg["normalize_activations"] = "expected_average_only_in" if on else "none"
    if new_cfg.get("normalize_activations") is None:
        new_cfg["normalize_activations"] = "none"
    new_cfg.setdefault("device", "cpu")
    architecture = new_cfg.get("architecture", "standard")
    valid = config_fields(architecture)
    out = {key: value for key, value in new_cfg.items() if key in valid}
    if architecture == "topk" and "activation_fn_kwargs" in new_cfg:
        out["k"] = new_cfg["activation_fn_kwargs"]["k"]
    out["metadata"] = {key: value for key, value in new_cfg.items() if key in LLM_METADATA_KEYS}
    out["architecture"] = architecture
    return out


def sae_from_config_dict(
    cfg_dict: dict[str, Any],
    state_dict: dict[str, Tensor],
    source: str | Path = "state_dict",
    dtype: str | torch.dtype | None = None,
    device: str | torch.device | None = None,
) -> SAE:
    """An ``SAE`` from a SAELens 6.x config dict and a SAELens state dict (``W_enc``, ``W_dec``,
    ``b_enc``, ``b_dec``, ``threshold``, ...; a ``finetuning_scaling_factor`` is folded into
    ``W_dec``, a ``log_threshold`` exponentiated). Names, shapes and values are checked.

    Example:
        >>> cfg = {"architecture": "standard", "d_in": 4, "d_sae": 8, "dtype": "float32",
        ...        "metadata": {"hook_name": "blocks.0.hook_resid_pre"}}
        >>> state = {"W_enc": torch.zeros(4, 8), "W_dec": torch.zeros(8, 4),
        ...          "b_enc": torch.zeros(8), "b_dec": torch.zeros(4)}
        >>> sae_from_config_dict(cfg, state).cfg.hook_name
        'blocks.0.hook_resid_pre'
    """
    source = Path(str(source))
    architecture = cfg_dict.get("architecture", "standard")
    if architecture not in ARCHITECTURES:
        raise SAEFormatError(
            f"{source}: architecture {architecture!r} is not supported by interp; supported: "
            f"{sorted(ARCHITECTURES)}."
        )
    fields = {key: value for key, value in cfg_dict.items() if key != "metadata"}
    fields.update(cfg_dict.get("metadata") or {})
    fields.pop("device", None)
    tensors = dict(state_dict)
    if "finetuning_scaling_factor" in tensors:  # multiplies the features before the decoder
        factor = tensors.pop("finetuning_scaling_factor")
        tensors["W_dec"] = tensors["W_dec"] * factor[:, None]
    if "log_threshold" in tensors:
        tensors["threshold"] = tensors.pop("log_threshold").exp()
    if fields.get("normalize_activations") is None:
        fields["normalize_activations"] = "none"
    cfg = sae_config(source, **fields)
    return build_sae(cfg, tensors, source, device=device, dtype=dtype or cfg_dict.get("dtype"))


def fold_activation_norm_scaling_factor(sae: SAE, scaling_factor: float) -> None:
    """SAELens's fold of an ``expected_average_only_in`` input scale into the weights."""
    with torch.no_grad():
        sae.W_enc.mul_(scaling_factor)
        sae.W_dec.div_(scaling_factor)
        sae.b_dec.div_(scaling_factor)
    sae.cfg.normalize_activations = "none"
