"""``MatchingPursuitSAE`` against SAELens 6.45.3's on the same weights and input.

tests/sae_reference/make_matching_pursuit_fixtures.py saved, per case (stopping rules,
``apply_b_dec_to_input``), SAELens's state dict, an input [3, 4, 16], its ``encode``,
``decode`` and ``forward``, and the config's dict; and one SAE's folder (``save_model``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from interp.sae import SAE
from interp.sae.saes.matching_pursuit_sae import (
    MatchingPursuitSAE,
    MatchingPursuitSAEConfig,
    MatchingPursuitTrainingSAE,
    MatchingPursuitTrainingSAEConfig,
    _encode_matching_pursuit,
)
from interp.sae.training_sae import TrainingSAEConfig, TrainStepInput
from tests.support.tolerances import tolerance

FIXTURES = Path(__file__).parents[1] / "sae_reference" / "matching_pursuit"
CASES = sorted(p.stem for p in FIXTURES.glob("*.safetensors") if p.stem != "training")


def load_case(name: str) -> tuple[MatchingPursuitSAE, dict[str, torch.Tensor]]:
    with safe_open(str(FIXTURES / f"{name}.safetensors"), "pt") as file:
        cfg = json.loads(file.metadata()["cfg"])
        tensors = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118
    sae = SAE.from_dict(cfg)
    state = {key.removeprefix("state."): v for key, v in tensors.items() if key[:6] == "state."}
    sae.load_state_dict(state)
    return sae, tensors


def close(actual: torch.Tensor, expected: torch.Tensor, sae: MatchingPursuitSAE) -> None:
    # codes pass through up to d_in greedy steps, each a d_in-long dot product
    depth = sae.cfg.max_iterations or sae.cfg.d_in
    bound = tolerance(torch.float32, reduction=sae.cfg.d_in, depth=depth)
    torch.testing.assert_close(actual, expected, **bound)


@pytest.mark.parametrize("case", CASES)
def test_matches_saelens(case):
    sae, expected = load_case(case)
    assert isinstance(sae, MatchingPursuitSAE)
    with torch.no_grad():
        codes = sae.encode(expected["x"])
        assert torch.equal(codes != 0, expected["encode"] != 0)  # the same features chosen
        close(codes, expected["encode"], sae)
        close(sae.decode(expected["encode"]), expected["decode"], sae)
        close(sae(expected["x"]), expected["forward"], sae)


def test_loads_the_folder_saelens_saved():
    sae, expected = load_case("default")
    loaded = SAE.load(FIXTURES / "default_folder")
    assert isinstance(loaded, MatchingPursuitSAE)
    assert sorted(loaded.state_dict()) == ["W_dec", "b_dec"]
    with torch.no_grad():
        close(loaded(expected["x"]), expected["forward"], sae)


def test_max_iterations_bounds_the_active_features():
    sae, expected = load_case("no_early_stop")
    assert (sae.encode(expected["x"]) != 0).sum(-1).le(sae.cfg.max_iterations).all()


def test_tied_encoder_is_the_decoder():
    sae = MatchingPursuitSAE(MatchingPursuitSAEConfig(d_in=8, d_sae=16))
    sae.W_enc = torch.nn.Parameter(torch.zeros(8, 16))  # ignored, as SAELens does
    assert torch.equal(sae.W_enc, sae.W_dec.T)
    assert "W_enc" not in dict(sae.named_parameters())
    with pytest.raises(NotImplementedError, match="not safe for MatchingPursuit"):
        sae.fold_W_dec_norm()


def test_one_step_picks_the_best_aligned_row():
    W_dec = torch.eye(4)  # [d_sae, d_in]
    x = torch.tensor([[0.5, -2.0, 3.0, 1.0]])
    acts = _encode_matching_pursuit(
        x, W_dec, 0.0, max_iterations=1, stop_on_duplicate_support=False
    )
    assert torch.equal(acts, torch.tensor([[0.0, 0.0, 3.0, 0.0]]))


def test_training_step_matches_saelens():
    with safe_open(str(FIXTURES / "training.safetensors"), "pt") as file:
        cfg = TrainingSAEConfig.from_dict(json.loads(file.metadata()["cfg"]))
        expected = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118
    sae = MatchingPursuitTrainingSAE(cfg)
    state = {k.removeprefix("state."): v for k, v in expected.items() if k[:6] == "state."}
    sae.load_state_dict(state)
    out = sae.training_forward_pass(TrainStepInput(expected["sae_in"], {}, None, 0, True))
    close(out.feature_acts, expected["feature_acts"], sae)
    close(out.sae_out, expected["sae_out"], sae)
    close(out.loss, expected["loss"], sae)
    assert sorted(out.losses) == ["mse_loss"]
    for name in ("max_l0", "min_l0", "residual_norm", "residual_threshold_converged_portion"):
        close(torch.as_tensor(out.metrics[name]), expected[f"metric.{name}"], sae)


def test_training_config_forces_unit_decoder_rows():
    with pytest.warns(UserWarning, match="decoder_init_norm must be set to 1.0"):
        cfg = MatchingPursuitTrainingSAEConfig(d_in=8, d_sae=16, decoder_init_norm=0.1)
    sae = MatchingPursuitTrainingSAE(cfg)
    close(sae.W_dec.norm(dim=-1), torch.ones(16), sae)
    assert sorted(sae.state_dict()) == ["W_dec", "b_dec"]
