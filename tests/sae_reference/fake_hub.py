"""A fake Hugging Face hub cache holding tiny random SAEs under real SAELens release names, one
per format, laid out as huggingface_hub caches them (``models--owner--name/refs/main``,
``snapshots/<commit>/...``, ``.no_exist/<commit>/...`` for files known to be absent).

Shared by tests/sae/test_sae_pretrained_releases.py and make_pretrained_fixtures.py (run in
SAELens's environment), so both read the same bytes: the tensors come from seeded generators.
Imports torch, numpy and safetensors only (never interp or sae_lens).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

COMMIT = "0123456789abcdef0123456789abcdef01234567"
D_IN, D_SAE = 16, 32
KK_PATH = (  # the file gpt2-small-hook-z-kk's blocks.0.hook_z names
    "gpt2-small_L0_Hcat_z_lr1.20e-03_l11.80e+00_ds24576_bs4096_dc1.00e-06_rsanthropic_"
    "rie25000_nr4_v9.pt"
)

# (release, sae_id) that SAE.from_pretrained loads end to end from the fake cache.
CASES = {
    "saelens_pre6": ("gpt2-small-res-jb", "blocks.8.hook_resid_pre"),
    "gemma_3": ("gemma-scope-2-270m-pt-res", "layer_12_width_16k_l0_big"),
    "gemma_3_transcoder": (
        "gemma-scope-2-270m-pt-transcoders",
        "transcoder/layer_9_width_16k_l0_small_affine",
    ),
    "llama_scope": ("llama_scope_lxr_8x", "l0r_8x"),
    "hook_z_kk": ("gpt2-small-hook-z-kk", "blocks.0.hook_z"),
}
# (release, sae_id) whose config dict is compared (Gemma Scope 1: read from the names only).
CONFIG_ONLY = {
    "gemma_2_res": ("gemma-scope-2b-pt-res-canonical", "layer_3/width_16k/canonical"),
    "gemma_2_att": ("gemma-scope-2b-pt-att", "layer_0/width_16k/average_l0_104"),
    "gemma_2_embedding": ("gemma-scope-2b-pt-res", "embedding/width_4k/average_l0_6"),
    "gemma_2_transcoder": ("gemma-scope-2b-pt-transcoders", "layer_0/width_16k/average_l0_76"),
}


def _rand(seed: int, *shape: int, scale: float = 0.3) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator) * scale


def _snapshot(cache: Path, repo_id: str) -> Path:
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True, exist_ok=True)
    return snapshot


def _absent(cache: Path, repo_id: str, filename: str) -> None:
    marker = cache / ("models--" + repo_id.replace("/", "--")) / ".no_exist" / COMMIT / filename
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _saelens_pre6(cache: Path) -> None:
    folder = _snapshot(cache, "jbloom/GPT2-Small-SAEs-Reformatted") / "blocks.8.hook_resid_pre"
    _write_json(
        folder / "cfg.json",
        {
            "model_name": "gpt2-small",
            "hook_point": "blocks.8.hook_resid_pre",
            "hook_point_layer": 8,
            "hook_point_head_index": None,
            "dataset_path": "Skylion007/openwebtext",
            "is_dataset_tokenized": False,
            "context_size": 128,
            "use_cached_activations": False,
            "d_in": D_IN,
            "d_sae": D_SAE,
            "b_dec_init_method": "geometric_median",
            "expansion_factor": 2,
            "lr": 0.0004,
            "l1_coefficient": 8e-05,
            "dtype": "torch.float32",
            "device": "mps",
            "seed": 42,
            "prepend_bos": True,
        },
    )
    save_file(
        {
            "W_enc": _rand(1, D_IN, D_SAE),
            "W_dec": _rand(2, D_SAE, D_IN),
            "b_enc": _rand(3, D_SAE),
            "b_dec": _rand(4, D_IN),
        },
        str(folder / "sae_weights.safetensors"),
    )
    save_file({"sparsity": -_rand(5, D_SAE).abs() * 10}, str(folder / "sparsity.safetensors"))


def _gemma_3(cache: Path) -> None:
    repo_id = "google/gemma-scope-2-270m-pt"
    snapshot = _snapshot(cache, repo_id)
    res = snapshot / "resid_post" / "layer_12_width_16k_l0_big"
    _write_json(
        res / "config.json",
        {
            "architecture": "jump_relu",
            "model_name": "gemma-v3-270m-pt",
            "hf_hook_point_in": "model.layers.12.output",
        },
    )
    save_file(
        {
            "w_enc": _rand(11, D_IN, D_SAE),
            "w_dec": _rand(12, D_SAE, D_IN),
            "b_enc": _rand(13, D_SAE),
            "b_dec": _rand(14, D_IN),
            "threshold": _rand(15, D_SAE).abs() * 0.1,
        },
        str(res / "params.safetensors"),
    )
    transcoder = snapshot / "transcoder" / "layer_9_width_16k_l0_small_affine"
    transcoder.mkdir(parents=True, exist_ok=True)
    _absent(cache, repo_id, "transcoder/layer_9_width_16k_l0_small_affine/config.json")
    save_file(
        {
            "w_enc": _rand(21, D_IN, D_SAE),
            "w_dec": _rand(22, D_SAE, D_IN),
            "b_enc": _rand(23, D_SAE),
            "b_dec": _rand(24, D_IN),
            "threshold": _rand(25, D_SAE).abs() * 0.1,
            "affine_skip_connection": _rand(26, D_IN, D_IN),
        },
        str(transcoder / "params.safetensors"),
    )


def _llama_scope(cache: Path) -> None:
    folder = _snapshot(cache, "fnlp/Llama3_1-8B-Base-LXR-8x") / "Llama3_1-8B-Base-L0R-8x"
    _write_json(
        folder / "hyperparams.json",
        {
            "d_model": D_IN,
            "d_sae": D_SAE,
            "hook_point_in": "blocks.0.hook_resid_post",
            "hook_point_out": "blocks.0.hook_resid_post",
            "jump_relu_threshold": 0.05,
            "dataset_average_activation_norm": {"in": 3.0, "out": 3.0},
        },
    )
    (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
    save_file(
        {
            "encoder.weight": _rand(31, D_SAE, D_IN),
            "encoder.bias": _rand(32, D_SAE),
            "decoder.weight": _rand(33, D_IN, D_SAE),
            "decoder.bias": _rand(34, D_IN),
        },
        str(folder / "checkpoints" / "final.safetensors"),
    )


def _hook_z_kk(cache: Path) -> None:
    snapshot = _snapshot(cache, "ckkissane/attn-saes-gpt2-small-all-layers")
    name = "blocks.0.attn.hook_z"
    _write_json(
        snapshot / (KK_PATH.split(".pt")[0] + "_cfg.json"),
        {"act_size": D_IN, "dict_size": D_SAE, "act_name": name, "layer": 0},
    )
    state = {
        "W_enc": _rand(41, D_IN, D_SAE),
        "W_dec": _rand(42, D_SAE, D_IN),
        "b_enc": _rand(43, D_SAE),
        "b_dec": _rand(44, D_IN),
    }
    torch.save(state, snapshot / KK_PATH)


def build_fake_hub(cache: Path) -> Path:
    """Write every case's files under ``cache`` (a ``HF_HUB_CACHE``); returns ``cache``."""
    for writer in (_saelens_pre6, _gemma_3, _llama_scope, _hook_z_kk):
        writer(cache)
    return cache


def probe_input(d_in: int = D_IN) -> torch.Tensor:
    """The activations both libraries encode: [batch 2, pos 3, d_in]."""
    return _rand(99, 2, 3, d_in, scale=1.0)
