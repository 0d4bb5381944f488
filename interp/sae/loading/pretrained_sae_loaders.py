"""SAELens's loaders by format, under its names (``sae_lens.loading.pretrained_sae_loaders``):
each takes ``(repo_id, folder_name, device, force_download, cfg_overrides)`` and returns
SAELens's ``(config dict, state dict, log sparsity or None)``, with its keys and tensor names.

Files come from the Hugging Face cache first (so a cached SAE loads offline), else from the hub.
Formats read: SAELens (``sae_lens``), Gemma Scope 1 (``gemma_2``, ``gemma_2_transcoder``), Gemma
Scope 2 (``gemma_3``), Llama Scope (``llama_scope``, ``llama_scope_r1_distill``), sparsify,
GPT-2 ``hook_z`` (``connor_rob_hook_z``), DeepSeek R1, Goodfire, Qwen Scope, and
circuit-tracer's transcoders (``mwhanna_transcoder``, ``mntss_clt_layer_transcoder``) and
TemporalSAE folders (``temporal``); most config dicts are built in ``loader_configs``. The
loader of SAELens's remaining format (``dictionary_learning_1``) exists under its names and
raises ``UnsupportedSAEFormat`` saying so.

One flat module, as SAELens's, and longer than our files usually are, on purpose: its users and
tests patch its names (``hf_hub_download``, ``load_safetensors_weights``,
``get_safetensors_tensor_shapes``, the ``get_*_config_from_hf`` getters), and every loader must
find the patched name where SAELens's would, in this module's namespace at call time.

Example:
    >>> import tempfile
    >>> folder = interp.load_sae("shakespeare-char-resid-l1").save(tempfile.mkdtemp())
    >>> cfg, state = sae_lens_disk_loader(folder)
    >>> cfg["metadata"]["hook_name"], sorted(state)
    ('blocks.1.hook_resid_post', ['W_dec', 'W_enc', 'b_dec', 'b_enc'])
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import yaml
from huggingface_hub import hf_hub_download, try_to_load_from_cache
from huggingface_hub.file_download import _CACHED_NO_EXIST
from huggingface_hub.utils import EntryNotFoundError
from safetensors import safe_open
from torch import Tensor

from interp.sae.formats.files import read_json, read_npz, read_safetensors
from interp.sae.loading import loader_configs
from interp.sae.loading.config_dicts import (
    LLM_METADATA_KEYS,
    handle_config_defaulting,
    handle_pre_6_0_config,
)
from interp.sae.loading.pretrained_saes_directory import (
    get_config_overrides,
    get_pretrained_saes_directory,
    get_repo_id_and_folder_name,
)
from interp.sae.sae import str_to_dtype

__all__ = [
    "LLM_METADATA_KEYS",
    "NAMED_PRETRAINED_SAE_CONFIG_GETTERS",
    "NAMED_PRETRAINED_SAE_LOADERS",
    "handle_config_defaulting",
    "handle_pre_6_0_config",
    "load_sae_config_from_huggingface",
    "read_sae_components_from_disk",
]

SAE_CFG_FILENAME, SAE_WEIGHTS_FILENAME = "cfg.json", "sae_weights.safetensors"
SPARSITY_FILENAME, SPARSIFY_WEIGHTS_FILENAME = "sparsity.safetensors", "sae.safetensors"
LoaderResult = tuple[dict[str, Any], dict[str, Tensor], Tensor | None]


class PretrainedSaeHuggingfaceLoader(Protocol):
    def __call__(
        self,
        repo_id: str,
        folder_name: str,
        device: str,
        force_download: bool,
        cfg_overrides: dict[str, Any] | None,
    ) -> LoaderResult: ...


class PretrainedSaeConfigHuggingfaceLoader(Protocol):
    def __call__(
        self,
        repo_id: str,
        folder_name: str,
        device: str,
        force_download: bool,
        cfg_overrides: dict[str, Any] | None,
    ) -> dict[str, Any]: ...


class PretrainedSaeDiskLoader(Protocol):
    def __call__(
        self, path: str | Path, device: str, cfg_overrides: dict[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Tensor]]: ...


class PretrainedSaeConfigDiskLoader(Protocol):
    def __call__(
        self, path: str | Path, device: str | None, cfg_overrides: dict[str, Any] | None
    ) -> dict[str, Any]: ...


class UnsupportedSAEFormat(NotImplementedError):
    """A SAELens format interp does not read (the message says which and what to do)."""


# ----------------------------------------------------------------------------- files
def _cached(repo_id: str, filename: str) -> Any:
    """The cached path of ``filename`` (str), ``_CACHED_NO_EXIST`` or None."""
    return try_to_load_from_cache(repo_id, filename)


def hub_file(
    repo_id: str,
    filename: str,
    subfolder: str | None = None,
    force_download: bool = False,
    revision: str | None = None,
) -> str:
    """The local path of one hub file: from the Hugging Face cache when it is there (no
    network), else ``hf_hub_download``."""
    full = f"{subfolder}/{filename}" if subfolder else filename
    if not force_download and revision is None:
        cached = _cached(repo_id, full)
        if isinstance(cached, str):
            return cached
    kwargs: dict[str, Any] = {}
    if subfolder is not None:
        kwargs["subfolder"] = subfolder
    if revision is not None:
        kwargs["revision"] = revision
    return hf_hub_download(repo_id, filename, **kwargs, force_download=force_download)


def optional_hub_file(
    repo_id: str, filename: str, force_download: bool, beside: str | None = None
) -> str | None:
    """A file the repository may lack (None then). When ``beside`` (a file of the same SAE)
    came from the cache, an uncached optional file is taken as absent: no network."""
    if not force_download:
        cached = _cached(repo_id, filename)
        if isinstance(cached, str):
            return cached
        if cached is _CACHED_NO_EXIST:
            return None
        if beside is not None and _is_in_cache(beside):
            return None
    try:
        return hf_hub_download(repo_id, filename, force_download=force_download)
    except EntryNotFoundError:
        return None


def _is_in_cache(path: str) -> bool:
    from huggingface_hub import constants

    return Path(path).resolve().is_relative_to(Path(constants.HF_HUB_CACHE).resolve())


def load_safetensors_weights(
    path: str | Path, device: str = "cpu", dtype: torch.dtype | str | None = None
) -> dict[str, Tensor]:
    """The tensors of a safetensors file, cast to ``dtype`` when given."""
    tensors = read_safetensors(Path(path))
    dtype = str_to_dtype(dtype) if dtype is not None else None
    return {key: value.to(device=device, dtype=dtype) for key, value in tensors.items()}


def get_safetensors_tensor_shapes(repo_id: str, filename: str) -> dict[str, list[int]]:
    """The tensors' shapes in a hub safetensors file (read from the cached or fetched file)."""
    path = hub_file(repo_id, filename)
    with safe_open(path, framework="pt") as handle:
        return {key: list(handle.get_slice(key).get_shape()) for key in handle.keys()}  # noqa: SIM118


