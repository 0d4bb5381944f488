"""EleutherAI sparsify folders (``cfg.json`` + ``sae.safetensors``): TopK SAEs and
transcoders; the folder's name is the Hugging Face module it reads.

Example:
    >>> import json, tempfile
    >>> from safetensors.torch import save_file
    >>> folder = Path(tempfile.mkdtemp(), "layers.3")   # named after the HF module it reads
    >>> folder.mkdir()
    >>> _ = (folder / "cfg.json").write_text(json.dumps({"k": 4}))
    >>> save_file({"encoder.weight": torch.zeros(32, 8), "encoder.bias": torch.zeros(32),
    ...            "W_dec": torch.zeros(32, 8), "b_dec": torch.zeros(8)},
    ...           folder / "sae.safetensors")
    >>> sae = load_sparsify(folder)
    >>> sae.cfg.hook_name, sae.cfg.architecture, sae.cfg.k
    ('blocks.3.hook_resid_post', 'topk', 4)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from interp.sae.formats.build import build_sae, sae_config
from interp.sae.formats.files import SAEFormatError, read_json, read_safetensors
from interp.sae.formats.hf_hooks import hook_from_hf
from interp.sae.sae import SAE


def load_sparsify(folder: Path, device: Any = None, dtype: Any = None, **overrides: Any) -> SAE:
    cfg_path, source = folder / "cfg.json", folder / "sae.safetensors"
    raw_cfg = read_json(cfg_path)
    activation = raw_cfg.get("activation", "topk")
    if activation != "topk":
        raise SAEFormatError(
            f"{cfg_path}: activation {activation!r} is not supported (sparsify SAEs load "
            "with activation 'topk')."
        )
    if "k" not in raw_cfg:
        raise SAEFormatError(f"{cfg_path}: missing field 'k'.")
    raw = read_safetensors(source)
    for name in ("encoder.weight", "W_dec", "b_dec"):
        if name not in raw:
            raise SAEFormatError(f"{source}: missing tensor {name!r} (has {sorted(raw)}).")
    d_sae, d_in = raw["encoder.weight"].shape
    transcode = bool(raw_cfg.get("transcode", False))
    tensors = {
        "W_enc": raw["encoder.weight"].T,
        "b_enc": raw.get("encoder.bias", torch.zeros(d_sae)),
        "W_dec": raw["W_dec"],
        "b_dec": raw["b_dec"],
    }
    skip = "W_skip" in raw
    if skip:
        tensors["W_skip"] = raw["W_skip"]
    hook_name = overrides.pop("hook_name", None)
    hook_name_out = overrides.pop("hook_name_out", None)
    if hook_name is None:
        side = "input" if transcode else "output"
        hook_name = hook_from_hf(folder.name, side, folder)
        if transcode or skip:
            hook_name_out = hook_from_hf(folder.name, "output", folder)
    run_config = folder.parent / "config.json"
    run = read_json(run_config) if run_config.is_file() else {}
    is_transcoder = hook_name_out is not None
    architecture = "topk"
    if is_transcoder:
        architecture = "topk_skip_transcoder" if skip else "topk_transcoder"
    fields: dict[str, Any] = {
        "d_in": d_in,
        "d_sae": d_sae,
        "architecture": architecture,
        "k": raw_cfg["k"],
        "hook_name": hook_name,
        "hook_name_out": hook_name_out,
        "d_out": raw["W_dec"].shape[-1] if is_transcoder else None,
        "apply_b_dec_to_input": not transcode,
        "model_name": run.get("model"),
        "hf_hook_name": folder.name,
    }
    fields.update(overrides)
    return build_sae(sae_config(cfg_path, **fields), tensors, source, device, dtype)
