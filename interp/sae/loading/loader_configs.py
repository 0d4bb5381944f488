"""The config dicts SAELens's loaders build for each format, from what they read (folder names,
repository ids, the files' own configs); no downloads here (``pretrained_sae_loaders`` fetches).
Keys and values are SAELens 6.45.3's, so ``load_sae_config_from_huggingface`` gives its dicts.

Example:
    >>> cfg = gemma_2_config("google/gemma-scope-2b-pt-res", "layer_3/width_16k/average_l0_59",
    ...                      "cpu")
    >>> cfg["hook_name"], cfg["d_in"], cfg["d_sae"], cfg["model_name"]
    ('blocks.3.hook_resid_post', 2304, 16384, 'gemma-2-2b')
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_GEMMA_2_WIDTHS = {
    "width_4k": 4096,
    "width_16k": 16384,
    "width_32k": 32768,
    "width_65k": 65536,
    "width_131k": 131072,
    "width_262k": 262144,
    "width_524k": 524288,
    "width_1m": 1048576,
}
# Order matters: "2b-it" before "2b".
_GEMMA_2_MODELS = {
    "2b-it": ("gemma-2-2b-it", 2304),
    "9b-it": ("gemma-2-9b-it", 3584),
    "27b-it": ("gemma-2-27b-it", 4608),
    "2b": ("gemma-2-2b", 2304),
    "9b": ("gemma-2-9b", 3584),
    "27b": ("gemma-2-27b", 4608),
}


def _with(cfg: dict[str, Any], device: str | None, overrides: dict[str, Any] | None) -> dict:
    if device is not None:
        cfg["device"] = device
    cfg.update(overrides or {})
    return cfg


def gemma_2_config(
    repo_id: str, folder_name: str, device: str | None, overrides: dict | None = None
) -> dict[str, Any]:
    """Gemma Scope 1 SAEs: width and layer from the folder, model and site from the repo."""
    d_sae = next((width for key, width in _GEMMA_2_WIDTHS.items() if key in folder_name), None)
    match = re.search(r"layer_(\d+)", folder_name)
    layer = int(match.group(1)) if match else None
    if layer is None:
        if "embedding" not in folder_name:
            raise ValueError("Layer not found in folder_name and no override provided.")
        layer = 0
    key = next((key for key in _GEMMA_2_MODELS if key in repo_id), None)
    if key is None:
        raise ValueError("Model name not found in repo_id.")
    model_name, d_in = _GEMMA_2_MODELS[key]
    if "res" in repo_id:
        embedding = "embedding" in folder_name
        hook_name = "hook_embed" if embedding else f"blocks.{layer}.hook_resid_post"
    elif "mlp" in repo_id:
        hook_name = f"blocks.{layer}.hook_mlp_out"
    elif "att" in repo_id:
        hook_name = f"blocks.{layer}.attn.hook_z"
        d_in = {"2b": 2048, "9b": 4096, "27b": 4608}.get(key, d_in)
    else:
        raise ValueError("Hook name not found in folder_name.")
    cfg = {
        "architecture": "jumprelu",
        "d_in": d_in,
        "d_sae": d_sae,
        "dtype": "float32",
        "model_name": model_name,
        "hook_name": hook_name,
        "hook_head_index": None,
        "activation_fn": "relu",
        "finetuning_scaling_factor": False,
        "sae_lens_training_version": None,
        "prepend_bos": True,
        "dataset_path": "monology/pile-uncopyrighted",
        "context_size": 1024,
        "dataset_trust_remote_code": True,
        "apply_b_dec_to_input": False,
        "normalize_activations": None,
    }
    return _with(cfg, device, overrides)


def gemma_2_transcoder_config(
    repo_id: str, folder_name: str, device: str | None, overrides: dict | None = None
) -> dict[str, Any]:
    """Gemma Scope 1 transcoders: ``ln2.hook_normalized`` -> ``hook_mlp_out``."""
    widths = {k: v for k, v in _GEMMA_2_WIDTHS.items() if k not in ("width_32k", "width_131k")}
    d_sae = next((width for key, width in widths.items() if key in folder_name), None)
    if d_sae is None:  # as SAELens: "width_Nk" read as N * 1024
        match = re.search(r"width_(\d+)k", folder_name)
        if match is None:
            raise ValueError(f"Could not extract dictionary size from folder name: {folder_name}")
        d_sae = int(match.group(1)) * 1024
    match = re.search(r"layer_(\d+)", folder_name) or re.search(r"layer_(\d+)", repo_id)
    if match is None:
        raise ValueError("Could not extract layer index")
    layer = int(match.group(1))
    key = next((key for key in _GEMMA_2_MODELS if key in repo_id), None)
    if key is None:
        raise ValueError(f"Could not determine model from repo_id: {repo_id}")
    model_name, d_model = _GEMMA_2_MODELS[key]
    return {
        "architecture": "jumprelu_transcoder",
        "d_in": d_model,
        "d_out": d_model,
        "d_sae": d_sae,
        "dtype": "float32",
        "device": device if device is not None else "cpu",
        "activation_fn": "relu",
        "normalize_activations": "none",
        "model_name": model_name,
        "hook_name": f"blocks.{layer}.ln2.hook_normalized",
        "hook_name_out": f"blocks.{layer}.hook_mlp_out",
        "hook_head_index": None,
        "hook_head_index_out": None,
        "prepend_bos": True,
        "dataset_path": "monology/pile-uncopyrighted",
        "context_size": 1024,
        "apply_b_dec_to_input": False,
        **(overrides or {}),
    }


def infer_gemma_3_raw_cfg_dict(repo_id: str, folder_name: str) -> dict[str, Any]:
    """A Gemma Scope 2 folder's ``config.json`` when the repository has none."""
    match = re.search(r"layer_(\d+)", folder_name)
    if match is None:
        raise ValueError(f"Could not extract layer number from folder_name: {folder_name}")
    layer = int(match.group(1))
    transcoder = "transcoder" in folder_name or "clt" in folder_name
    hook_out = None
    if transcoder:
        hook_in = f"model.layers.{layer}.pre_feedforward_layernorm.output"
        hook_out = f"model.layers.{layer}.post_feedforward_layernorm.output"
    elif "resid_post" in folder_name:
        hook_in = f"model.layers.{layer}.output"
    elif "attn_out" in folder_name:
        hook_in = f"model.layers.{layer}.self_attn.o_proj.input"
    elif "mlp_out" in folder_name:
        hook_in = f"model.layers.{layer}.post_feedforward_layernorm.output"
    else:
        raise ValueError(f"Could not infer hook type from folder_name: {folder_name}")
    cfg: dict[str, Any] = {
        "architecture": "jump_relu",
        "model_name": repo_id.replace("gemma-scope-2", "gemma-3"),
        "hf_hook_point_in": hook_in,
    }
    if transcoder:
        cfg["affine_connection"] = "affine" in folder_name
    if hook_out is not None:
        cfg["hf_hook_point_out"] = hook_out
    return cfg


