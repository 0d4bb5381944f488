"""Gemma Scope folders: 1 (``params.npz``, JumpReLU; the hook from the path: ``-res``/``-mlp``/
``-att`` and ``layer_N``) and 2 (``params.safetensors`` [+ ``config.json``]: ``w_enc``...,
Hugging Face hook paths; transcoders with an affine skip connection).

Example:
    >>> import tempfile, numpy as np
    >>> folder = Path(tempfile.mkdtemp(),
    ...               "gemma-scope-2b-pt-res/layer_3/width_16k/average_l0_59")
    >>> folder.mkdir(parents=True)   # a tiny stand-in for the hub's folder: d_in 8, d_sae 32
    >>> np.savez(folder / "params.npz", W_enc=np.zeros((8, 32), "f4"),
    ...          W_dec=np.zeros((32, 8), "f4"), b_enc=np.zeros(32, "f4"),
    ...          b_dec=np.zeros(8, "f4"), threshold=np.zeros(32, "f4"))
    >>> load_gemma_scope_1(folder).cfg.hook_name   # the hook from the path's -res and layer_3
    'blocks.3.hook_resid_post'
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from interp.sae.formats.build import build_sae, sae_config
from interp.sae.formats.files import SAEFormatError, read_json, read_npz, read_safetensors
from interp.sae.formats.hf_hooks import hook_from_hf
from interp.sae.sae import SAE

# ------------------------------------------------------------------- Gemma Scope 1
_GEMMA_2_MODELS = {"2b": "gemma-2-2b", "9b": "gemma-2-9b", "27b": "gemma-2-27b"}


def load_gemma_scope_1(
    folder: Path, device: Any = None, dtype: Any = None, **overrides: Any
) -> SAE:
    source = folder / "params.npz"
    tensors = {}
    for key, value in read_npz(source).items():
        tensors["W_" + key[2:] if key.startswith("w_") else key] = value.float()
    for name in ("W_enc", "W_dec", "b_enc", "b_dec", "threshold"):
        if name not in tensors:
            raise SAEFormatError(f"{source}: missing array {name!r} (has {sorted(tensors)}).")
    d_in, d_sae = tensors["W_enc"].shape
    where = folder.as_posix()
    layer = re.search(r"layer_(\d+)", where)
    kind = re.search(r"gemma-scope-(\w+)-(?:pt|it)-(res|mlp|att)", where)
    hook_name = overrides.pop("hook_name", None)
    embedding = "embedding" in folder.name or "embedding" in where.split("/")[-3:-1]
    if hook_name is None and kind is not None and (layer is not None or embedding):
        if embedding:
            hook_name = "hook_embed"
        else:
            suffix = {"res": "hook_resid_post", "mlp": "hook_mlp_out", "att": "attn.hook_z"}
            hook_name = f"blocks.{layer.group(1)}.{suffix[kind.group(2)]}"
    if hook_name is None:
        raise SAEFormatError(
            f"{source}: a Gemma Scope params.npz has no config, and its path does not say "
            "the hook (google/gemma-scope-2b-pt-res/layer_N/...); pass hook_name=."
        )
    if embedding:  # as SAELens's gemma_2_sae_huggingface_loader
        tensors["W_enc"] = tensors["W_enc"] / math.sqrt(d_in)
        tensors["W_dec"] = tensors["W_dec"] * math.sqrt(d_in)
    fields: dict[str, Any] = {
        "d_in": d_in,
        "d_sae": d_sae,
        "architecture": "jumprelu",
        "hook_name": hook_name,
        "apply_b_dec_to_input": False,
        "reshape_activations": "hook_z" if hook_name.endswith("hook_z") else "none",
        "model_name": _GEMMA_2_MODELS.get(kind.group(1)) if kind else None,
    }
    fields.update(overrides)
    return build_sae(sae_config(source, **fields), tensors, source, device, dtype)


# ------------------------------------------------------------------- Gemma Scope 2
def _gemma_scope_2_hooks(folder: Path, config: dict[str, Any]) -> tuple[str, str | None]:
    hook_in, hook_out = config.get("hf_hook_point_in"), config.get("hf_hook_point_out")
    if hook_in is not None:
        name_in = hook_from_hf(hook_in, "output", folder / "config.json")
        name_out = hook_from_hf(hook_out, "output", folder / "config.json") if hook_out else None
        return name_in, name_out if name_out != name_in else None
    where = folder.as_posix()
    layer = re.search(r"layer_(\d+)", where)
    if layer is None:
        raise SAEFormatError(
            f"{folder}: no config.json and no layer_N in the path; pass hook_name=."
        )
    n = layer.group(1)
    if "transcoder" in where or "clt" in where:
        return f"blocks.{n}.hook_mlp_in", f"blocks.{n}.hook_mlp_out"
    for part, hook in (
        ("resid_post", "hook_resid_post"),
        ("attn_out", "attn.hook_z"),
        ("mlp_out", "hook_mlp_out"),
    ):
        if part in where:
            return f"blocks.{n}.{hook}", None
    raise SAEFormatError(
        f"{folder}: no config.json, and the path names no resid_post/attn_out/mlp_out/"
        "transcoder site; pass hook_name=."
    )


def load_gemma_scope_2(
    folder: Path, device: Any = None, dtype: Any = None, **overrides: Any
) -> SAE:
    source = folder / "params.safetensors"
    config_path = folder / "config.json"
    config = read_json(config_path) if config_path.is_file() else {}
    if config.get("architecture", "jump_relu") != "jump_relu":
        raise SAEFormatError(
            f"{config_path}: architecture {config['architecture']!r} is not supported "
            "(Gemma Scope 2 SAEs are 'jump_relu')."
        )
    raw = read_safetensors(source)
    for name in ("w_enc", "w_dec", "b_enc", "b_dec", "threshold"):
        if name not in raw:
            raise SAEFormatError(f"{source}: missing tensor {name!r} (has {sorted(raw)}).")
    tensors = {
        "W_enc": raw["w_enc"],
        "W_dec": raw["w_dec"],
        "b_enc": raw["b_enc"],
        "b_dec": raw["b_dec"],
        "threshold": raw["threshold"],
    }
    if "affine_skip_connection" in raw:
        tensors["W_skip"] = raw["affine_skip_connection"].T
    if "hook_name" in overrides:
        hook_name, hook_name_out = overrides.pop("hook_name"), overrides.pop("hook_name_out", None)
    else:
        hook_name, hook_name_out = _gemma_scope_2_hooks(folder, config)
    d_in, d_sae = raw["w_enc"].shape
    transcoder = hook_name_out is not None
    architecture = "jumprelu"
    if transcoder:
        architecture = "jumprelu_skip_transcoder" if "W_skip" in tensors else "jumprelu_transcoder"
    fields: dict[str, Any] = {
        "d_in": d_in,
        "d_sae": d_sae,
        "architecture": architecture,
        "hook_name": hook_name,
        "hook_name_out": hook_name_out,
        "d_out": raw["w_dec"].shape[-1] if transcoder else None,
        "apply_b_dec_to_input": False,
        "reshape_activations": "hook_z" if hook_name.endswith("hook_z") else "none",
        "model_name": config.get("model_name"),
        "hf_hook_name": config.get("hf_hook_point_in"),
    }
    fields.update(overrides)
    return build_sae(sae_config(source, **fields), tensors, source, device, dtype)
