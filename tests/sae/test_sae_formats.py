"""Loading SAEs from every public layout, written here from the documented tensor names, and
checked against each format's documented encode/decode computed by hand."""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from interp.sae import SAE, SAEConfig, SAEFormatError, load_sae
from interp.sae.formats import hf_module_to_hook

D_IN, D_SAE = 16, 32


def rand(*shape, seed=None):
    if seed is not None:
        torch.manual_seed(seed)
    return torch.randn(*shape) * 0.5


@pytest.fixture
def x():
    torch.manual_seed(123)
    return torch.randn(4, 7, D_IN)


def jumprelu(pre, threshold):
    return torch.relu(pre) * (pre > threshold)


def test_gemma_scope_1_npz(tmp_path, x):
    folder = tmp_path / "gemma-scope-2b-pt-res" / "layer_3" / "width_16k" / "average_l0_59"
    folder.mkdir(parents=True)
    torch.manual_seed(0)
    p = {
        "W_enc": rand(D_IN, D_SAE),
        "w_dec": rand(D_SAE, D_IN),
        "b_enc": rand(D_SAE),
        "b_dec": rand(D_IN),
        "threshold": torch.rand(D_SAE) * 0.3,
    }
    np.savez(folder / "params.npz", **{k: v.numpy() for k, v in p.items()})
    sae = load_sae(folder)
    assert (sae.cfg.architecture, sae.cfg.hook_name, sae.cfg.model_name) == (
        "jumprelu",
        "blocks.3.hook_resid_post",
        "gemma-2-2b",
    )
    acts = jumprelu(x @ p["W_enc"] + p["b_enc"], p["threshold"])  # no b_dec on the input
    torch.testing.assert_close(sae.encode(x), acts)
    torch.testing.assert_close(sae(x), acts @ p["w_dec"] + p["b_dec"])
    assert (acts > 0).any() and (acts == 0).any()


def test_gemma_scope_1_attention_reads_hook_z(tmp_path):
    folder = tmp_path / "gemma-scope-2b-pt-att" / "layer_0" / "width_16k" / "average_l0_9"
    folder.mkdir(parents=True)
    arrays = {
        "W_enc": rand(D_IN, D_SAE),
        "W_dec": rand(D_SAE, D_IN),
        "b_enc": rand(D_SAE),
        "b_dec": rand(D_IN),
        "threshold": torch.rand(D_SAE),
    }
    np.savez(folder / "params.npz", **{k: v.numpy() for k, v in arrays.items()})
    sae = load_sae(folder)
    assert (sae.cfg.hook_name, sae.cfg.reshape_activations) == ("blocks.0.attn.hook_z", "hook_z")
    z = torch.randn(2, 3, 4, 4)
    acts = jumprelu(z.flatten(-2) @ arrays["W_enc"] + arrays["b_enc"], arrays["threshold"])
    torch.testing.assert_close(sae.encode(z), acts)
    recons = (acts @ arrays["W_dec"] + arrays["b_dec"]).unflatten(-1, (4, 4))
    torch.testing.assert_close(sae(z), recons)


def test_gemma_scope_2_with_config(tmp_path, x):
    folder = tmp_path / "resid_post" / "layer_5_width_16k_l0_small"
    folder.mkdir(parents=True)
    torch.manual_seed(1)
    p = {
        "w_enc": rand(D_IN, D_SAE),
        "w_dec": rand(D_SAE, D_IN),
        "b_enc": rand(D_SAE),
        "b_dec": rand(D_IN),
        "threshold": torch.rand(D_SAE) * 0.3,
    }
    save_file(p, folder / "params.safetensors")
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architecture": "jump_relu",
                "model_name": "gemma-v3-1b-pt",
                "hf_hook_point_in": "model.layers.5.output",
            }
        )
    )
    sae = load_sae(folder)
    assert (sae.cfg.architecture, sae.cfg.hook_name) == ("jumprelu", "blocks.5.hook_resid_post")
    acts = jumprelu(x @ p["w_enc"] + p["b_enc"], p["threshold"])
    torch.testing.assert_close(sae.encode(x), acts)
    torch.testing.assert_close(sae(x), acts @ p["w_dec"] + p["b_dec"])