def gemma_3_config(
    raw: dict[str, Any],
    folder_name: str,
    shapes: dict[str, list[int]],
    device: str | None,
    overrides: dict | None = None,
) -> dict[str, Any]:
    """Gemma Scope 2 SAEs and transcoders, from the raw config and the tensors' shapes."""
    if raw.get("architecture") != "jump_relu":
        raise ValueError(f"Unexpected architecture in Gemma 3 config: {raw.get('architecture')}")
    match = re.search(r"layer_(\d+)", folder_name)
    if match is None:
        raise ValueError(f"Could not extract layer number from folder_name: {folder_name}")
    layer = int(match.group(1))
    transcoder = "transcoder" in folder_name or "clt" in folder_name
    hook_name_out = None
    if "resid_post" in folder_name:
        hook_name = f"blocks.{layer}.hook_resid_post"
    elif "attn_out" in folder_name:
        hook_name = f"blocks.{layer}.attn.hook_z"
    elif "mlp_out" in folder_name:
        hook_name = f"blocks.{layer}.hook_mlp_out"
    elif transcoder:
        hook_name, hook_name_out = f"blocks.{layer}.hook_mlp_in", f"blocks.{layer}.hook_mlp_out"
    else:
        raise ValueError("Hook name not found in folder_name.")
    d_in, d_sae = shapes["w_enc"]
    model_name = raw["model_name"]
    if "google" not in model_name:
        model_name = "google/" + model_name
    model_name = model_name.replace("-v3", "-3")
    if "270m" in model_name:  # the 270m model's hub name has no -pt
        model_name = model_name.replace("-pt", "")
    architecture = "jumprelu"
    if transcoder:
        skip = raw.get("affine_connection", False)
        architecture = "jumprelu_skip_transcoder" if skip else "jumprelu_transcoder"
    cfg: dict[str, Any] = {
        "architecture": architecture,
        "d_in": d_in,
        "d_sae": d_sae,
        "dtype": "float32",
        "model_name": model_name,
        "hook_name": hook_name,
        "hook_head_index": None,
        "finetuning_scaling_factor": False,
        "sae_lens_training_version": None,
        "prepend_bos": True,
        "dataset_path": "monology/pile-uncopyrighted",
        "context_size": 1024,
        "apply_b_dec_to_input": False,
        "normalize_activations": "none",
        "reshape_activations": "none",
        "hf_hook_name": raw.get("hf_hook_point_in"),
    }
    if hook_name_out is not None:
        cfg["hook_name_out"] = hook_name_out
        cfg["hf_hook_name_out"] = raw.get("hf_hook_point_out")
    if transcoder:
        cfg["d_out"] = shapes["w_dec"][-1]
    return _with(cfg, device, overrides)