def read_sae_components_from_disk(
    cfg_dict: dict[str, Any],
    weight_path: str | Path,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """The state dict in ``weight_path`` (cast to ``dtype``, default ``cfg_dict["dtype"]``); a
    legacy ``scaling_factor`` is dropped when all ones, else renamed
    ``finetuning_scaling_factor`` (which ``cfg_dict["finetuning_scaling_factor"]`` must allow)."""
    dtype = dtype if dtype is not None else str_to_dtype(cfg_dict["dtype"])
    state_dict = load_safetensors_weights(weight_path, device=device, dtype=dtype)
    _handle_scaling_factor(cfg_dict, state_dict)
    return cfg_dict, state_dict


def _handle_scaling_factor(cfg_dict: dict[str, Any], state_dict: dict[str, Tensor]) -> None:
    if "scaling_factor" not in state_dict:
        cfg_dict["finetuning_scaling_factor"] = False
        return
    factor = state_dict.pop("scaling_factor")
    if torch.allclose(factor, torch.ones_like(factor)):
        cfg_dict["finetuning_scaling_factor"] = False
    elif not cfg_dict.get("finetuning_scaling_factor"):
        raise ValueError("Scaling factor is present but finetuning_scaling_factor is False.")
    else:
        state_dict["finetuning_scaling_factor"] = factor


# ------------------------------------------------------------------------- SAELens
def get_sae_lens_config_from_disk(
    path: str | Path, device: str | None = None, cfg_overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    cfg_dict = read_json(Path(path) / SAE_CFG_FILENAME)
    if device is not None:
        cfg_dict["device"] = device
    cfg_dict.update(cfg_overrides or {})
    return cfg_dict


def get_sae_lens_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str | None = None,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cfg_path = hub_file(repo_id, f"{folder_name}/{SAE_CFG_FILENAME}", force_download=force_download)
    return get_sae_lens_config_from_disk(Path(cfg_path).parent, device, cfg_overrides)


def sae_lens_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """A SAELens folder (``cfg.json``, ``sae_weights.safetensors`` [, ``sparsity.safetensors``])."""
    cfg_dict = get_sae_lens_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    weights = f"{folder_name}/{SAE_WEIGHTS_FILENAME}"
    sae_path = hub_file(repo_id, weights, force_download=force_download)
    sparsity_name = f"{folder_name}/{SPARSITY_FILENAME}"
    sparsity_path = optional_hub_file(repo_id, sparsity_name, force_download, beside=sae_path)
    cfg_dict, state_dict = read_sae_components_from_disk(cfg_dict, sae_path, device=device)
    log_sparsity = None
    if sparsity_path is not None:
        log_sparsity = read_safetensors(Path(sparsity_path))["sparsity"].to(device)
    return cfg_dict, state_dict, log_sparsity


def sae_lens_disk_loader(
    path: str | Path, device: str = "cpu", cfg_overrides: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """A SAELens folder on disk: ``(config dict, state dict)``."""
    cfg_dict = get_sae_lens_config_from_disk(path, device, cfg_overrides)
    return read_sae_components_from_disk(cfg_dict, Path(path) / SAE_WEIGHTS_FILENAME, device)


# ----------------------------------------------------------------- GPT-2 hook_z (.pt)
def get_connor_rob_hook_z_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str | None = None,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    path = hub_file(
        repo_id, folder_name.split(".pt")[0] + "_cfg.json", force_download=force_download
    )
    return loader_configs.connor_rob_hook_z_config(read_json(Path(path)), device, cfg_overrides)


def _torch_state(path: str, device: str) -> dict[str, Tensor]:
    # weights_only: tensors and plain containers only, never arbitrary pickled code
    return torch.load(path, map_location=device, weights_only=True)


def connor_rob_hook_z_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    cfg_dict = get_connor_rob_hook_z_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    weights = _torch_state(hub_file(repo_id, folder_name, force_download=force_download), device)
    return cfg_dict, weights, None


def get_deepseek_r1_config_from_hf(
    repo_id: str,  # noqa: ARG001
    folder_name: str,
    device: str,
    force_download: bool = False,  # noqa: ARG001
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return loader_configs.deepseek_r1_config(folder_name, device, cfg_overrides)


def deepseek_r1_sae_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    loaded = _torch_state(hub_file(repo_id, folder_name, force_download=force_download), device)
    cfg_dict = loader_configs.deepseek_r1_config(folder_name, device, cfg_overrides)
    state_dict = _linear_pair(loaded)
    return cfg_dict, state_dict, None


def _linear_pair(loaded: dict[str, Tensor]) -> dict[str, Tensor]:
    """``encoder``/``decoder`` ``nn.Linear`` weights as SAELens's tensors."""
    return {
        "W_enc": loaded["encoder.weight"].T,
        "W_dec": loaded["decoder.weight"].T,
        "b_enc": loaded["encoder.bias"],
        "b_dec": loaded["decoder.bias"],
    }


# ------------------------------------------------------------------- Gemma Scope 1
def get_gemma_2_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,  # noqa: ARG001
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return loader_configs.gemma_2_config(repo_id, folder_name, device, cfg_overrides)


def _npz_state(path: str, device: str) -> dict[str, Tensor]:
    return {
        ("W_" + key[2:] if key.startswith("w_") else key): value.float().to(device)
        for key, value in read_npz(Path(path)).items()
    }


def gemma_2_sae_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """Gemma Scope 1 SAEs (``params.npz``); embedding SAEs rescaled by sqrt(d_model)."""
    cfg_dict = get_gemma_2_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    path = hub_file(repo_id, "params.npz", subfolder=folder_name, force_download=force_download)
    state_dict = _npz_state(path, device)
    _handle_scaling_factor(cfg_dict, state_dict)
    if "embedding" in folder_name:  # trained on embeddings scaled by sqrt(d_model)
        state_dict["W_enc"] = state_dict["W_enc"] / np.sqrt(cfg_dict["d_in"])
        state_dict["W_dec"] = state_dict["W_dec"] * np.sqrt(cfg_dict["d_in"])
    return cfg_dict, state_dict, None


def get_gemma_2_transcoder_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str | None = None,
    force_download: bool = False,  # noqa: ARG001
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return loader_configs.gemma_2_transcoder_config(repo_id, folder_name, device, cfg_overrides)


def gemma_2_transcoder_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """Gemma Scope 1 transcoders (``params.npz``)."""
    cfg_dict = get_gemma_2_transcoder_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    revision = (cfg_overrides or {}).get("revision")
    path = hub_file(
        repo_id, f"{folder_name}/params.npz", force_download=force_download, revision=revision
    )
    names = {"w_enc": "W_enc", "wenc": "W_enc", "w_e": "W_enc", "w_dec": "W_dec"}
    names |= {"wdec": "W_dec", "w_d": "W_dec", "b_enc": "b_enc", "benc": "b_enc"}
    names |= {"b_e": "b_enc", "b_dec": "b_dec", "bdec": "b_dec", "b_d": "b_dec"}
    names["threshold"] = "threshold"
    state_dict = {}
    for key, value in read_npz(Path(path)).items():
        if key.lower() in names:
            state_dict[names[key.lower()]] = value.float().to(device)
    return cfg_dict, state_dict, None


# ------------------------------------------------------------------- Gemma Scope 2
def _infer_gemma_3_raw_cfg_dict(repo_id: str, folder_name: str) -> dict[str, Any]:
    return loader_configs.infer_gemma_3_raw_cfg_dict(repo_id, folder_name)


def get_gemma_3_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    raw_path = optional_hub_file(repo_id, f"{folder_name}/config.json", force_download)
    if raw_path is not None:
        raw = read_json(Path(raw_path))
    else:
        raw = _infer_gemma_3_raw_cfg_dict(repo_id, folder_name)
    params = ".safetensors" if "clt" in folder_name else "/params.safetensors"
    shapes = get_safetensors_tensor_shapes(repo_id, f"{folder_name}{params}")
    return loader_configs.gemma_3_config(raw, folder_name, shapes, device, cfg_overrides)


def gemma_3_sae_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """Gemma Scope 2 SAEs and transcoders (``params.safetensors``; CLT layers summed). One
    deliberate difference from SAELens 6.45.3: an affine transcoder's ``W_skip`` is
    ``affine_skip_connection.T``, so the output adds ``x @ affine_skip_connection`` as in Google's
    reference code (SAELens adds ``x @ affine_skip_connection.T``)."""
    cfg_dict = get_gemma_3_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    params_file, subfolder = "params.safetensors", folder_name
    if "clt" in folder_name:
        params_file = folder_name.split("/")[-1] + ".safetensors"
        subfolder = "/".join(folder_name.split("/")[:-1])
    path = hub_file(repo_id, params_file, subfolder=subfolder, force_download=force_download)
    raw = load_safetensors_weights(path, device=device, dtype=cfg_dict.get("dtype"))
    w_dec = raw["w_dec"].sum(dim=1).contiguous() if "clt" in subfolder else raw["w_dec"]
    state_dict = {"W_enc": raw["w_enc"], "W_dec": w_dec, "b_enc": raw["b_enc"]}
    state_dict |= {"b_dec": raw["b_dec"], "threshold": raw["threshold"]}
    if "affine_skip_connection" in raw:
        # Google's skip is x @ affine [d_in, d_out]; an SAE's is x @ W_skip.T. SAELens 6.45.3
        # stores the affine untransposed (x @ affine.T), which differs for these non-symmetric
        # matrices: here, as interp.sae.formats.load_gemma_scope_2, Google's convention.
        state_dict["W_skip"] = raw["affine_skip_connection"].T.contiguous()
    return cfg_dict, state_dict, None


# --------------------------------------------------------------------- Llama Scope
def get_llama_scope_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    path = hub_file(repo_id, folder_name + "/hyperparams.json", force_download=force_download)
    return loader_configs.llama_scope_config(read_json(Path(path)), device, cfg_overrides)


def llama_scope_sae_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """Llama Scope SAEs (``hyperparams.json``, ``checkpoints/final.safetensors``); the scalar
    threshold is already scaled by the input norm factor ``from_pretrained`` folds in."""
    cfg_dict = get_llama_scope_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    path = hub_file(
        repo_id,
        "final.safetensors",
        subfolder=folder_name + "/checkpoints",
        force_download=force_download,
    )
    loaded = load_safetensors_weights(path, device=device, dtype=cfg_dict.get("dtype"))
    state_dict = _linear_pair(loaded)
    dtype = str_to_dtype(cfg_dict["dtype"])
    ones = torch.ones(cfg_dict["d_sae"], dtype=dtype, device=cfg_dict["device"])
    state_dict["threshold"] = ones * cfg_dict["jump_relu_threshold"]
    return cfg_dict, state_dict, None


def get_llama_scope_r1_distill_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    path = hub_file(repo_id, folder_name + "/config.json", force_download=force_download)
    return loader_configs.llama_scope_r1_distill_config(
        read_json(Path(path)), device, cfg_overrides
    )


def llama_scope_r1_distill_sae_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """Llama Scope R1 Distill (``config.json``, ``sae_weights.safetensors`` with
    ``log_jumprelu_threshold``)."""
    cfg_dict = get_llama_scope_r1_distill_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    path = hub_file(
        repo_id, SAE_WEIGHTS_FILENAME, subfolder=folder_name, force_download=force_download
    )
    loaded = load_safetensors_weights(path, device=device, dtype=cfg_dict.get("dtype"))
    state_dict = _linear_pair(loaded)
    state_dict["threshold"] = loaded["log_jumprelu_threshold"].exp()
    return cfg_dict, state_dict, None


# ------------------------------------------------------------------------ sparsify
def get_sparsify_config_from_disk(
    path: str | Path, device: str | None = None, cfg_overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    path = Path(path)
    old = read_json(path / SAE_CFG_FILENAME)
    run_path = path.parent / "config.json"
    run = read_json(run_path) if run_path.exists() else {}
    return loader_configs.sparsify_config(path, old, run, device, cfg_overrides)


def get_sparsify_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cfg_path = hub_file(repo_id, f"{folder_name}/{SAE_CFG_FILENAME}", force_download=force_download)
    return get_sparsify_config_from_disk(Path(cfg_path).parent, device, cfg_overrides)


def sparsify_disk_loader(
    path: str | Path, device: str = "cpu", cfg_overrides: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """A sparsify folder (``cfg.json``, ``sae.safetensors``). As SAELens 6.45.3, ``W_dec`` is
    sparsify's ``W_dec`` transposed (``[d_in, d_sae]``); interp's own reader,
    ``interp.sae.formats.load_sparsify``, gives the ``[d_sae, d_in]`` an ``SAE`` holds."""
    cfg_dict = get_sparsify_config_from_disk(path, device, cfg_overrides)
    loaded = load_safetensors_weights(
        Path(path) / SPARSIFY_WEIGHTS_FILENAME, device=device, dtype=cfg_dict.get("dtype")
    )
    W_enc = loaded["W_enc"] if "W_enc" in loaded else loaded["encoder.weight"].T
    W_dec = loaded["W_dec"].T if "W_dec" in loaded else loaded["decoder.weight"].T
    zeros = {"b_enc": cfg_dict["d_sae"], "b_dec": cfg_dict["d_in"]}
    alias = {"b_enc": "encoder.bias", "b_dec": "decoder.bias"}
    state_dict = {"W_enc": W_enc, "W_dec": W_dec}
    for name in ("b_enc", "b_dec"):
        default = torch.zeros(zeros[name], dtype=W_dec.dtype, device=device)
        state_dict[name] = loaded.get(name, loaded.get(alias[name], default))
    return cfg_dict, {key: state_dict[key] for key in ("W_enc", "b_enc", "W_dec", "b_dec")}


def sparsify_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    weights = f"{folder_name}/{SPARSIFY_WEIGHTS_FILENAME}"
    sae_path = hub_file(repo_id, weights, force_download=force_download)
    hub_file(repo_id, f"{folder_name}/{SAE_CFG_FILENAME}", force_download=force_download)
    cfg_dict, state_dict = sparsify_disk_loader(Path(sae_path).parent, device, cfg_overrides)
    return cfg_dict, state_dict, None


# ------------------------------------------------------------ Goodfire, Qwen Scope
def get_goodfire_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,  # noqa: ARG001
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return loader_configs.goodfire_config(repo_id, folder_name, device, cfg_overrides)


def get_goodfire_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """Goodfire's Llama SAEs (a ``.pt``/``.pth`` of ``encoder_linear``/``decoder_linear``)."""
    cfg_dict = get_goodfire_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    raw = _torch_state(hub_file(repo_id, folder_name, force_download=force_download), device)
    dtype = str_to_dtype(cfg_dict.get("dtype", "float32"))
    state_dict = {
        "W_enc": raw["encoder_linear.weight"].T,
        "W_dec": raw["decoder_linear.weight"].T,
        "b_enc": raw["encoder_linear.bias"],
        "b_dec": raw["decoder_linear.bias"],
    }
    return cfg_dict, {key: value.to(dtype=dtype) for key, value in state_dict.items()}, None


def get_qwen_scope_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,  # noqa: ARG001
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return loader_configs.qwen_scope_config(repo_id, folder_name, device, cfg_overrides)


def qwen_scope_sae_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """Qwen Scope TopK SAEs (``layer{n}.sae.pt``: ``W_enc [d_sae, d_in]``, ``W_dec [d_in,
    d_sae]``, transposed to SAELens's convention)."""
    cfg_dict = get_qwen_scope_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    raw = _torch_state(hub_file(repo_id, folder_name, force_download=force_download), device)
    state_dict = {
        "W_enc": raw["W_enc"].T.contiguous(),
        "W_dec": raw["W_dec"].T.contiguous(),
        "b_enc": raw["b_enc"],
        "b_dec": raw["b_dec"],
    }
    return cfg_dict, state_dict, None


# ------------------------------------------------- circuit-tracer's transcoder folders
def _yaml(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def get_mwhanna_transcoder_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str | None = None,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """mwhanna's per-layer transcoders (``layer_N.safetensors``; ``wandb-config.yaml``, or its
    misspelling ``wanb-config.yaml``; ``config.yaml`` for the model, if the repo has one)."""
    layer = int(folder_name.replace(".safetensors", "").split("_")[-1])
    wandb = optional_hub_file(repo_id, "wandb-config.yaml", force_download)
    wandb = wandb or hub_file(repo_id, "wanb-config.yaml", force_download=force_download)
    base_path = optional_hub_file(repo_id, "config.yaml", force_download)
    if base_path is not None:
        base = _yaml(base_path)
    else:  # the 14b transcoders have no config.yaml: the model from the repository id
        size = re.search(r"qwen3-(\d+(?:\.\d+)?)b", repo_id)
        if not size:
            raise ValueError(f"Could not extract Qwen3 size from repo_id: {repo_id}")
        base = {"model_name": f"Qwen/Qwen3-{size.group(1)}B"}
    return loader_configs.mwhanna_transcoder_config(
        layer, _yaml(wandb), base["model_name"], device, cfg_overrides
    )


def mwhanna_transcoder_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    cfg_dict = get_mwhanna_transcoder_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    revision = (cfg_overrides or {}).get("revision")
    path = hub_file(repo_id, folder_name, force_download=force_download, revision=revision)
    state_dict = load_safetensors_weights(path, device=device, dtype=cfg_dict.get("dtype"))
    state_dict["W_enc"] = state_dict["W_enc"].T
    return cfg_dict, state_dict, None


def get_mntss_clt_layer_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One layer of a cross-layer transcoder (``folder_name``: the layer)."""
    info = _yaml(hub_file(repo_id, "config.yaml", force_download=force_download))
    shapes = get_safetensors_tensor_shapes(repo_id, f"W_enc_{folder_name}.safetensors")
    return loader_configs.mntss_clt_layer_config(folder_name, info, shapes, device, cfg_overrides)


def mntss_clt_layer_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """A cross-layer transcoder's layer as a single-layer transcoder, its decoders to every
    later layer summed: for its feature activations, not for reconstruction (SAELens warns)."""
    warnings.warn(
        "This loads the CLT layer as a single layer transcoder by summing all decoders "
        "together. This should only be used to find feature activations, not for "
        "reconstruction",
        UserWarning,
        stacklevel=2,
    )
    cfg_dict = get_mntss_clt_layer_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    dtype = cfg_dict.get("dtype")
    encoder_file = f"W_enc_{folder_name}.safetensors"
    encoder_path = hub_file(repo_id, encoder_file, force_download=force_download)
    decoder_file = f"W_dec_{folder_name}.safetensors"
    decoder_path = hub_file(repo_id, decoder_file, force_download=force_download)
    encoder = load_safetensors_weights(encoder_path, device=device, dtype=dtype)
    decoder = load_safetensors_weights(decoder_path, device=device, dtype=dtype)
    state_dict = {
        "W_enc": encoder[f"W_enc_{folder_name}"].T,
        "b_enc": encoder[f"b_enc_{folder_name}"],
        "b_dec": encoder[f"b_dec_{folder_name}"],
        "W_dec": decoder[f"W_dec_{folder_name}"].sum(dim=1),
    }
    return cfg_dict, state_dict, None


# ------------------------------------------- canrager/temporalSAEs (TemporalSAE folders)
def get_temporal_sae_config_from_hf(
    repo_id: str,
    folder_name: str,
    device: str,
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``temporal`` config from the folder's ``conf.yaml`` (``llm.dimin``, ``sae.*``,
    ``data.dtype``); the layer from ``folder_name`` (``layer_12/temporal``), read at its
    ``hook_resid_post``; inputs scaled by ``sae.scaling_factor``."""
    conf = _yaml(hub_file(repo_id, f"{folder_name}/conf.yaml", force_download=force_download))
    layer = re.search(r"layer_(\d+)", folder_name)
    if layer is None:
        raise ValueError(f"Could not find layer in folder_name: {folder_name}")
    sae = conf["sae"]
    cfg_dict = {
        "architecture": "temporal",
        "hook_name": f"blocks.{int(layer.group(1))}.hook_resid_post",
        "d_in": conf["llm"]["dimin"],
        "d_sae": int(conf["llm"]["dimin"] * sae["exp_factor"]),
        **{key: sae[key] for key in _TEMPORAL_SAE_KEYS},
        "dtype": conf["data"]["dtype"],
        "device": device,
        "normalize_activations": "constant_scalar_rescale",
        "activation_normalization_factor": sae["scaling_factor"],
        "apply_b_dec_to_input": True,
    }
    return {**cfg_dict, **(cfg_overrides or {})}


_TEMPORAL_SAE_KEYS = (
    "n_heads",
    "n_attn_layers",
    "bottleneck_factor",
    "sae_diff_type",
    "kval_topk",
    "tied_weights",
)


def temporal_sae_huggingface_loader(
    repo_id: str,
    folder_name: str,
    device: str = "cpu",
    force_download: bool = False,
    cfg_overrides: dict[str, Any] | None = None,
) -> LoaderResult:
    """A TemporalSAE folder (``conf.yaml`` + ``latest_ckpt.safetensors``): the checkpoint's
    ``D``, ``b`` and ``E`` (untied only) become ``W_dec``, ``b_dec`` and ``W_enc``;
    ``attn_layers.*`` keep their names."""
    cfg_dict = get_temporal_sae_config_from_hf(
        repo_id, folder_name, device, force_download, cfg_overrides
    )
    path = hub_file(
        repo_id, f"{folder_name}/latest_ckpt.safetensors", force_download=force_download
    )
    raw = load_safetensors_weights(path, device=device, dtype=cfg_dict.get("dtype"))
    state_dict = {key: value for key, value in raw.items() if key.startswith("attn_layers.")}
    state_dict["W_dec"] = raw["D"]
    state_dict["b_dec"] = raw["b"]
    if "E" in raw:
        state_dict["W_enc"] = raw["E"]
    return cfg_dict, state_dict, None


# ------------------------------------------------------- formats interp does not read
def _unsupported(name: str) -> Any:
    def loader(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedSAEFormat(
            f"SAELens's {name!r} format is not one interp reads (interp reads: "
            f"{sorted(SUPPORTED_FORMATS)}). Load it with SAELens, save it with "
            "sae.save_model(folder), then interp.sae.SAE.load(folder)."
        )

    loader.__name__ = loader.__qualname__ = f"unsupported_{name}_loader"
    loader.__doc__ = f"SAELens's {name!r} format: not read by interp (raises UnsupportedSAEFormat)."
    return loader


dictionary_learning_sae_huggingface_loader_1 = _unsupported("dictionary_learning_1")
get_dictionary_learning_config_1_from_hf = _unsupported("dictionary_learning_1")

NAMED_PRETRAINED_SAE_LOADERS: dict[str, PretrainedSaeHuggingfaceLoader] = {
    "sae_lens": sae_lens_huggingface_loader,
    "connor_rob_hook_z": connor_rob_hook_z_huggingface_loader,
    "gemma_2": gemma_2_sae_huggingface_loader,
    "gemma_3": gemma_3_sae_huggingface_loader,
    "llama_scope": llama_scope_sae_huggingface_loader,
    "llama_scope_r1_distill": llama_scope_r1_distill_sae_huggingface_loader,
    "dictionary_learning_1": dictionary_learning_sae_huggingface_loader_1,
    "deepseek_r1": deepseek_r1_sae_huggingface_loader,
    "qwen_scope": qwen_scope_sae_huggingface_loader,
    "sparsify": sparsify_huggingface_loader,
    "gemma_2_transcoder": gemma_2_transcoder_huggingface_loader,
    "mwhanna_transcoder": mwhanna_transcoder_huggingface_loader,
    "mntss_clt_layer_transcoder": mntss_clt_layer_huggingface_loader,
    "temporal": temporal_sae_huggingface_loader,
    "goodfire": get_goodfire_huggingface_loader,
}

NAMED_PRETRAINED_SAE_CONFIG_GETTERS: dict[str, PretrainedSaeConfigHuggingfaceLoader] = {
    "sae_lens": get_sae_lens_config_from_hf,
    "connor_rob_hook_z": get_connor_rob_hook_z_config_from_hf,
    "gemma_2": get_gemma_2_config_from_hf,
    "gemma_3": get_gemma_3_config_from_hf,
    "llama_scope": get_llama_scope_config_from_hf,
    "llama_scope_r1_distill": get_llama_scope_r1_distill_config_from_hf,
    "dictionary_learning_1": get_dictionary_learning_config_1_from_hf,
    "deepseek_r1": get_deepseek_r1_config_from_hf,
    "qwen_scope": get_qwen_scope_config_from_hf,
    "sparsify": get_sparsify_config_from_hf,
    "gemma_2_transcoder": get_gemma_2_transcoder_config_from_hf,
    "mwhanna_transcoder": get_mwhanna_transcoder_config_from_hf,
    "mntss_clt_layer_transcoder": get_mntss_clt_layer_config_from_hf,
    "temporal": get_temporal_sae_config_from_hf,
    "goodfire": get_goodfire_config_from_hf,
}

SUPPORTED_FORMATS = {
    name
    for name, loader in NAMED_PRETRAINED_SAE_LOADERS.items()
    if not loader.__name__.startswith("unsupported_")
}


def get_conversion_loader_name(release: str) -> str:
    """The loader a release uses (``sae_lens`` unless the directory names another)."""
    sae_info = get_pretrained_saes_directory().get(release)
    name = "sae_lens"
    if sae_info is not None and sae_info.conversion_func is not None:
        name = sae_info.conversion_func
    if name not in NAMED_PRETRAINED_SAE_LOADERS:
        raise ValueError(f"Conversion func '{name}' not found in NAMED_PRETRAINED_SAE_LOADERS.")
    return name


def load_sae_config_from_huggingface(
    release: str, sae_id: str, device: str = "cpu", force_download: bool = False
) -> dict[str, Any]:
    """The 6.x config dict ``SAE.from_pretrained(release, sae_id)`` builds, without the weights
    (a SAELens-format SAE reads only its ``cfg.json``)."""
    cfg_overrides = get_config_overrides(release, sae_id)
    config_getter = NAMED_PRETRAINED_SAE_CONFIG_GETTERS[get_conversion_loader_name(release)]
    repo_id, folder_name = get_repo_id_and_folder_name(release, sae_id=sae_id)
    cfg = {**config_getter(repo_id, folder_name, device, force_download, cfg_overrides)}
    return handle_config_defaulting(cfg)