def test_gemma_scope_2_skip_transcoder_without_config(tmp_path, x):
    folder = tmp_path / "transcoder_all" / "layer_2_width_16k_l0_big_affine"
    folder.mkdir(parents=True)
    torch.manual_seed(2)
    p = {
        "w_enc": rand(D_IN, D_SAE),
        "w_dec": rand(D_SAE, D_IN),
        "b_enc": rand(D_SAE),
        "b_dec": rand(D_IN),
        "threshold": torch.rand(D_SAE) * 0.3,
        "affine_skip_connection": rand(D_IN, D_IN),
    }
    save_file(p, folder / "params.safetensors")
    sae = load_sae(folder)
    assert (sae.cfg.architecture, sae.cfg.hook_name, sae.cfg.hook_name_out) == (
        "jumprelu_skip_transcoder",
        "blocks.2.hook_mlp_in",
        "blocks.2.hook_mlp_out",
    )
    acts = jumprelu(x @ p["w_enc"] + p["b_enc"], p["threshold"])
    expected = acts @ p["w_dec"] + p["b_dec"] + x @ p["affine_skip_connection"]
    torch.testing.assert_close(sae(x), expected)


def sparsify_folder(root, module, transcode=False, skip=False, seed=3):
    folder = root / module
    folder.mkdir(parents=True)
    (folder / "cfg.json").write_text(
        json.dumps(
            {
                "activation": "topk",
                "expansion_factor": 2,
                "normalize_decoder": True,
                "num_latents": D_SAE,
                "k": 4,
                "multi_topk": False,
                "skip_connection": skip,
                "transcode": transcode,
                "d_in": D_IN,
            }
        )
    )
    torch.manual_seed(seed)
    p = {
        "encoder.weight": rand(D_SAE, D_IN),
        "encoder.bias": rand(D_SAE),
        "W_dec": rand(D_SAE, D_IN),
        "b_dec": rand(D_IN),
    }
    if skip:
        p["W_skip"] = rand(D_IN, D_IN)
    save_file(p, folder / "sae.safetensors")
    (root / "config.json").write_text(json.dumps({"model": "EleutherAI/pythia-70m"}))
    return folder, p


def sparsify_reference(p, x, transcode):
    """sparsify's SparseCoder: relu(encoder(x - b_dec)), top k, then W_dec + b_dec."""
    pre = torch.relu(
        (x if transcode else x - p["b_dec"]) @ p["encoder.weight"].T + p["encoder.bias"]
    )
    values, indices = pre.topk(4, dim=-1)
    acts = torch.zeros_like(pre).scatter(-1, indices, values)
    out = acts @ p["W_dec"] + p["b_dec"]
    if "W_skip" in p:
        out = out + x @ p["W_skip"].T
    return acts, out


def test_sparsify_sae(tmp_path, x):
    folder, p = sparsify_folder(tmp_path / "run", "layers.3")
    sae = load_sae(folder)
    assert (sae.cfg.architecture, sae.cfg.k, sae.cfg.hook_name, sae.cfg.model_name) == (
        "topk",
        4,
        "blocks.3.hook_resid_post",
        "EleutherAI/pythia-70m",
    )
    acts, out = sparsify_reference(p, x, transcode=False)
    torch.testing.assert_close(sae.encode(x), acts)
    torch.testing.assert_close(sae(x), out)
    assert ((sae.encode(x) > 0).sum(-1) <= 4).all()


def test_sparsify_skip_transcoder(tmp_path, x):
    folder, p = sparsify_folder(tmp_path / "run", "layers.1.mlp", transcode=True, skip=True)
    sae = load_sae(folder)
    assert (sae.cfg.architecture, sae.cfg.hook_name, sae.cfg.hook_name_out) == (
        "topk_skip_transcoder",
        "blocks.1.hook_mlp_in",
        "blocks.1.hook_mlp_out",
    )
    acts, out = sparsify_reference(p, x, transcode=True)
    torch.testing.assert_close(sae.encode(x), acts)
    torch.testing.assert_close(sae(x), out)


