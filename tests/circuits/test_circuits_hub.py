"""load_transcoders reads hub repositories as circuit-tracer names them (hf://owner/repo
[/subfolder][@revision], plain owner/repo, a config.yaml listing hf:// layer files) from an
offline Hugging Face cache; a repository that is not cached is a clear error, not a hang."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import TranscoderSet, load_transcoders
from interp.circuits.transcoders import HubRef
from interp.sae import SAE, SAEConfig
from tests.support.hub_cache import COMMIT, hub_cache  # noqa: F401 (a fixture)


def tiny_set(seed: int = 0) -> TranscoderSet:
    torch.manual_seed(seed)
    transcoders = []
    for layer in range(2):
        cfg = SAEConfig(
            d_in=8, d_sae=16, d_out=8, architecture="jumprelu_skip_transcoder",
            hook_name=f"blocks.{layer}.mlp.hook_in", hook_name_out=f"blocks.{layer}.mlp.hook_out",
            apply_b_dec_to_input=False,
        )  # fmt: skip
        transcoder = SAE(cfg)
        with torch.no_grad():
            for param in transcoder.parameters():
                param.normal_()
        transcoders.append(transcoder)
    return TranscoderSet(transcoders, "mlp.hook_in", "mlp.hook_out", scan="tiny")


def assert_same(loaded: TranscoderSet, expected: TranscoderSet) -> None:
    assert loaded.n_layers == expected.n_layers
    for got, want in zip(loaded, expected, strict=True):
        for name, value in want.state_dict().items():
            assert torch.equal(got.state_dict()[name], value), name


def test_hub_ref_parses_circuit_tracers_forms():
    assert HubRef.parse("hf://a/b") == HubRef("a/b", None, None)
    assert HubRef.parse("hf://a/b/sub/dir@v1") == HubRef("a/b", "sub/dir", "v1")
    assert HubRef.parse("hf://a/b/sub?revision=v2") == HubRef("a/b", "sub", "v2")
    assert HubRef.parse("a/b@main") == HubRef("a/b", None, "main")
    assert HubRef.parse("a/b/sub@v1").scan == "a/b//sub@v1"
    with pytest.raises(ValueError, match="not a hub repository"):
        HubRef.parse("hf://only-owner")


def test_repository_loads_offline_from_the_cache(hub_cache, tmp_path):  # noqa: F811
    expected = tiny_set()
    folder = expected.save(tmp_path / "set")
    files = {path.name: path for path in folder.iterdir()}
    hub_cache.add("owner/tiny-transcoders", files)
    for ref in (
        "hf://owner/tiny-transcoders",
        "owner/tiny-transcoders",
        "owner/tiny-transcoders@main",
    ):
        loaded = load_transcoders(ref)
        assert_same(loaded, expected)
        assert (loaded.feature_input_hook, loaded.feature_output_hook) == (
            "mlp.hook_in",
            "mlp.hook_out",
        )
    assert load_transcoders("hf://owner/tiny-transcoders").scan == "owner/tiny-transcoders"


def test_subfolder_and_revision(hub_cache, tmp_path):  # noqa: F811
    expected = tiny_set(seed=1)
    folder = expected.save(tmp_path / "set")
    snapshot = hub_cache.root / "models--owner--many" / "snapshots" / COMMIT
    (snapshot / "width_16").mkdir(parents=True)
    hub_cache.add("owner/many", {f"width_16/{p.name}": p for p in folder.iterdir()})
    loaded = load_transcoders(f"hf://owner/many/width_16@{COMMIT}")
    assert_same(loaded, expected)
    assert loaded.scan == f"owner/many//width_16@{COMMIT}"


def test_config_listing_hub_layer_files(hub_cache, tmp_path):  # noqa: F811
    """circuit-tracer's config.yaml with ``transcoders: [hf://...]`` (its Gemma repos' form)."""
    expected = tiny_set(seed=2)
    folder = expected.save(tmp_path / "set")
    hub_cache.add("owner/layers", {p.name: p for p in folder.glob("layer_*.safetensors")})
    config = tmp_path / "config.yaml"
    config.write_text(
        "model_kind: transcoder_set\nfeature_input_hook: mlp.hook_in\n"
        "feature_output_hook: mlp.hook_out\ntranscoders:\n"
        "  - hf://owner/layers/layer_0.safetensors\n  - hf://owner/layers/layer_1.safetensors\n"
    )
    hub_cache.add("owner/listing", {"config.yaml": config})
    assert_same(load_transcoders("hf://owner/listing"), expected)


def test_uncached_repository_offline_is_a_clear_error(hub_cache):  # noqa: F811
    with pytest.raises(FileNotFoundError, match="not in the Hugging Face cache"):
        load_transcoders("hf://owner/never-downloaded")


def test_unknown_name_suggests_the_shipped_set():
    with pytest.raises(FileNotFoundError, match="did you mean 'shakespeare-char-transcoders'"):
        load_transcoders("shakespeare-char-transcoder")