def _llama_scope_common() -> dict[str, Any]:
    return {
        "architecture": "jumprelu",
        "model_name": "meta-llama/Llama-3.1-8B",
        "hook_head_index": None,
        "activation_fn": "relu",
        "finetuning_scaling_factor": False,
        "sae_lens_training_version": None,
        "prepend_bos": True,
        "dataset_path": "cerebras/SlimPajama-627B",
        "context_size": 1024,
        "dataset_trust_remote_code": True,
        "apply_b_dec_to_input": False,
        "normalize_activations": "expected_average_only_in",
    }


def llama_scope_config(
    hyperparams: dict[str, Any], device: str | None, overrides: dict | None = None
) -> dict[str, Any]:
    """Llama Scope: the scalar threshold scaled by the input norm factor SAELens folds in."""
    d_in = hyperparams["d_model"]
    norm_scaling_factor = d_in**0.5 / hyperparams["dataset_average_activation_norm"]["in"]
    common = _llama_scope_common()
    cfg = {
        "architecture": "jumprelu",
        "jump_relu_threshold": hyperparams["jump_relu_threshold"] * norm_scaling_factor,
        "d_in": d_in,
        "d_sae": hyperparams["d_sae"],
        "dtype": "bfloat16",
        "model_name": common.pop("model_name"),
        "hook_name": hyperparams["hook_point_in"],
        **common,
    }
    return _with(cfg, device, overrides)


def llama_scope_r1_distill_config(
    hf_config: dict[str, Any], device: str, overrides: dict | None = None
) -> dict[str, Any]:
    """Llama Scope R1 Distill (``config.json``: d_model, expansion_factor, hook_point_in)."""
    d_in = hf_config["d_model"]
    common = _llama_scope_common()
    return {
        "architecture": "jumprelu",
        "d_in": d_in,
        "d_sae": d_in * hf_config["expansion_factor"],
        "dtype": "float32",
        "device": device,
        "model_name": common.pop("model_name"),
        "hook_name": hf_config["hook_point_in"],
        **common,
        **(overrides or {}),
    }


def deepseek_r1_config(
    folder_name: str, device: str, overrides: dict | None = None
) -> dict[str, Any]:
    """DeepSeek-R1-Distill-Llama-8B SAEs (the layer from ``...-l19.pt``)."""
    match = re.search(r"l(\d+)", folder_name)
    if match is None:
        raise ValueError(f"Could not find layer number in filename: {folder_name}")
    return {
        "architecture": "standard",
        "d_in": 4096,
        "d_sae": 4096 * 16,
        "dtype": "bfloat16",
        "context_size": 1024,
        "model_name": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        "hook_name": f"blocks.{int(match.group(1))}.hook_resid_post",
        "hook_head_index": None,
        "prepend_bos": True,
        "dataset_path": "lmsys/lmsys-chat-1m",
        "dataset_trust_remote_code": True,
        "sae_lens_training_version": None,
        "activation_fn": "relu",
        "normalize_activations": "none",
        "device": device,
        "apply_b_dec_to_input": False,
        "finetuning_scaling_factor": False,
        **(overrides or {}),
    }


