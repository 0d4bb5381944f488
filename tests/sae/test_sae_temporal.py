"""``TemporalSAE`` against SAELens 6.45.3's on the same weights and input.

tests/sae_reference/make_temporal_fixtures.py saved, per case, SAELens's state dict, an input
[2, 6, 16], its novel and predicted codes, ``decode`` and ``forward``, and the config's dict.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from interp.sae import SAE
from interp.sae.saes.temporal_sae import (
    ManualAttention,
    TemporalSAE,
    TemporalSAEConfig,
    get_attention,
)
from tests.support.tolerances import tolerance

FIXTURES = Path(__file__).parents[1] / "sae_reference" / "temporal"
CASES = sorted(path.stem for path in FIXTURES.glob("*.safetensors"))


def load_case(name: str) -> tuple[TemporalSAE, dict[str, torch.Tensor]]:
    with safe_open(str(FIXTURES / f"{name}.safetensors"), "pt") as file:
        cfg = json.loads(file.metadata()["cfg"])
        tensors = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118
    sae = SAE.from_dict(cfg)
    state = {key.removeprefix("state."): v for key, v in tensors.items() if key[:6] == "state."}
    sae.load_state_dict(state)
    return sae, tensors


def close(actual: torch.Tensor, expected: torch.Tensor, width: int) -> None:
    torch.testing.assert_close(actual, expected, **tolerance(torch.float32, reduction=width))


@pytest.mark.parametrize("case", CASES)
def test_matches_saelens(case):
    sae, expected = load_case(case)
    assert isinstance(sae, TemporalSAE)
    with torch.no_grad():
        z_novel, z_pred = sae.encode_with_predictions(expected["x"])
        close(z_novel, expected["z_novel"], sae.cfg.d_sae)
        close(z_pred, expected["z_pred"], sae.cfg.d_sae)
        close(sae.encode(expected["x"]), expected["z_novel"], sae.cfg.d_sae)
        close(sae.decode(expected["z_novel"]), expected["decode"], sae.cfg.d_sae)
        close(sae(expected["x"]), expected["forward"], sae.cfg.d_sae)


def test_loads_the_folder_saelens_saved():
    sae, expected = load_case("untied_relu_two_layers")
    loaded = SAE.load(FIXTURES / "untied_folder")
    assert isinstance(loaded, TemporalSAE) and loaded.cfg.n_attn_layers == 2
    with torch.no_grad():
        close(loaded(expected["x"]), expected["forward"], sae.cfg.d_sae)


def test_topk_keeps_kval_codes_and_hooks_see_them():
    sae, expected = load_case("tied_topk")
    seen = {}
    sae.hook_sae_acts_post.add_hook(lambda acts, hook: seen.setdefault("post", acts))
    codes = sae.encode(expected["x"])
    assert (codes > 0).sum(-1).le(sae.cfg.kval_topk).all()
    assert torch.equal(seen["post"], codes)


def test_tied_sae_has_no_encoder_and_no_encoder_bias():
    tied = TemporalSAE(TemporalSAEConfig(d_in=16, d_sae=32, n_heads=2, bottleneck_factor=4))
    untied = TemporalSAE(
        TemporalSAEConfig(d_in=16, d_sae=32, n_heads=2, bottleneck_factor=4, tied_weights=False)
    )
    assert "W_enc" not in dict(tied.named_parameters())
    assert untied.W_enc.shape == (16, 32)
    assert "b_enc" not in dict(untied.named_parameters())


def test_config_accepts_scalar_rescale_and_refuses_unknown_normalization():
    cfg = TemporalSAEConfig(d_in=8, d_sae=16, normalize_activations="constant_scalar_rescale")
    assert cfg.architecture() == "temporal"
    with pytest.raises(ValueError, match="constant_scalar_rescale. Got bogus"):
        TemporalSAEConfig(d_in=8, d_sae=16, normalize_activations="bogus")


def test_folding_is_refused():
    sae, _ = load_case("tied_topk")
    with pytest.raises(NotImplementedError, match="W_dec_norm"):
        sae.fold_W_dec_norm()
    with pytest.raises(NotImplementedError, match="norm scaling factor"):
        sae.fold_activation_norm_scaling_factor(2.0)


def test_attention_map_is_causal_and_normalised():
    generator = torch.Generator().manual_seed(0)
    query, key = (
        torch.randn(2, 5, 4, generator=generator),
        torch.randn(2, 5, 4, generator=generator),
    )
    weights = get_attention(query, key)  # [2, 5, 5]
    assert torch.equal(weights.triu(diagonal=1), torch.zeros_like(weights))
    close(weights.sum(-1), torch.ones(2, 5), 5)
    layer = ManualAttention(dimin=16, n_heads=2, bottleneck_factor=4)
    x = torch.randn(1, 3, 16, generator=generator)
    out, attn_map = layer(x, x, get_attn_map=True)
    assert out.shape == (1, 3, 16) and attn_map.shape == (1, 2, 3, 3)
    with pytest.raises(AssertionError, match="multiple of bottleneck_factor"):
        ManualAttention(dimin=10, n_heads=2, bottleneck_factor=4)
