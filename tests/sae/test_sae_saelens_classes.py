"""SAELens's classes and configs (``interp.sae.saes``): the class of each architecture, its
config dict, its files and ``fold_W_dec_norm``, against what SAELens itself wrote and computed
on the same weights (tests/sae_reference/saes, see make_fixtures.py), plus their behaviour.
"""

import copy
import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

import interp.sae
from interp.sae import (
    SAE,
    JumpReLUSAE,
    SAEConfig,
    SAEMetadata,
    StandardSAE,
    StandardSAEConfig,
    TopKSAE,
    TopKSAEConfig,
    Transcoder,
    get_sae_class,
    register_sae_class,
)
from interp.sae.activations import TopK
from interp.sae.registry import SAE_CLASS_REGISTRY
from interp.sae.saes.sae import _disable_hooks
from tests.support.tolerances import tolerance

REFERENCE = Path(__file__).parents[1] / "sae_reference" / "saes"
FIXTURES = sorted(p.name for p in REFERENCE.iterdir() if (p / "expected.safetensors").exists())
FOLDED = sorted(name for name in FIXTURES if (REFERENCE / name / "folded.safetensors").exists())


def about(name: str) -> dict[str, str]:
    """What SAELens recorded of the fixture's SAE: its class and ``get_name()``."""
    with safe_open(REFERENCE / name / "expected.safetensors", "pt") as f:
        return f.metadata()


def saelens_cfg(name: str) -> dict:
    return json.loads((REFERENCE / name / "cfg.json").read_text())


def close(actual: torch.Tensor, expected: torch.Tensor, sae: SAE) -> None:
    widest = max(sae.cfg.d_in, sae.cfg.d_sae)
    kw = tolerance(torch.float32, reduction=widest, depth=2, magnitude=expected)
    torch.testing.assert_close(actual, expected, **kw)


def test_the_fixtures_cover_saelens_classes():
    classes = {about(name)["class"] for name in FIXTURES}
    assert {"StandardSAE", "JumpReLUSAE", "TopKSAE", "GatedSAE", "Transcoder"} <= classes
    assert {"SkipTranscoder", "JumpReLUTranscoder", "JumpReLUSkipTranscoder"} <= classes
    assert {"standard", "jumprelu", "gated", "topk_rescaled", "transcoder"} <= set(FOLDED)


@pytest.mark.parametrize("name", FIXTURES)
def test_load_from_disk_gives_saelens_class_and_config(name):
    sae = SAE.load_from_disk(REFERENCE / name)
    cls = getattr(interp.sae, about(name)["class"])
    assert type(sae) is cls and isinstance(sae, SAE)
    assert type(sae.cfg) is getattr(interp.sae, about(name)["class"] + "Config")
    assert sae.get_name() == about(name)["name"]
    # the config dict is SAELens's cfg.json, key for key
    assert sae.cfg.to_dict() == saelens_cfg(name)
    assert sae.cfg.architecture() == saelens_cfg(name)["architecture"]


@pytest.mark.parametrize("name", FIXTURES)
def test_from_dict_builds_the_class_of_the_architecture(name):
    cfg_dict = saelens_cfg(name)
    cls = getattr(interp.sae, about(name)["class"])
    assert type(SAE.from_dict(cfg_dict)) is cls
    assert type(cls.from_dict(cfg_dict)) is cls
    assert type(SAE(SAEConfig.from_dict(cfg_dict))) is cls
    assert SAEConfig.from_dict(cfg_dict).to_dict() == cfg_dict


def test_a_class_refuses_another_architecture():
    standard = saelens_cfg("standard")
    with pytest.raises(ValueError, match="Loaded SAE is not of type TopKSAE. Use StandardSAE"):
        TopKSAE.from_dict(standard)
    with pytest.raises(ValueError, match="does not match dict config class"):
        TopKSAEConfig.from_dict(standard)
    with pytest.raises(ValueError, match="TopKSAE cannot take a 'standard' config"):
        TopKSAE(StandardSAEConfig(d_in=4, d_sae=8))
    with pytest.raises(ValueError, match="Loaded SAE is not of type Transcoder"):
        Transcoder.load_from_disk(REFERENCE / "standard")


