"""``SAE.from_pretrained(release, sae_id)`` through SAELens's release directory, offline from a
fake Hugging Face cache (tests/sae_reference/fake_hub.py: tiny random SAEs under real release
names, one per format), compared with what SAELens 6.45.3 made of the same files
(tests/sae_reference/make_pretrained_fixtures.py). The hub is never reached: its download
function is replaced by one that fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub.constants
import pytest
import torch
from safetensors.torch import load_file

from interp.sae import SAE, SAEConfig
from interp.sae.loading import make_releases_table
from interp.sae.loading import pretrained_sae_loaders as loaders
from interp.sae.loading.pretrained_saes_directory import (
    directory_source,
    get_config_overrides,
    get_norm_scaling_factor,
    get_pretrained_saes_directory,
    get_releases_for_repo_id,
    get_repo_id_and_folder_name,
)
from tests.sae_reference import fake_hub
from tests.support.tolerances import tolerance

REFERENCE = Path(__file__).parents[1] / "sae_reference" / "pretrained"
EXPECTED = json.loads((REFERENCE / "expected.json").read_text())
TENSORS = load_file(REFERENCE / "expected.safetensors")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The fake cache as huggingface_hub's cache; any download attempt fails the test."""
    cache = fake_hub.build_fake_hub(tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    asked = []

    def no_network(*args, **kwargs):
        asked.append((args, kwargs))
        raise AssertionError(f"reached for the hub: {args} {kwargs}")

    monkeypatch.setattr(loaders, "hf_hub_download", no_network)
    return asked


# ------------------------------------------------------------------------ the table
def test_the_table_keeps_saelens_attribution():
    source = directory_source()
    assert source["sae_lens_version"] == EXPECTED["_sae_lens_version"]
    assert "MIT License" in source["license"] and "Joseph Bloom" in source["license"]
    assert len(get_pretrained_saes_directory()) == EXPECTED["_directory"]["n_releases"]


@pytest.mark.parametrize("release", sorted(EXPECTED["_directory"]["lookups"]))
def test_directory_lookups_equal_saelens(release):
    want = EXPECTED["_directory"]["lookups"][release]
    assert vars(get_pretrained_saes_directory()[release]) == want


def test_the_generator_rebuilds_the_table_from_a_yaml(tmp_path):
    yaml_text = (
        "my-release:\n  repo_id: me/saes\n  model: gpt2\n  conversion_func: gemma_2\n"
        "  saes:\n  - id: a\n    path: folder/a\n    l0: 3.5\n    neuronpedia: gpt2/a\n"
        "  - id: b\n    path: b\n    norm_scaling_factor: 2.0\n"
    )
    (tmp_path / "p.yaml").write_text(yaml_text)
    out = tmp_path / "table.json"
    make_releases_table.main(
        ["--yaml", str(tmp_path / "p.yaml"), "--version", "9.9.9", "--out", str(out)]
    )
    table = json.loads(out.read_text())
    assert table["_source"]["sae_lens_version"] == "9.9.9"
    assert table["releases"]["my-release"]["saes"] == [
        ["a", "folder/a", 3.5, None, "gpt2/a", None],
        ["b", None, None, None, None, 2.0],
    ]


def test_directory_helpers():
    assert get_repo_id_and_folder_name("gpt2-small-res-jb", "blocks.8.hook_resid_pre") == (
        "jbloom/GPT2-Small-SAEs-Reformatted",
        "blocks.8.hook_resid_pre",
    )
    assert get_repo_id_and_folder_name("owner/repo", "x") == ("owner/repo", "x")
    overrides = get_config_overrides("gpt2-small-res-jb", "blocks.8.hook_resid_pre")
    assert overrides["neuronpedia_id"] == "gpt2-small/8-res-jb"
    assert get_releases_for_repo_id("jbloom/GPT2-Small-SAEs-Reformatted") == ["gpt2-small-res-jb"]
    assert get_norm_scaling_factor("llama_scope_lxr_8x", "l0r_8x") == pytest.approx(58.935251798)
    assert get_norm_scaling_factor("gpt2-small-res-jb", "blocks.8.hook_resid_pre") is None


# ------------------------------------------------------------------- loading releases
@pytest.mark.parametrize("case", sorted(fake_hub.CASES))
def test_from_pretrained_equals_saelens(hub, case):
    release, sae_id = fake_hub.CASES[case]
    sae, cfg_dict, log_sparsity = SAE.from_pretrained_with_cfg_and_sparsity(release, sae_id)
    assert cfg_dict == EXPECTED[case]["from_pretrained"]
    prefix = f"{case}."
    want = {k[len(prefix) :]: v for k, v in TENSORS.items() if k.startswith(prefix)}
    for name, param in sae.named_parameters():
        # Gemma Scope 2's affine skip: Google's x @ affine, where SAELens 6.45.3 has x @ affine.T
        expected = want[name].T if name == "W_skip" else want[name]
        torch.testing.assert_close(param.detach(), expected, **tolerance(torch.float32))
    if "log_sparsity" in want:
        torch.testing.assert_close(log_sparsity, want["log_sparsity"], atol=0, rtol=0)
    else:
        assert log_sparsity is None
    if "encode" in want:
        with torch.no_grad():
            acts = sae.encode(fake_hub.probe_input())
        bound = tolerance(torch.float32, reduction=sae.cfg.d_in, magnitude=want["encode"])
        torch.testing.assert_close(acts, want["encode"], **bound)
    assert hub == []


@pytest.mark.parametrize("case", sorted({**fake_hub.CASES, **fake_hub.CONFIG_ONLY}))
def test_load_sae_config_from_huggingface_equals_saelens(hub, case):
    release, sae_id = {**fake_hub.CASES, **fake_hub.CONFIG_ONLY}[case]
    got = loaders.load_sae_config_from_huggingface(release, sae_id)
    assert got == EXPECTED[case]["load_sae_config_from_huggingface"]


def test_gemma_scope_2_affine_skip_adds_x_at_affine(hub, tmp_path):
    """Google's reference transcoder adds ``x @ affine_skip_connection``."""
    release, sae_id = fake_hub.CASES["gemma_3_transcoder"]
    sae = SAE.from_pretrained(release, sae_id)
    snapshot = next((tmp_path / "hub").glob("models--google--gemma-scope-2-270m-pt/snapshots/*"))
    raw = load_file(snapshot / sae_id / "params.safetensors")
    x = fake_hub.probe_input()
    with torch.no_grad():
        got = sae.skip(x)
    want = x @ raw["affine_skip_connection"]
    torch.testing.assert_close(got, want, **tolerance(torch.float32, reduction=16, magnitude=want))


def test_from_pretrained_returns_the_sae_with_its_hook(hub):
    sae = SAE.from_pretrained("gpt2-small-res-jb", "blocks.8.hook_resid_pre", device="cpu")
    assert isinstance(sae, SAE)
    assert sae.cfg.hook_name == "blocks.8.hook_resid_pre"
    assert sae.cfg.model_name == "gpt2-small"
    assert sae.cfg.metadata.neuronpedia_id == "gpt2-small/8-res-jb"


def test_from_pretrained_dtype(hub):
    sae = SAE.from_pretrained("gpt2-small-res-jb", "blocks.8.hook_resid_pre", dtype="float64")
    assert sae.W_enc.dtype == torch.float64 and sae.cfg.dtype == "float64"


def test_force_download_goes_to_the_hub(hub):
    with pytest.raises(AssertionError, match="reached for the hub"):
        SAE.from_pretrained("gpt2-small-res-jb", "blocks.8.hook_resid_pre", force_download=True)
    assert hub and hub[0][1]["force_download"] is True


# ----------------------------------------------------------------------- bad input
def test_unknown_release_names_the_closest_first(hub):
    with pytest.raises(ValueError, match="did you mean 'gpt2-small-res-jb'") as error:
        SAE.from_pretrained("gpt2-small-res-jbb", "blocks.8.hook_resid_pre")
    assert "Closest releases: ['gpt2-small-res-jb'" in str(error.value)
    with pytest.raises(ValueError, match="did you mean 'gemma-scope-2b-pt-res'"):
        SAE.from_pretrained_with_cfg_and_sparsity("gemma-scope-2b-pt-rse", "x")
    assert hub == []


def test_unknown_sae_id_names_the_closest_ids(hub):
    with pytest.raises(ValueError, match="did you mean 'blocks.8.hook_resid_pre'"):
        SAE.from_pretrained("gpt2-small-res-jb", "blocks.8.hook_resid_pr")
    with pytest.raises(ValueError, match="needs an sae_id"):
        SAE.from_pretrained("gpt2-small-res-jb")
    assert hub == []


def test_an_unsupported_format_says_so(hub):
    release = next(
        name
        for name, lookup in get_pretrained_saes_directory().items()
        if lookup.conversion_func == "dictionary_learning_1"
    )
    sae_id = next(iter(get_pretrained_saes_directory()[release].saes_map))
    with pytest.raises(loaders.UnsupportedSAEFormat, match="'dictionary_learning_1' format"):
        SAE.from_pretrained(release, sae_id)


# --------------------------------------------------------------- interp's own forms
def _cached_repo(tmp_path: Path, repo_id: str, folder: str) -> SAE:
    sae = SAE(SAEConfig(d_in=8, d_sae=16, hook_name="blocks.1.hook_resid_post"))
    snapshot = tmp_path / "hub" / ("models--" + repo_id.replace("/", "--"))
    (snapshot / "refs").mkdir(parents=True, exist_ok=True)
    (snapshot / "refs" / "main").write_text(fake_hub.COMMIT)
    sae.save(snapshot / "snapshots" / fake_hub.COMMIT / folder)
    return sae


def test_repo_ids_hf_addresses_folders_and_shipped_names_still_load(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    sae = _cached_repo(tmp_path, "org/saes", "layer_1")
    x = torch.randn(3, 8)
    for loaded in (
        SAE.from_pretrained("org/saes", "layer_1"),
        SAE.from_pretrained("org/saes", subfolder="layer_1"),
        SAE.from_pretrained("hf://org/saes/layer_1"),
        SAE.from_pretrained(
            tmp_path / "hub" / "models--org--saes" / "snapshots" / fake_hub.COMMIT / "layer_1"
        ),
    ):
        torch.testing.assert_close(loaded(x), sae(x), atol=0, rtol=0)
    assert SAE.from_pretrained("shakespeare-char-resid-l1").cfg.d_sae == 1024


def test_a_registered_repo_id_warns_and_names_its_release(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    _cached_repo(tmp_path, "jbloom/GPT2-Small-SAEs-Reformatted", "blocks.8.hook_resid_pre")
    with pytest.warns(UserWarning, match="release name\\(s\\): \\['gpt2-small-res-jb'\\]"):
        SAE.from_pretrained("jbloom/GPT2-Small-SAEs-Reformatted", "blocks.8.hook_resid_pre")


def test_a_registered_repo_id_is_read_with_its_releases_loader(hub, monkeypatch):
    """A repository a release registers loads through that release's loader, looked up
    where SAELens's users patch it (``interp.sae.saes.sae``): the same SAE as the release."""
    from interp.sae.saes import sae as saes_module

    with pytest.warns(UserWarning, match="release name\\(s\\): \\['gpt2-small-res-jb'\\]"):
        by_repo = SAE.from_pretrained(
            "jbloom/GPT2-Small-SAEs-Reformatted", "blocks.8.hook_resid_pre"
        )
    by_release = SAE.from_pretrained("gpt2-small-res-jb", "blocks.8.hook_resid_pre")
    x = torch.randn(3, by_release.cfg.d_in)
    torch.testing.assert_close(by_repo(x), by_release(x), atol=0, rtol=0)
    used = []
    original = saes_module.NAMED_PRETRAINED_SAE_LOADERS["sae_lens"]
    patched = {"sae_lens": lambda **kw: used.append(kw["repo_id"]) or original(**kw)}
    monkeypatch.setattr(saes_module, "NAMED_PRETRAINED_SAE_LOADERS", patched)
    SAE.from_pretrained("gpt2-small-res-jb", "blocks.8.hook_resid_pre")
    assert used == ["jbloom/GPT2-Small-SAEs-Reformatted"]