def connor_rob_hook_z_config(
    old: dict[str, Any], device: str | None, overrides: dict | None = None
) -> dict[str, Any]:
    """Kissane & Krzyzanowski's GPT-2 ``hook_z`` SAEs (their ``*_cfg.json``)."""
    return {
        "architecture": "standard",
        "d_in": old["act_size"],
        "d_sae": old["dict_size"],
        "dtype": "float32",
        "device": device if device is not None else "cpu",
        "model_name": "gpt2-small",
        "hook_name": old["act_name"],
        "hook_head_index": None,
        "activation_fn": "relu",
        "apply_b_dec_to_input": True,
        "finetuning_scaling_factor": False,
        "sae_lens_training_version": None,
        "prepend_bos": True,
        "dataset_path": "Skylion007/openwebtext",
        "context_size": 128,
        "normalize_activations": "none",
        "dataset_trust_remote_code": True,
        "reshape_activations": "hook_z",
        **(overrides or {}),
    }


def sparsify_config(
    path: Path,
    old: dict[str, Any],
    run: dict[str, Any],
    device: str | None,
    overrides: dict | None = None,
) -> dict[str, Any]:
    """EleutherAI sparsify (``cfg.json``; the run's ``config.json`` one folder up, if any)."""
    if path.name == "embed_tokens":
        hook_name, layer = "hook_embed", 0
    else:
        match = re.search(r"layers[._](\d+)", path.name)
        if match is None:
            raise ValueError(f"Unrecognized Sparsify folder: {path.name}")
        layer = int(match.group(1))
        hook_name = f"blocks.{layer}.hook_resid_post"
    d_sae = old.get("num_latents") or old["d_in"] * old["expansion_factor"]
    cfg: dict[str, Any] = {
        "architecture": "standard",
        "d_in": old["d_in"],
        "d_sae": d_sae,
        "dtype": "bfloat16",
        "device": device or "cpu",
        "model_name": run.get("model", path.parts[-2] if len(path.parts) > 1 else None),
        "hook_name": hook_name,
        "hook_layer": layer,
        "hook_head_index": None,
        "activation_fn_str": "topk",
        "activation_fn_kwargs": {"k": old["k"], "signed": old.get("signed", False)},
        "apply_b_dec_to_input": not old.get("normalize_decoder", False),
        "dataset_path": run.get("dataset", "togethercomputer/RedPajama-Data-1T-Sample"),
        "context_size": run.get("ctx_len", 2048),
        "finetuning_scaling_factor": False,
        "sae_lens_training_version": None,
        "prepend_bos": True,
        "dataset_trust_remote_code": True,
        "normalize_activations": "none",
        "neuronpedia_id": None,
    }
    cfg.update(overrides or {})
    return cfg


_GOODFIRE = {
    ("Goodfire/Llama-3.3-70B-Instruct-SAE-l50", "Llama-3.3-70B-Instruct-SAE-l50.pt"): (
        8192,
        "meta-llama/Llama-3.3-70B-Instruct",
        50,
    ),
    ("Goodfire/Llama-3.1-8B-Instruct-SAE-l19", "Llama-3.1-8B-Instruct-SAE-l19.pth"): (
        4096,
        "meta-llama/Llama-3.1-8B-Instruct",
        19,
    ),
}


def goodfire_config(
    repo_id: str, folder_name: str, device: str | None, overrides: dict | None = None
) -> dict[str, Any]:
    """Goodfire's two Llama SAEs (known by repository and file name)."""
    if (repo_id, folder_name) not in _GOODFIRE:
        raise ValueError(f"Unsupported Goodfire SAE: {repo_id}/{folder_name}")
    d_in, model_name, layer = _GOODFIRE[(repo_id, folder_name)]
    cfg: dict[str, Any] = {
        "architecture": "standard",
        "d_in": d_in,
        "d_sae": 65536,
        "model_name": model_name,
        "hook_name": f"blocks.{layer}.hook_resid_post",
        "hook_head_index": None,
        "dataset_path": "lmsys/lmsys-chat-1m",
        "apply_b_dec_to_input": False,
    }
    return _with(cfg, device, overrides)


# Qwen Scope repository names' model part -> (the model's hub id, its d_model).
QWEN_SCOPE_MODEL_INFO: dict[str, tuple[str, int]] = {
    "Qwen3-1.7B-Base": ("Qwen/Qwen3-1.7B-Base", 2048),
    "Qwen3-8B-Base": ("Qwen/Qwen3-8B-Base", 4096),
    "Qwen3-30B-A3B-Base": ("Qwen/Qwen3-30B-A3B-Base", 2048),
    "Qwen3.5-2B-Base": ("Qwen/Qwen3.5-2B-Base", 2048),
    "Qwen3.5-9B-Base": ("Qwen/Qwen3.5-9B-Base", 4096),
    "Qwen3.5-27B": ("Qwen/Qwen3.5-27B", 5120),
    "Qwen3.5-35B-A3B-Base": ("Qwen/Qwen3.5-35B-A3B-Base", 2048),
}


