"""SAELens's loaders by format under its names (``interp.sae.loading.pretrained_sae_loaders``):
their config dicts and state dicts, on files written here; ``handle_pre_6_0_config`` against
what SAELens 6.45.3 made of the same configs (tests/sae_reference/pretrained/expected.json).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from interp.sae.loading import pretrained_sae_loaders as loaders
from interp.sae.loading.config_dicts import handle_config_defaulting, sae_from_config_dict
from interp.sae.loading.pretrained_saes_directory import get_pretrained_saes_directory

REFERENCE = Path(__file__).parents[1] / "sae_reference" / "pretrained"
EXPECTED = json.loads((REFERENCE / "expected.json").read_text())


@pytest.mark.parametrize("index", range(len(EXPECTED["_handle_pre_6_0_config"])))
def test_handle_pre_6_0_config_equals_saelens(index):
    raw, want = EXPECTED["_handle_pre_6_0_config"][index]
    assert loaders.handle_pre_6_0_config(dict(raw)) == want
    assert handle_config_defaulting(dict(raw)) == want  # no sae_lens_version: pre-6.0


def test_a_6x_config_is_left_as_it_is():
    cfg = {"d_in": 4, "d_sae": 8, "metadata": {"sae_lens_version": "6.2.0", "hook_name": "h"}}
    assert handle_config_defaulting(dict(cfg)) == cfg


# ------------------------------------------------------------ read_sae_components
def _weights(path: Path, **extra: torch.Tensor) -> dict[str, torch.Tensor]:
    state = {"W_enc": torch.randn(4, 8), "W_dec": torch.randn(8, 4)}
    state |= {"b_enc": torch.randn(8), "b_dec": torch.randn(4), **extra}
    save_file(state, str(path))
    return state


def test_read_sae_components_casts_to_the_config_dtype(tmp_path):
    state = _weights(tmp_path / "w.safetensors")
    cfg, loaded = loaders.read_sae_components_from_disk(
        {"dtype": "float64"}, tmp_path / "w.safetensors"
    )
    assert cfg["finetuning_scaling_factor"] is False
    assert loaded.keys() == state.keys()
    assert all(tensor.dtype == torch.float64 for tensor in loaded.values())
    torch.testing.assert_close(loaded["W_enc"], state["W_enc"].double(), atol=0, rtol=0)


def test_a_ones_scaling_factor_is_dropped_and_another_renamed(tmp_path):
    _weights(tmp_path / "ones.safetensors", scaling_factor=torch.ones(8))
    cfg, loaded = loaders.read_sae_components_from_disk(
        {"dtype": "float32"}, tmp_path / "ones.safetensors"
    )
    assert "scaling_factor" not in loaded and "finetuning_scaling_factor" not in loaded
    factor = torch.rand(8) + 0.5
    _weights(tmp_path / "f.safetensors", scaling_factor=factor)
    with pytest.raises(ValueError, match="finetuning_scaling_factor is False"):
        loaders.read_sae_components_from_disk({"dtype": "float32"}, tmp_path / "f.safetensors")
    cfg = {"dtype": "float32", "finetuning_scaling_factor": True}
    cfg, loaded = loaders.read_sae_components_from_disk(cfg, tmp_path / "f.safetensors")
    torch.testing.assert_close(loaded["finetuning_scaling_factor"], factor, atol=0, rtol=0)


def test_a_finetuning_scaling_factor_is_folded_into_the_decoder(tmp_path):
    factor = torch.rand(8) + 0.5
    state = _weights(tmp_path / "f.safetensors", scaling_factor=factor)
    cfg = {"dtype": "float32", "finetuning_scaling_factor": True, "d_in": 4, "d_sae": 8}
    cfg, loaded = loaders.read_sae_components_from_disk(cfg, tmp_path / "f.safetensors")
    cfg = handle_config_defaulting(cfg)
    sae = sae_from_config_dict(cfg, loaded)
    torch.testing.assert_close(sae.W_dec, state["W_dec"] * factor[:, None], atol=0, rtol=0)


# --------------------------------------------------------------- loaders by format
@pytest.fixture
def files(monkeypatch):
    """Downloads served from a dict of local files (SAELens's tests patch the same name)."""
    served: dict[str, Path] = {}

    def fake_download(repo_id, filename, subfolder=None, force_download=False, revision=None):
        name = f"{subfolder}/{filename}" if subfolder else filename
        if name not in served:
            from huggingface_hub.utils import EntryNotFoundError

            raise EntryNotFoundError(f"{repo_id}: no {name}")
        return str(served[name])

    monkeypatch.setattr(loaders, "try_to_load_from_cache", lambda *args, **kwargs: None)
    monkeypatch.setattr(loaders, "hf_hub_download", fake_download)
    return served


def test_gemma_2_loader_renames_and_rescales_embeddings(tmp_path, files):
    arrays = {"w_enc": np.random.randn(6, 10), "w_dec": np.random.randn(10, 6)}
    arrays |= {"b_enc": np.zeros(10), "b_dec": np.zeros(6), "threshold": np.ones(10)}
    np.savez(tmp_path / "params.npz", **{k: v.astype("f4") for k, v in arrays.items()})
    for folder in ("layer_3/width_16k/average_l0_59", "embedding/width_4k/average_l0_6"):
        files[f"{folder}/params.npz"] = tmp_path / "params.npz"
        cfg, state, sparsity = loaders.gemma_2_sae_huggingface_loader(
            "google/gemma-scope-2b-pt-res", folder
        )
        assert sparsity is None and set(state) == {"W_enc", "W_dec", "b_enc", "b_dec", "threshold"}
        scale = math.sqrt(cfg["d_in"]) if "embedding" in folder else 1.0
        want = torch.from_numpy(arrays["w_enc"].astype("f4")) / scale
        torch.testing.assert_close(state["W_enc"], want)
    assert cfg["hook_name"] == "hook_embed" and cfg["d_in"] == 2304


def test_gemma_3_config_is_inferred_when_the_repo_has_none(tmp_path, files):
    folder = "resid_post/layer_10_width_262k_l0_small"
    raw = {"w_enc": torch.randn(6, 10), "w_dec": torch.randn(10, 6), "b_enc": torch.zeros(10)}
    raw |= {"b_dec": torch.zeros(6), "threshold": torch.ones(10)}
    save_file(raw, str(tmp_path / "params.safetensors"))
    files[f"{folder}/params.safetensors"] = tmp_path / "params.safetensors"
    cfg, state, _ = loaders.gemma_3_sae_huggingface_loader("google/gemma-scope-2-1b-pt", folder)
    assert (cfg["d_in"], cfg["d_sae"], cfg["model_name"]) == (6, 10, "google/gemma-3-1b-pt")
    assert cfg["hf_hook_name"] == "model.layers.10.output"
    torch.testing.assert_close(state["W_dec"], raw["w_dec"], atol=0, rtol=0)


def test_llama_scope_threshold_is_scaled_by_the_input_norm(tmp_path, files):
    folder = tmp_path / "L5R-8x"
    (folder / "checkpoints").mkdir(parents=True)
    hyper = {"d_model": 4, "d_sae": 8, "hook_point_in": "blocks.5.hook_resid_post"}
    hyper |= {"jump_relu_threshold": 0.5, "dataset_average_activation_norm": {"in": 4.0}}
    (folder / "hyperparams.json").write_text(json.dumps(hyper))
    raw = {"encoder.weight": torch.randn(8, 4), "encoder.bias": torch.randn(8)}
    raw |= {"decoder.weight": torch.randn(4, 8), "decoder.bias": torch.randn(4)}
    save_file(raw, str(folder / "checkpoints" / "final.safetensors"))
    files["L5R-8x/hyperparams.json"] = folder / "hyperparams.json"
    files["L5R-8x/checkpoints/final.safetensors"] = folder / "checkpoints" / "final.safetensors"
    cfg, state, _ = loaders.llama_scope_sae_huggingface_loader("fnlp/x", "L5R-8x")
    factor = math.sqrt(4) / 4.0
    assert cfg["jump_relu_threshold"] == pytest.approx(0.5 * factor)
    assert cfg["normalize_activations"] == "expected_average_only_in"
    torch.testing.assert_close(state["threshold"], torch.full((8,), 0.5 * factor).bfloat16())
    torch.testing.assert_close(state["W_dec"], raw["decoder.weight"].T.bfloat16())


def test_sparsify_disk_loader_gives_saelens_dicts(tmp_path):
    folder = tmp_path / "layers.2"
    folder.mkdir()
    (folder / "cfg.json").write_text(json.dumps({"d_in": 4, "num_latents": 8, "k": 3}))
    raw = {"encoder.weight": torch.randn(8, 4), "encoder.bias": torch.randn(8)}
    raw |= {"W_dec": torch.randn(8, 4), "b_dec": torch.randn(4)}
    save_file(raw, str(folder / "sae.safetensors"))
    cfg, state = loaders.sparsify_disk_loader(folder)
    assert cfg["hook_name"] == "blocks.2.hook_resid_post"
    assert cfg["activation_fn_kwargs"] == {"k": 3, "signed": False}
    torch.testing.assert_close(state["W_enc"], raw["encoder.weight"].T.bfloat16())
    torch.testing.assert_close(state["W_dec"], raw["W_dec"].T.bfloat16())  # as SAELens


def test_an_absent_sparsity_file_is_none(tmp_path, files):
    folder = tmp_path / "blocks.0.hook_resid_pre"
    folder.mkdir()
    cfg = {"d_in": 4, "d_sae": 8, "dtype": "float32", "hook_point": "blocks.0.hook_resid_pre"}
    (folder / "cfg.json").write_text(json.dumps(cfg))
    _weights(folder / "sae_weights.safetensors")
    for name in ("cfg.json", "sae_weights.safetensors"):
        files[f"blocks.0.hook_resid_pre/{name}"] = folder / name
    cfg, state, sparsity = loaders.sae_lens_huggingface_loader("me/x", "blocks.0.hook_resid_pre")
    assert sparsity is None and set(state) == {"W_enc", "W_dec", "b_enc", "b_dec"}


def test_qwen_scope_and_goodfire_checkpoints_are_transposed(tmp_path, files):
    raw = {"W_enc": torch.randn(8, 4), "W_dec": torch.randn(4, 8)}
    raw |= {"b_enc": torch.randn(8), "b_dec": torch.randn(4)}
    torch.save(raw, tmp_path / "layer2.sae.pt")
    files["layer2.sae.pt"] = tmp_path / "layer2.sae.pt"
    repo = "Qwen/SAE-Res-Qwen3-1.7B-Base-W32K-L0_50"
    cfg, state, _ = loaders.qwen_scope_sae_huggingface_loader(repo, "layer2.sae.pt")
    assert (cfg["d_sae"], cfg["activation_fn_kwargs"]["k"]) == (32 * 1024, 50)
    assert handle_config_defaulting(cfg)["architecture"] == "topk"
    torch.testing.assert_close(state["W_enc"], raw["W_enc"].T, atol=0, rtol=0)
    goodfire = {"encoder_linear.weight": raw["W_enc"], "encoder_linear.bias": raw["b_enc"]}
    goodfire |= {"decoder_linear.weight": raw["W_dec"], "decoder_linear.bias": raw["b_dec"]}
    name = "Llama-3.1-8B-Instruct-SAE-l19.pth"
    torch.save(goodfire, tmp_path / name)
    files[name] = tmp_path / name
    cfg, state, _ = loaders.get_goodfire_huggingface_loader(
        "Goodfire/Llama-3.1-8B-Instruct-SAE-l19", name
    )
    assert cfg["hook_name"] == "blocks.19.hook_resid_post"
    torch.testing.assert_close(state["W_dec"], raw["W_dec"].T, atol=0, rtol=0)
    with pytest.raises(ValueError, match="Unsupported Goodfire SAE"):
        loaders.get_goodfire_config_from_hf("Goodfire/other", "x.pt", "cpu")


def test_circuit_tracer_transcoders(tmp_path, files):
    wandb = "d_model:\n  value: 4\nd_feature:\n  value: 8\nbatch_size:\n  value: 16\n"
    (tmp_path / "wandb-config.yaml").write_text(wandb)
    (tmp_path / "config.yaml").write_text(
        "model_name: gpt2\nfeature_input_hook: hook_resid_mid\nfeature_output_hook: hook_mlp_out\n"
    )
    files["wanb-config.yaml"] = tmp_path / "wandb-config.yaml"  # the misspelt name
    files["config.yaml"] = tmp_path / "config.yaml"
    raw = {"W_enc": torch.randn(8, 4), "W_dec": torch.randn(8, 4)}
    raw |= {"b_enc": torch.randn(8), "b_dec": torch.randn(4)}
    save_file(raw, str(tmp_path / "layer_3.safetensors"))
    files["layer_3.safetensors"] = tmp_path / "layer_3.safetensors"
    cfg, state, _ = loaders.mwhanna_transcoder_huggingface_loader(
        "mwhanna/x", "layer_3.safetensors"
    )
    assert (cfg["hook_name"], cfg["hook_name_out"]) == (
        "blocks.3.mlp.hook_in",
        "blocks.3.hook_mlp_out",
    )
    torch.testing.assert_close(state["W_enc"], raw["W_enc"].T, atol=0, rtol=0)
    encoder = {"W_enc_1": torch.randn(8, 4), "b_enc_1": torch.randn(8), "b_dec_1": torch.randn(4)}
    save_file(encoder, str(tmp_path / "W_enc_1.safetensors"))
    decoder = {"W_dec_1": torch.randn(8, 2, 4)}  # to this layer and the next
    save_file(decoder, str(tmp_path / "W_dec_1.safetensors"))
    for name in ("W_enc_1.safetensors", "W_dec_1.safetensors"):
        files[name] = tmp_path / name
    with pytest.warns(UserWarning, match="summing all decoders"):
        cfg, state, _ = loaders.mntss_clt_layer_huggingface_loader("mntss/clt", "1")
    assert (cfg["d_in"], cfg["d_sae"], cfg["hook_name"]) == (4, 8, "blocks.1.hook_resid_mid")
    torch.testing.assert_close(state["W_dec"], decoder["W_dec_1"].sum(1), atol=0, rtol=0)


# ---------------------------------------------------------------- the loader table
def test_every_release_names_a_known_loader():
    used = {
        lookup.conversion_func or "sae_lens" for lookup in get_pretrained_saes_directory().values()
    }
    assert used <= set(loaders.NAMED_PRETRAINED_SAE_LOADERS)
    assert set(loaders.NAMED_PRETRAINED_SAE_LOADERS) == set(
        loaders.NAMED_PRETRAINED_SAE_CONFIG_GETTERS
    )


@pytest.mark.parametrize(
    "name", sorted(set(loaders.NAMED_PRETRAINED_SAE_LOADERS) - loaders.SUPPORTED_FORMATS)
)
def test_formats_interp_does_not_read_say_so(name):
    with pytest.raises(loaders.UnsupportedSAEFormat, match=f"'{name}' format"):
        loaders.NAMED_PRETRAINED_SAE_LOADERS[name]("repo/x", "f", "cpu", False, None)
    with pytest.raises(loaders.UnsupportedSAEFormat, match="SAE.load"):
        loaders.NAMED_PRETRAINED_SAE_CONFIG_GETTERS[name]("repo/x", "f", "cpu", False, None)
