"""``TemporalSAE`` against SAELens 6.45.3 where test_sae_temporal.py's cases do not reach
(the base normalisations, hook_z inputs, ``.to(float64)``), its config's checks, and the
``temporal`` loader (canrager/temporalSAEs folders).

tests/sae_reference/make_temporal_extra_fixtures.py saved, per case, SAELens's state dict, an
input, its novel and predicted codes, ``decode`` of the novel codes and ``forward``; and a
canrager folder with SAELens's forward of the SAE its loader reads from it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

import interp.sae
from interp.sae import SAE
from interp.sae.loading import pretrained_sae_loaders
from interp.sae.saes.temporal_sae import TemporalSAE, TemporalSAEConfig
from tests.support.tolerances import tolerance

FIXTURES = Path(__file__).parents[1] / "sae_reference" / "temporal_extra"
CASES = sorted(path.stem for path in FIXTURES.glob("*.safetensors"))
SMALL = {"d_in": 16, "d_sae": 32, "n_heads": 2, "bottleneck_factor": 4}


def load_case(name: str) -> tuple[dict, dict[str, torch.Tensor]]:
    with safe_open(str(FIXTURES / f"{name}.safetensors"), "pt") as file:
        cfg = json.loads(file.metadata()["cfg"])
        tensors = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118
    return cfg, tensors


def build(cfg: dict, tensors: dict[str, torch.Tensor]) -> TemporalSAE:
    sae = SAE.from_dict(cfg)
    state = {key.removeprefix("state."): v for key, v in tensors.items() if key[:6] == "state."}
    sae.load_state_dict(state)
    return sae


def close(actual: torch.Tensor, expected: torch.Tensor, sae: TemporalSAE) -> None:
    # each attention layer chains an encoding and an attention; then the novel codes' encoding
    depth = 2 * sae.cfg.n_attn_layers + 2
    tol = tolerance(expected.dtype, reduction=sae.cfg.d_sae, depth=depth, magnitude=expected)
    torch.testing.assert_close(actual, expected, **tol)


@pytest.mark.parametrize("case", [c for c in CASES if c != "tied_float64"])
def test_matches_saelens(case):
    cfg, expected = load_case(case)
    sae = build(cfg, expected)
    x = expected["x"]
    with torch.no_grad():
        z_novel, z_pred = sae.encode_with_predictions(x)
        close(z_novel, expected["z_novel"], sae)
        close(z_pred, expected["z_pred"], sae)
        close(sae(x), expected["forward"], sae)
        sae.encode(x)  # decode undoes the last input's normalisation, as in SAELens
        close(sae.decode(expected["z_novel"]), expected["decode"], sae)
    assert sae(x).shape == x.shape  # hook_z: [batch, pos, n_heads, d_head] back


def test_to_float64_on_a_tied_sae_matches_saelens():
    cfg, expected = load_case("tied_float64")  # SAELens: built in float32, then .to(float64)
    state = {k: v.float() if k.startswith("state.") else v for k, v in expected.items()}
    sae = build({**cfg, "dtype": "float32"}, state)  # float64 -> float32 is exact here
    assert "W_enc" not in dict(sae.named_parameters())  # the base's .to read W_enc
    assert sae.to(torch.float64) is sae
    assert (sae.cfg.dtype, sae.dtype, sae.W_dec.dtype) == ("float64", *[torch.float64] * 2)
    with torch.no_grad():
        close(sae(expected["x"]), expected["forward"], sae)


def test_config_checks_the_rest_under_constant_scalar_rescale():
    scalar = {"normalize_activations": "constant_scalar_rescale"}
    cfg = TemporalSAEConfig(**SMALL, **scalar)
    assert cfg.normalize_activations == "constant_scalar_rescale"  # kept through the checks
    with pytest.raises(ValueError, match="d_in=0"):
        TemporalSAEConfig(**{**SMALL, "d_in": 0}, **scalar)
    with pytest.raises(ValueError, match="reshape_activations='hook_q'"):
        TemporalSAEConfig(**SMALL, **scalar, reshape_activations="hook_q")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("sae_diff_type", "top_k", "sae_diff_type='top_k'; use 'relu' or 'topk'"),
        ("kval_topk", 0, "kval_topk=0"),
        ("kval_topk", 2.5, "kval_topk=2.5"),
    ],
)
def test_config_refuses_a_bad_novel_code_rule(field, value, message):
    with pytest.raises(ValueError, match=message):
        TemporalSAEConfig(**SMALL, **{field: value})


def test_exported_and_built_by_architecture():
    assert interp.sae.TemporalSAE is TemporalSAE
    assert interp.sae.TemporalSAEConfig is TemporalSAEConfig
    cfg = TemporalSAEConfig(**SMALL, kval_topk=4)
    assert type(SAE.from_dict(cfg.to_dict())) is TemporalSAE
    assert type(SAE(cfg)) is TemporalSAE


def test_temporal_loader_reads_a_canrager_folder_as_saelens_does(monkeypatch):
    root = FIXTURES / "canrager"
    with safe_open(str(root / "expected.safetensors"), "pt") as file:
        saelens_cfg = json.loads(file.metadata()["cfg"])
        expected = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118
    asked = []

    def local_file(repo_id, filename, **kwargs):
        asked.append(filename)  # any folder: this one's files
        return str(root / "layer_3" / "temporal" / Path(filename).name)

    monkeypatch.setattr(pretrained_sae_loaders, "_cached", lambda repo_id, filename: None)
    monkeypatch.setattr(pretrained_sae_loaders, "hf_hub_download", local_file)
    cfg_dict, state_dict, log_sparsity = pretrained_sae_loaders.temporal_sae_huggingface_loader(
        "canrager/temporalSAEs", "layer_3/temporal"
    )
    assert asked == ["layer_3/temporal/conf.yaml", "layer_3/temporal/latest_ckpt.safetensors"]
    assert cfg_dict == saelens_cfg and log_sparsity is None
    getter = pretrained_sae_loaders.NAMED_PRETRAINED_SAE_CONFIG_GETTERS["temporal"]
    assert getter("canrager/temporalSAEs", "layer_3/temporal", "cpu") == saelens_cfg
    sae = SAE.from_dict(cfg_dict)
    sae.load_state_dict(state_dict)
    assert isinstance(sae, TemporalSAE) and sae.cfg.hook_name == "blocks.3.hook_resid_post"
    with torch.no_grad():
        close(sae.encode(expected["x"]), expected["z_novel"], sae)
        close(sae(expected["x"]), expected["forward"], sae)
    with pytest.raises(ValueError, match="Could not find layer in folder_name: temporal"):
        pretrained_sae_loaders.get_temporal_sae_config_from_hf("r", "temporal", "cpu")
