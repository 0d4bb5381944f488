"""Reading every public SAE layout into one ``SAE``, and writing SAELens's.

The layout is detected from the files in the folder:

- ``cfg.json`` + ``sae_weights.safetensors``: SAELens (6.x ``metadata``, or pre-6.0 flat);
- ``params.npz``: Gemma Scope 1 (JumpReLU; hook from the path: ``-res``/``-mlp``/``-att``
  and ``layer_N``);
- ``params.safetensors`` [+ ``config.json``]: Gemma Scope 2 (``w_enc``..., HF hook paths);
- ``cfg.json`` + ``sae.safetensors``: EleutherAI sparsify (TopK; the folder is an HF module);
- ``hyperparams.json`` + ``checkpoints/final.safetensors``: Llama Scope (input-norm scaling).

Hugging Face module paths become our hook names (``layers.3`` -> ``blocks.3.hook_resid_post``).
Every tensor is checked for its name, shape and finite values; errors name the file.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from interp.sae.sae import ARCHITECTURES, SAE, SAEConfig, dtype_to_str, str_to_dtype

SAELENS_CFG, SAELENS_WEIGHTS = "cfg.json", "sae_weights.safetensors"
_CONFIG_FIELDS = {
    "d_in",
    "d_sae",
    "architecture",
    "hook_name",
    "hook_name_out",
    "d_out",
    "hook_head_index",
    "k",
    "rescale_acts_by_decoder_norm",
    "apply_b_dec_to_input",
    "normalize_activations",
    "reshape_activations",
    "dtype",
    "device",
    "model_name",
}


class SAEFormatError(ValueError):
    """A folder that is not a readable SAE; the message names the file and the field."""


# --------------------------------------------------------------------------- helpers
def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SAEFormatError(f"{path}: not readable JSON ({error}).") from None
    if not isinstance(data, dict):
        raise SAEFormatError(f"{path}: expected a JSON object, got {type(data).__name__}.")
    return data


def _read_safetensors(path: Path) -> dict[str, Tensor]:
    if not path.is_file():
        raise SAEFormatError(f"{path}: missing.")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, RuntimeError) as error:
        raise SAEFormatError(
            f"{path}: not a readable safetensors file, truncated or corrupt ({error})."
        ) from None


def _read_npz(path: Path) -> dict[str, Tensor]:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: torch.from_numpy(np.array(data[key])) for key in data.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise SAEFormatError(
            f"{path}: not a readable .npz file, truncated or corrupt ({error})."
        ) from None


def hf_module_to_hook(path: str, side: str = "output") -> str | None:
    """Our hook name for a Hugging Face module path (``model.layers.3.mlp`` ->
    ``blocks.3.hook_mlp_out``); ``side="input"`` names the hook holding the module's input.
    None when the path is not one of the known places."""
    path = re.sub(r"^(model\.|transformer\.|gpt_neox\.|model\.language_model\.)+", "", path)
    if path.endswith((".output", ".input")):
        path, _, side = path.rpartition(".")
    if path in ("embed_tokens", "wte", "embed_in"):
        return "hook_embed"
    match = re.fullmatch(r"(?:layers|h)[._](\d+)(?:\.(.+))?", path)
    if match is None:
        return None
    layer, rest = match.group(1), match.group(2) or ""
    table_out = {
        "": "hook_resid_post",
        "mlp": "hook_mlp_out",
        "self_attn": "hook_attn_out",
        "attn": "hook_attn_out",
        "attention": "hook_attn_out",
        "post_feedforward_layernorm": "hook_mlp_out",
        "pre_feedforward_layernorm": "hook_mlp_in",
    }
    table_in = {
        "": "hook_resid_pre",
        "mlp": "hook_mlp_in",
        "self_attn.o_proj": "attn.hook_z",
        "attn.c_proj": "attn.hook_z",
        "attention.dense": "attn.hook_z",
    }
    hook = (table_in if side == "input" else table_out).get(rest)
    return f"blocks.{layer}.{hook}" if hook else None


def _hook_from_hf(module: str, side: str, where: Path) -> str:
    hook = hf_module_to_hook(module, side)
    if hook is None:
        raise SAEFormatError(
            f"{where}: cannot translate the Hugging Face module path {module!r} ({side}) to a "
            "hook name; pass hook_name= (and hook_name_out= for a transcoder)."
        )
    return hook


def _build(
    cfg: SAEConfig,
    tensors: dict[str, Tensor],
    source: Path,
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
) -> SAE:
    """An SAE from ``cfg`` and SAELens-named tensors, after checking names, shapes, values."""
    if dtype is not None:
        cfg.dtype = dtype_to_str(str_to_dtype(dtype))
    cfg.device = "cpu"
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
        with torch.no_grad():
            param.copy_(tensor.to(param.dtype))
    if device is not None:
        sae.to(device)
    return sae


def _config(source: Path, **fields: Any) -> SAEConfig:
    known = {key: value for key, value in fields.items() if key in _CONFIG_FIELDS}
    extra = {key: value for key, value in fields.items() if key not in _CONFIG_FIELDS}
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


# ------------------------------------------------------------------------- SAELens
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


def load_saelens(folder: Path, device: Any = None, dtype: Any = None, **overrides: Any) -> SAE:
    cfg_path = folder / SAELENS_CFG
    raw = _read_json(cfg_path)
    if _is_pre_6(raw):
        fields = _pre_6_config(raw)
    else:
        fields = {key: value for key, value in raw.items() if key != "metadata"}
        fields.update(raw.get("metadata") or {})
    fields.update(overrides)
    architecture = fields.get("architecture")
    if architecture not in ARCHITECTURES:
        raise SAEFormatError(
            f"{cfg_path}: architecture {architecture!r} is not supported; supported: "
            f"{sorted(ARCHITECTURES)}."
        )
    for required in ("d_in", "d_sae"):
        if required not in fields:
            raise SAEFormatError(f"{cfg_path}: missing field {required!r}.")
    tensors = _read_safetensors(folder / SAELENS_WEIGHTS)
    if "scaling_factor" in tensors:  # legacy: multiplies the features before the decoder
        factor = tensors.pop("scaling_factor")
        tensors["W_dec"] = tensors["W_dec"] * factor[:, None]
    scale = fields.pop("norm_scaling_factor", None)
    cfg = _config(cfg_path, **fields)
    if cfg.normalize_activations == "expected_average_only_in" and scale is not None:
        fold_input_scale(tensors, scale, scale)
        cfg.normalize_activations = "none"
    return _build(cfg, tensors, folder / SAELENS_WEIGHTS, device, dtype)


def save_saelens(sae: SAE, path: str | Path) -> Path:
    """Write ``sae`` as a SAELens 6.x folder; returns the folder."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    state = {name: param.detach().cpu().contiguous() for name, param in sae.named_parameters()}
    save_file(state, str(folder / SAELENS_WEIGHTS))
    (folder / SAELENS_CFG).write_text(json.dumps(sae.cfg.to_dict(), indent=2))
    return folder