def qwen_scope_config(
    repo_id: str, folder_name: str, device: str, overrides: dict | None = None
) -> dict[str, Any]:
    """Qwen Scope TopK SAEs: ``Qwen/SAE-Res-{model}-W{N}K-L0_{k}``, ``layer{n}.sae.pt``."""
    layer = re.search(r"layer(\d+)\.sae\.pt", folder_name)
    if layer is None:
        raise ValueError(f"Could not find layer number in filename: {folder_name}")
    match = re.search(r"SAE-Res-(.+)-W(\d+)K-L0_(\d+)", repo_id)
    if match is None:
        raise ValueError(f"Could not parse Qwen Scope repo_id: {repo_id}")
    model_key, d_sae, k = match.group(1), int(match.group(2)) * 1024, int(match.group(3))
    if model_key not in QWEN_SCOPE_MODEL_INFO:
        raise ValueError(
            f"Unknown Qwen Scope base model: {model_key!r}. "
            f"Known models: {sorted(QWEN_SCOPE_MODEL_INFO)}"
        )
    model_name, d_in = QWEN_SCOPE_MODEL_INFO[model_key]
    n = int(layer.group(1))
    return {
        "architecture": "topk",
        "activation_fn": "topk",
        "activation_fn_kwargs": {"k": k},
        "d_in": d_in,
        "d_sae": d_sae,
        "dtype": "float32",
        "context_size": 1024,
        "model_name": model_name,
        "hook_name": f"blocks.{n}.hook_resid_post",
        "hf_hook_name": f"model.layers.{n}",
        "hook_head_index": None,
        "prepend_bos": True,
        "dataset_path": None,  # Qwen's pretraining data is not public
        "sae_lens_training_version": None,
        "normalize_activations": "none",
        "device": device,
        "apply_b_dec_to_input": False,
        "finetuning_scaling_factor": False,
        **(overrides or {}),
    }


def mwhanna_transcoder_config(
    layer: int,
    wandb: dict[str, Any],
    model_name: str,
    device: str | None,
    overrides: dict | None = None,
) -> dict[str, Any]:
    """mwhanna's transcoders: ``mlp.hook_in`` -> ``hook_mlp_out`` (from the W&B config)."""
    return {
        "architecture": "transcoder",
        "d_in": wandb["d_model"]["value"],
        "d_out": wandb["d_model"]["value"],
        "d_sae": wandb["d_feature"]["value"],
        "dtype": "float32",
        "device": device if device is not None else "cpu",
        "activation_fn": "relu",
        "normalize_activations": "none",
        "model_name": model_name,
        "hook_name": f"blocks.{layer}.mlp.hook_in",
        "hook_name_out": f"blocks.{layer}.hook_mlp_out",
        "dataset_path": "monology/pile-uncopyrighted",
        "context_size": wandb["batch_size"]["value"],
        "apply_b_dec_to_input": False,
        "model_from_pretrained_kwargs": {"fold_ln": False},
        **(overrides or {}),
    }


def mntss_clt_layer_config(
    layer: str,
    info: dict[str, Any],
    shapes: dict[str, list[int]],
    device: str | None,
    overrides: dict | None = None,
) -> dict[str, Any]:
    """A cross-layer transcoder's layer (its ``config.yaml``, its encoder file's shapes)."""
    d_in, d_sae = shapes[f"b_dec_{layer}"][0], shapes[f"b_enc_{layer}"][0]
    return {
        "architecture": "transcoder",
        "d_in": d_in,
        "d_out": d_in,
        "d_sae": d_sae,
        "dtype": "float32",
        "device": device if device is not None else "cpu",
        "activation_fn": "relu",
        "normalize_activations": "none",
        "model_name": info["model_name"],
        "hook_name": f"blocks.{layer}.{info['feature_input_hook']}",
        "hook_name_out": f"blocks.{layer}.{info['feature_output_hook']}",
        "apply_b_dec_to_input": False,
        "model_from_pretrained_kwargs": {"fold_ln": False},
        **(overrides or {}),
    }