@pytest.mark.parametrize(
    "module, side, hook",
    [
        ("layers.3", "output", "blocks.3.hook_resid_post"),
        ("model.layers.3.mlp", "output", "blocks.3.hook_mlp_out"),
        ("layers.3.mlp", "input", "blocks.3.hook_mlp_in"),
        ("embed_tokens", "output", "hook_embed"),
        ("model.layers.7.self_attn.o_proj.input", "output", "blocks.7.attn.hook_z"),
        ("model.layers.7.post_feedforward_layernorm.output", "output", "blocks.7.hook_mlp_out"),
        ("h.2.attn", "output", "blocks.2.hook_attn_out"),
        ("layers.3.mlp.act", "output", None),
    ],
)
def test_hugging_face_module_paths_become_hook_names(module, side, hook):
    assert hf_module_to_hook(module, side) == hook


def test_llama_scope_input_norm_scaling(tmp_path, x):
    folder = tmp_path / "Llama3_1-8B-Base-L4R-8x"
    (folder / "checkpoints").mkdir(parents=True)
    hp = {
        "d_model": D_IN,
        "d_sae": D_SAE,
        "hook_point_in": "blocks.4.hook_resid_post",
        "hook_point_out": "blocks.4.hook_resid_post",
        "jump_relu_threshold": 0.2,
        "dataset_average_activation_norm": {"in": 9.0, "out": 9.0},
        "act_fn": "jumprelu",
    }
    (folder / "hyperparams.json").write_text(json.dumps(hp))
    torch.manual_seed(4)
    p = {
        "encoder.weight": rand(D_SAE, D_IN),
        "encoder.bias": rand(D_SAE),
        "decoder.weight": rand(D_IN, D_SAE),
        "decoder.bias": rand(D_IN),
    }
    save_file(p, folder / "checkpoints" / "final.safetensors")
    sae = load_sae(folder)
    assert (sae.cfg.architecture, sae.cfg.hook_name) == ("jumprelu", "blocks.4.hook_resid_post")
    scale = D_IN**0.5 / 9.0  # inputs scaled to norm sqrt(d_model); threshold scaled to match
    pre = (x * scale) @ p["encoder.weight"].T + p["encoder.bias"]
    acts = jumprelu(pre, 0.2 * scale)
    torch.testing.assert_close(sae.encode(x), acts)
    torch.testing.assert_close(sae(x), (acts @ p["decoder.weight"].T + p["decoder.bias"]) / scale)
    assert (acts > 0).any() and (acts == 0).any()


def test_saelens_pre_6_config(tmp_path, x):
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "cfg.json").write_text(
        json.dumps(
            {
                "d_in": D_IN,
                "d_sae": D_SAE,
                "hook_point": "blocks.2.hook_resid_pre",
                "hook_point_layer": 2,
                "activation_fn_str": "topk",
                "activation_fn_kwargs": {"k": 3},
                "normalize_activations": False,
                "model_name": "gpt2-small",
                "dtype": "float32",
                "context_size": 128,
            }
        )
    )
    torch.manual_seed(5)
    p = {
        "W_enc": rand(D_IN, D_SAE),
        "W_dec": rand(D_SAE, D_IN),
        "b_enc": rand(D_SAE),
        "b_dec": rand(D_IN),
        "scaling_factor": torch.ones(D_SAE),
    }
    save_file(p, folder / "sae_weights.safetensors")
    sae = load_sae(folder)
    assert (sae.cfg.architecture, sae.cfg.k, sae.cfg.hook_name, sae.cfg.hook_layer) == (
        "topk",
        3,
        "blocks.2.hook_resid_pre",
        2,
    )
    assert sae.cfg.extra["context_size"] == 128
    pre = (x - p["b_dec"]) @ p["W_enc"] + p["b_enc"]
    values, indices = pre.topk(3, dim=-1)
    torch.testing.assert_close(
        sae.encode(x), torch.zeros_like(pre).scatter(-1, indices, values.relu())
    )


def test_save_writes_saelens_6_and_loads_back(tmp_path, x):
    torch.manual_seed(6)
    sae = SAE(
        SAEConfig(
            d_in=D_IN,
            d_sae=D_SAE,
            architecture="gated",
            model_name="tiny",
            hook_name="blocks.0.hook_mlp_out",
        )
    )
    with torch.no_grad():
        for param in sae.parameters():
            param.normal_()
    sae.save(tmp_path / "g")
    cfg = json.loads((tmp_path / "g" / "cfg.json").read_text())
    assert (
        cfg["metadata"]["hook_name"] == "blocks.0.hook_mlp_out" and cfg["architecture"] == "gated"
    )
    loaded = SAE.load(tmp_path / "g")
    torch.testing.assert_close(loaded(x), sae(x), atol=0, rtol=0)