# ------------------------------------------------------------------- Gemma Scope 1
_GEMMA_2_MODELS = {"2b": "gemma-2-2b", "9b": "gemma-2-9b", "27b": "gemma-2-27b"}


def load_gemma_scope_1(
    folder: Path, device: Any = None, dtype: Any = None, **overrides: Any
) -> SAE:
    source = folder / "params.npz"
    tensors = {}
    for key, value in _read_npz(source).items():
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
    return _build(_config(source, **fields), tensors, source, device, dtype)


# ------------------------------------------------------------------- Gemma Scope 2
def _gemma_scope_2_hooks(folder: Path, config: dict[str, Any]) -> tuple[str, str | None]:
    hook_in, hook_out = config.get("hf_hook_point_in"), config.get("hf_hook_point_out")
    if hook_in is not None:
        name_in = _hook_from_hf(hook_in, "output", folder / "config.json")
        name_out = _hook_from_hf(hook_out, "output", folder / "config.json") if hook_out else None
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
    config = _read_json(config_path) if config_path.is_file() else {}
    if config.get("architecture", "jump_relu") != "jump_relu":
        raise SAEFormatError(
            f"{config_path}: architecture {config['architecture']!r} is not supported "
            "(Gemma Scope 2 SAEs are 'jump_relu')."
        )
    raw = _read_safetensors(source)
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
    return _build(_config(source, **fields), tensors, source, device, dtype)