@pytest.mark.parametrize("name", FOLDED)
def test_fold_W_dec_norm_equals_saelens(name):
    sae = SAE.load_from_disk(REFERENCE / name)
    folded = load_file(REFERENCE / name / "folded.safetensors")
    x = load_file(REFERENCE / name / "expected.safetensors")["input"]
    with torch.no_grad():
        sae.fold_W_dec_norm()
        for param_name, param in sae.named_parameters():
            close(param, folded[param_name], sae)
        acts = sae.encode(x)
    assert (acts > 0).any()
    close(acts, folded["feature_acts"], sae)
    torch.testing.assert_close(sae.W_dec.norm(dim=-1), torch.ones(sae.cfg.d_sae))


def test_topk_without_rescaling_refuses_to_fold():
    sae = SAE.load_from_disk(REFERENCE / "topk")
    before = sae.W_dec.detach().clone()
    with pytest.raises(NotImplementedError, match="rescale_acts_by_decoder_norm is False"):
        sae.fold_W_dec_norm()
    assert torch.equal(sae.W_dec, before)


def test_fold_activation_norm_scaling_factor_takes_unscaled_inputs():
    sae = SAE.load_from_disk(REFERENCE / "standard")
    x = torch.randn(6, sae.cfg.d_in)
    with torch.no_grad():
        want = sae(x)
        sae.cfg.normalize_activations = "expected_average_only_in"
        sae.fold_activation_norm_scaling_factor(4.0)
        got = 4.0 * sae(x / 4.0)
    assert sae.cfg.normalize_activations == "none"
    close(got, want, sae)


@pytest.mark.parametrize("name", FIXTURES)
def test_save_model_writes_saelens_files_and_loads_back(name, tmp_path):
    sae = SAE.load_from_disk(REFERENCE / name)
    weights, cfg_path = sae.save_model(tmp_path / "out")
    assert (weights.name, cfg_path.name) == ("sae_weights.safetensors", "cfg.json")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [cfg_path.name, weights.name]
    assert json.loads(cfg_path.read_text()) == saelens_cfg(name)
    written, original = load_file(weights), load_file(REFERENCE / name / "sae_weights.safetensors")
    assert written.keys() == original.keys()
    assert all(torch.equal(written[key], original[key]) for key in original)
    again = type(sae).load_from_disk(tmp_path / "out")
    x = load_file(REFERENCE / name / "expected.safetensors")["input"]
    with torch.no_grad():
        assert torch.equal(again.encode(x), sae.encode(x))


def test_load_from_disk_with_a_saelens_style_converter(tmp_path):
    calls = []

    def converter(path, device, cfg_overrides=None):
        calls.append((Path(path), device, cfg_overrides))
        cfg = json.loads((Path(path) / "cfg.json").read_text())
        return cfg, load_file(Path(path) / "sae_weights.safetensors")

    folder = REFERENCE / "jumprelu"
    sae = JumpReLUSAE.load_from_disk(folder, dtype="float64", converter=converter)
    assert calls == [(folder, "cpu", {"dtype": "float64"})]
    assert type(sae) is JumpReLUSAE and sae.W_enc.dtype == torch.float64
    assert sae.cfg.dtype == "float64" and sae.W_enc.device.type == "cpu"
    want = load_file(folder / "sae_weights.safetensors")["threshold"].double()
    assert torch.equal(sae.threshold, want)


