"""Llama Scope folders (``hyperparams.json`` + ``checkpoints/final.safetensors``): JumpReLU
SAEs and transcoders with a scalar threshold and dataset-norm input scaling, folded in.

Example:
    >>> import json, tempfile
    >>> from safetensors.torch import save_file
    >>> folder = Path(tempfile.mkdtemp())   # a tiny stand-in: d_model 8, d_sae 32
    >>> (folder / "checkpoints").mkdir()
    >>> _ = (folder / "hyperparams.json").write_text(json.dumps({"d_model": 8, "d_sae": 32,
    ...     "hook_point_in": "blocks.15.hook_resid_post", "jump_relu_threshold": 0.1}))
    >>> save_file({"encoder.weight": torch.zeros(32, 8), "encoder.bias": torch.zeros(32),
    ...            "decoder.weight": torch.zeros(8, 32), "decoder.bias": torch.zeros(8)},
    ...           folder / "checkpoints" / "final.safetensors")
    >>> sae = load_llama_scope(folder)
    >>> sae.cfg.architecture, sae.cfg.hook_name, sae.threshold[0].item()   # scalar threshold
    ('jumprelu', 'blocks.15.hook_resid_post', 0.1)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from interp.sae.formats.build import build_sae, fold_input_scale, sae_config
from interp.sae.formats.files import SAEFormatError, read_json, read_safetensors
from interp.sae.sae import SAE


def load_llama_scope(folder: Path, device: Any = None, dtype: Any = None, **overrides: Any) -> SAE:
    hp_path, source = folder / "hyperparams.json", folder / "checkpoints" / "final.safetensors"
    hp = read_json(hp_path)
    for name in ("d_model", "d_sae", "hook_point_in", "jump_relu_threshold"):
        if name not in hp:
            raise SAEFormatError(f"{hp_path}: missing field {name!r}.")
    raw = read_safetensors(source)
    for name in ("encoder.weight", "encoder.bias", "decoder.weight", "decoder.bias"):
        if name not in raw:
            raise SAEFormatError(f"{source}: missing tensor {name!r} (has {sorted(raw)}).")
    d_in, d_sae = hp["d_model"], hp["d_sae"]
    tensors = {
        "W_enc": raw["encoder.weight"].T,
        "b_enc": raw["encoder.bias"],
        "W_dec": raw["decoder.weight"].T,
        "b_dec": raw["decoder.bias"],
    }
    norms = hp.get("dataset_average_activation_norm")
    scale_in = scale_out = 1.0
    if norms:  # inputs scaled to norm sqrt(d_in) on average; outputs scaled back
        scale_in = math.sqrt(d_in) / norms["in"]
        scale_out = math.sqrt(d_in) / norms.get("out", norms["in"])
        fold_input_scale(tensors, scale_in, scale_out)
    # As SAELens's llama_scope loader: the scalar threshold, scaled by the input scale.
    tensors["threshold"] = torch.full((d_sae,), hp["jump_relu_threshold"] * scale_in)
    hook_out = hp.get("hook_point_out")
    transcoder = hook_out is not None and hook_out != hp["hook_point_in"]
    fields: dict[str, Any] = {
        "d_in": d_in,
        "d_sae": d_sae,
        "architecture": "jumprelu_transcoder" if transcoder else "jumprelu",
        "hook_name": hp["hook_point_in"],
        "hook_name_out": hook_out if transcoder else None,
        "apply_b_dec_to_input": False,
        "model_name": "meta-llama/Llama-3.1-8B",
    }
    fields.update(overrides)
    return build_sae(sae_config(hp_path, **fields), tensors, source, device, dtype)