def test_from_pretrained_reads_the_hub_cache_offline(tmp_path, monkeypatch, x):
    """A snapshot laid out as huggingface_hub caches it loads with no network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = "0" * 40
    repo = tmp_path / "models--org--saes"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    sae = SAE(SAEConfig(d_in=D_IN, d_sae=D_SAE, hook_name="blocks.1.hook_resid_post"))
    sae.save(repo / "snapshots" / commit / "layer_1")
    loaded = SAE.from_pretrained("org/saes", "layer_1", cache_dir=tmp_path)
    torch.testing.assert_close(loaded(x), sae(x), atol=0, rtol=0)


# ------------------------------------------------------------------------ bad input
def saelens_folder(tmp_path, **cfg_changes):
    folder = tmp_path / "sae"
    SAE(SAEConfig(d_in=D_IN, d_sae=D_SAE, hook_name="blocks.0.hook_resid_post")).save(folder)
    cfg = json.loads((folder / "cfg.json").read_text())
    cfg.update(cfg_changes)
    (folder / "cfg.json").write_text(json.dumps(cfg))
    return folder


def test_unknown_architecture(tmp_path):
    folder = saelens_folder(tmp_path, architecture="crosscoder")
    with pytest.raises(
        SAEFormatError,
        match=r"cfg.json: architecture 'crosscoder' is "
        "not supported; supported: ",
    ):
        load_sae(folder)


def test_missing_and_truncated_files(tmp_path):
    folder = saelens_folder(tmp_path)
    weights = folder / "sae_weights.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        SAEFormatError,
        match=r"sae_weights.safetensors: not a readable "
        "safetensors file, truncated or corrupt",
    ):
        load_sae(folder)
    weights.unlink()
    with pytest.raises(SAEFormatError, match=r"no SAE found \(it holds \['cfg.json'\]\)"):
        load_sae(folder)
    with pytest.raises(SAEFormatError, match="no such folder"):
        load_sae(tmp_path / "nowhere")
    npz = tmp_path / "gemma-scope-2b-pt-res" / "layer_1"
    npz.mkdir(parents=True)
    (npz / "params.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(SAEFormatError, match=r"params.npz: not a readable .npz file"):
        load_sae(npz)


def test_nan_weights_and_wrong_shapes(tmp_path):
    folder = saelens_folder(tmp_path)
    weights = folder / "sae_weights.safetensors"
    tensors = {
        "W_enc": rand(D_IN, D_SAE),
        "W_dec": rand(D_SAE, D_IN),
        "b_enc": rand(D_SAE),
        "b_dec": rand(D_IN),
    }
    tensors["W_dec"][3, 4] = float("nan")
    save_file(tensors, weights)
    with pytest.raises(SAEFormatError, match=r"tensor W_dec holds 1 NaN or infinite values"):
        load_sae(folder)
    tensors["W_dec"] = rand(D_SAE, D_IN + 1)
    save_file(tensors, weights)
    with pytest.raises(
        SAEFormatError,
        match=r"tensor W_dec has shape \(32, 17\), expected "
        r"\(32, 16\)",
    ):
        load_sae(folder)
    del tensors["b_enc"]
    tensors["W_dec"] = rand(D_SAE, D_IN)
    save_file(tensors, weights)
    with pytest.raises(SAEFormatError, match=r"missing \['b_enc'\], unexpected \[\]"):
        load_sae(folder)


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(SAEFormatError, match=r"A topk SAE needs k"):
        load_sae(saelens_folder(tmp_path, architecture="topk"))
    with pytest.raises(ValueError, match=r"Unknown SAE architecture 'relu'"):
        SAEConfig(d_in=4, d_sae=8, architecture="relu")
    with pytest.raises(ValueError, match=r"normalize_activations='whiten'"):
        SAEConfig(d_in=4, d_sae=8, normalize_activations="whiten")
    folder, _ = sparsify_folder(tmp_path / "run", "layers.0")
    (folder / "cfg.json").write_text(json.dumps({"activation": "groupmax", "k": 4}))
    with pytest.raises(SAEFormatError, match="activation 'groupmax' is not supported"):
        load_sae(folder)