def test_config_keywords_and_metadata_are_one_store():
    cfg = SAEConfig(d_in=8, d_sae=16, architecture="topk", k=3, hook_name="blocks.2.hook_z")
    assert type(cfg) is TopKSAEConfig and cfg.architecture == "topk" and cfg.k == 3
    cfg.metadata.hook_name = "blocks.1.hook_resid_post"  # SAELens scripts write metadata
    cfg.metadata["context_size"] = 128
    assert cfg.hook_name == "blocks.1.hook_resid_post" and cfg.hook_layer == 1
    assert cfg.extra == {"context_size": 128}
    cfg.model_name = "gpt2"
    assert cfg.to_dict()["metadata"]["model_name"] == "gpt2"
    given = SAEMetadata(hook_name="blocks.0.hook_mlp_out", prepend_bos=False)
    cfg = StandardSAEConfig(d_in=8, d_sae=16, metadata=given)
    assert cfg.metadata is given and cfg.hook_name == "blocks.0.hook_mlp_out"
    assert cfg.metadata.prepend_bos is False and cfg.metadata.dataset_path is None
    with pytest.raises(ValueError, match="TopKSAEConfig is architecture 'topk', not 'gated'"):
        TopKSAEConfig(d_in=8, d_sae=16, architecture="gated")


def test_sae_metadata_reads_like_saelens():
    meta = SAEMetadata(hook_name="h", nested={"a": 1})
    assert meta.sae_lens_version == interp.sae.__version__ == "6.45.3"
    assert meta.missing is None and meta["missing"] is None and "missing" not in meta
    assert meta.get("missing", "default") == "default" and meta.get("hook_name") == "h"
    meta.new_field = 3
    assert "new_field" in meta and meta["new_field"] == 3
    assert set(meta.keys()) >= {"hook_name", "nested", "new_field", "sae_lens_version"}
    copied = copy.deepcopy(meta)
    assert copied == meta and copied.nested is not meta.nested
    assert pickle.loads(pickle.dumps(meta)) == meta
    assert meta != SAEMetadata(hook_name="other") and meta != "h"
    assert SAEMetadata.from_dict(meta.to_dict()) == meta


def test_registry_names_the_classes_and_takes_new_ones():
    assert get_sae_class("topk") == (TopKSAE, TopKSAEConfig)
    with pytest.raises(KeyError, match="Unknown SAE architecture 'topkk'.*Did you mean 'topk'"):
        get_sae_class("topkk")
    with pytest.raises(ValueError, match="already registered"):
        register_sae_class("topk", TopKSAE, TopKSAEConfig)

    from dataclasses import dataclass

    from interp.sae.config import ArchitectureName

    @dataclass
    class DoubledConfig(StandardSAEConfig):
        architecture: str = ArchitectureName("doubled")

    class Doubled(StandardSAE):
        def encode(self, x, hooked=True):
            return 2 * super().encode(x, hooked)

    register_sae_class("doubled", Doubled, DoubledConfig)
    try:
        sae = SAE.from_dict({"architecture": "doubled", "d_in": 4, "d_sae": 8})
        assert type(sae) is Doubled and type(sae.cfg) is DoubledConfig
        x = torch.randn(3, 4)
        plain = StandardSAE(StandardSAEConfig(d_in=4, d_sae=8))
        plain.load_state_dict(sae.state_dict())
        assert torch.equal(sae.encode(x), 2 * plain.encode(x))
    finally:
        del SAE_CLASS_REGISTRY["doubled"]


def test_the_module_paths_hold_the_same_classes():
    from interp.sae.saes.gated_sae import GatedSAE
    from interp.sae.saes.jumprelu_sae import JumpReLUSAE as ModuleJumpReLU
    from interp.sae.saes.sae import SAE as ModuleSAE
    from interp.sae.saes.standard_sae import StandardSAE as ModuleStandard
    from interp.sae.saes.topk_sae import TopKSAE as ModuleTopK
    from interp.sae.saes.transcoder import JumpReLUSkipTranscoder

    assert (ModuleSAE, ModuleStandard, ModuleJumpReLU, ModuleTopK) == (
        SAE,
        StandardSAE,
        JumpReLUSAE,
        TopKSAE,
    )
    assert issubclass(GatedSAE, SAE) and issubclass(JumpReLUSkipTranscoder, Transcoder)
    assert type(interp.sae.load_sae("shakespeare-char-resid-l1")) is TopKSAE