# ------------------------------------------------------------------------ sparsify
def load_sparsify(folder: Path, device: Any = None, dtype: Any = None, **overrides: Any) -> SAE:
    cfg_path, source = folder / "cfg.json", folder / "sae.safetensors"
    raw_cfg = _read_json(cfg_path)
    activation = raw_cfg.get("activation", "topk")
    if activation != "topk":
        raise SAEFormatError(
            f"{cfg_path}: activation {activation!r} is not supported (sparsify SAEs load "
            "with activation 'topk')."
        )
    if "k" not in raw_cfg:
        raise SAEFormatError(f"{cfg_path}: missing field 'k'.")
    raw = _read_safetensors(source)
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
        hook_name = _hook_from_hf(folder.name, side, folder)
        if transcode or skip:
            hook_name_out = _hook_from_hf(folder.name, "output", folder)
    run_config = folder.parent / "config.json"
    run = _read_json(run_config) if run_config.is_file() else {}
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
    return _build(_config(cfg_path, **fields), tensors, source, device, dtype)


# ----------------------------------------------------------------------- Llama Scope
def load_llama_scope(folder: Path, device: Any = None, dtype: Any = None, **overrides: Any) -> SAE:
    hp_path, source = folder / "hyperparams.json", folder / "checkpoints" / "final.safetensors"
    hp = _read_json(hp_path)
    for name in ("d_model", "d_sae", "hook_point_in", "jump_relu_threshold"):
        if name not in hp:
            raise SAEFormatError(f"{hp_path}: missing field {name!r}.")
    raw = _read_safetensors(source)
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
    return _build(_config(hp_path, **fields), tensors, source, device, dtype)


# --------------------------------------------------------------------------- entry
def detect_format(folder: Path) -> str:
    """``saelens``, ``gemma_scope_1``, ``gemma_scope_2``, ``sparsify`` or ``llama_scope``."""
    if not folder.is_dir():
        raise SAEFormatError(f"{folder}: no such folder.")
    has = {path.name for path in folder.iterdir()}
    if SAELENS_CFG in has and SAELENS_WEIGHTS in has:
        return "saelens"
    if "params.npz" in has:
        return "gemma_scope_1"
    if "params.safetensors" in has:
        return "gemma_scope_2"
    if "cfg.json" in has and "sae.safetensors" in has:
        return "sparsify"
    if "hyperparams.json" in has:
        return "llama_scope"
    raise SAEFormatError(
        f"{folder}: no SAE found (it holds {sorted(has)[:10]}); expected cfg.json + "
        "sae_weights.safetensors (SAELens), params.npz (Gemma Scope), params.safetensors "
        "(Gemma Scope 2), cfg.json + sae.safetensors (sparsify) or hyperparams.json + "
        "checkpoints/final.safetensors (Llama Scope)."
    )


LOADERS = {
    "saelens": load_saelens,
    "gemma_scope_1": load_gemma_scope_1,
    "gemma_scope_2": load_gemma_scope_2,
    "sparsify": load_sparsify,
    "llama_scope": load_llama_scope,
}


def load_sae(
    path: str | Path,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    **overrides: Any,
) -> SAE:
    """Load the SAE in folder ``path``, whatever its format (see this module's table).

    ``overrides`` set config fields the files lack or get wrong (``hook_name=...``).

    Example:
        >>> sae = load_sae("gemma-scope-2b-pt-res/layer_3/width_16k/average_l0_59")
        >>> sae.cfg.hook_name
        'blocks.3.hook_resid_post'
    """
    folder = Path(path)
    return LOADERS[detect_format(folder)](folder, device=device, dtype=dtype, **overrides)


def load_from_hub(
    repo_id: str,
    subfolder: str | None = None,
    device: str | torch.device | None = None,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    **overrides: Any,
) -> SAE:
    """Fetch ``repo_id``'s ``subfolder`` from the Hugging Face hub (only the cache when it is
    already there, so it works offline) and load it with ``load_sae``."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    patterns = [f"{subfolder.strip('/')}/*", f"{subfolder.strip('/')}/checkpoints/*"]
    patterns = patterns if subfolder else None
    kwargs = {"repo_id": repo_id, "revision": revision, "allow_patterns": patterns}
    kwargs["cache_dir"] = cache_dir
    try:
        root = snapshot_download(**kwargs, local_files_only=True)
        folder = Path(root) / (subfolder or "")
        detect_format(folder)
    except (LocalEntryNotFoundError, SAEFormatError):
        root = snapshot_download(**kwargs)
    return load_sae(Path(root) / (subfolder or ""), device=device, **overrides)