def test_hook_z_reshaping_switches():
    sae = SAE.load_from_disk(REFERENCE / "hook_z")
    x = load_file(REFERENCE / "hook_z" / "expected.safetensors")["input"]  # [3, 5, 4, 4]
    assert sae.hook_z_reshaping_mode and sae.encode(x).shape == (3, 5, sae.cfg.d_sae)
    sae.turn_off_forward_pass_hook_z_reshaping()
    with pytest.raises(ValueError, match=r"reads width 16 \(cfg.d_in\)"):
        sae.encode(x)
    assert sae.encode(x.flatten(-2)).shape == (3, 5, sae.cfg.d_sae)
    sae.turn_on_forward_pass_hook_z_reshaping()
    assert sae.decode(sae.encode(x)).shape == x.shape
    resid = SAE.load_from_disk(REFERENCE / "standard")
    with pytest.raises(ValueError, match="only be called for hook_z SAEs"):
        resid.turn_on_forward_pass_hook_z_reshaping()
    assert not resid.hook_z_reshaping_mode


def test_use_error_term_and_disabled_hooks():
    sae = SAE.load_from_disk(REFERENCE / "standard")
    x = torch.randn(4, sae.cfg.d_in)
    with pytest.warns(DeprecationWarning, match="use_error_term directly on SAE is deprecated"):
        sae.use_error_term = True
    ran = []
    sae.hook_sae_acts_post.add_hook(lambda acts, hook: ran.append(1) or acts * 0)
    with torch.no_grad():
        with _disable_hooks(sae):
            close(sae(x), x, sae)  # error term: the input back, the hook not run
        assert not ran
        zeroed = sae(x)  # the hook zeroes the features: the output loses what they add
    assert ran and not torch.allclose(zeroed, x)
    sae.reset_hooks()


def test_layer_norm_state_is_used_once():
    sae = SAE.load_from_disk(REFERENCE / "layer_norm")
    before = set(vars(sae))
    x = torch.randn(5, sae.cfg.d_in, generator=torch.Generator().manual_seed(0))
    out = sae.run_time_activation_norm_fn_out(sae.run_time_activation_norm_fn_in(x))
    # SAELens's round trip is not the identity: it divides by std + 1e-5 and multiplies by std.
    centred = x.double() - x.double().mean(dim=-1, keepdim=True)
    std = centred.std(dim=-1, keepdim=True)
    close(out, (centred * std / (std + 1e-5) + x.double().mean(dim=-1, keepdim=True)).float(), sae)
    assert set(vars(sae)) == before
    with pytest.raises(RuntimeError, match="call encode\\(\\) first"):
        sae.decode(torch.zeros(sae.cfg.d_sae))


def test_topk_sparse_activations_equal_the_dense_ones():
    x = torch.randn(2, 3, 64)
    sparse = TopK(5, use_sparse_activations=True)(x)
    assert sparse.is_sparse and torch.equal(sparse.to_dense(), TopK(5)(x))
    sae = SAE.load_from_disk(REFERENCE / "topk")
    features = sae.encode(torch.randn(4, sae.cfg.d_in))
    assert torch.equal(sae.decode(features.to_sparse()), sae.decode(features))


def test_deprecated_tuple_access_warns():
    sae = SAE.load_from_disk(REFERENCE / "standard")
    with pytest.warns(DeprecationWarning, match="Unpacking SAE objects is deprecated"):
        same, cfg_dict, sparsity = sae
    assert same is sae and cfg_dict == sae.cfg.to_dict() and sparsity is None
    with pytest.warns(DeprecationWarning, match="Indexing SAE objects is deprecated"):
        assert sae[0] is sae
    assert bool(sae)  # truth does not go through the deprecated len()
