"""SAELens's training SAEs (``interp.sae.saes.*TrainingSAE``) against SAELens on the same weights.

The fixtures in tests/sae_reference/training/ were written by SAELens 6.45.3
(make_training_fixtures.py): random training SAEs of each architecture, one
``training_forward_pass`` on a random batch with dead features, its losses, outputs and
gradients, and the weights ``process_state_dict_for_saving_inference`` gives.
"""

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from interp.sae import SAE
from interp.sae.registry import SAE_TRAINING_CLASS_REGISTRY, get_sae_training_class
from interp.sae.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
from interp.sae.saes.jumprelu_sae import JumpReLUSAE
from interp.sae.saes.matryoshka_batchtopk_sae import (
    MatryoshkaBatchTopKTrainingSAE,
    MatryoshkaBatchTopKTrainingSAEConfig,
)
from interp.sae.saes.sae import TrainingSAE, TrainingSAEConfig, TrainStepInput
from interp.sae.saes.standard_sae import StandardTrainingSAE, StandardTrainingSAEConfig
from interp.sae.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig
from tests.support.tolerances import tolerance

FIXTURES = Path(__file__).parents[1] / "sae_reference" / "training"
CASES = sorted(p.stem for p in FIXTURES.glob("*.safetensors"))
D_IN, D_SAE = 16, 32
META = {"hook_name": "blocks.0.hook_resid_post", "model_name": "tiny"}


def load_case(name: str):
    """Our training SAE with the fixture's weights, the fixture's tensors and metadata."""
    path = FIXTURES / f"{name}.safetensors"
    tensors = load_file(path)
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    sae_class, cfg_class = get_sae_training_class(meta["architecture"])
    cfg = cfg_class(d_in=D_IN, d_sae=D_SAE, metadata=META, **json.loads(meta["fields"]))
    sae = sae_class(cfg)
    params = {k.removeprefix("param."): v for k, v in tensors.items() if k.startswith("param.")}
    sae.load_state_dict(params)  # strict: the same parameter and buffer names as SAELens's
    return sae, tensors, meta


def step_of(tensors, meta) -> TrainStepInput:
    return TrainStepInput(
        sae_in=tensors["x"],
        coefficients=json.loads(meta["coefficients"]),
        dead_neuron_mask=tensors["dead"],
        n_training_steps=3,
        is_logging_step=False,
    )


def close(actual, expected, reduction=D_SAE * D_IN):
    """Ours against SAELens's: sums over the batch, d_in and d_sae, a few layers deep."""
    tol = tolerance(torch.float32, reduction=reduction, depth=4, magnitude=expected)
    torch.testing.assert_close(actual, expected, **tol)


def test_every_training_architecture_has_a_fixture():
    architectures = set()
    for name in CASES:
        with safe_open(FIXTURES / f"{name}.safetensors", "pt") as f:
            architectures.add(f.metadata()["architecture"])
    # matching_pursuit's step is compared with SAELens's in test_sae_matching_pursuit.py
    assert architectures == set(SAE_TRAINING_CLASS_REGISTRY) - {"matching_pursuit"}


@pytest.mark.parametrize("name", CASES)
def test_training_forward_pass_equals_saelens(name):
    sae, tensors, meta = load_case(name)
    out = sae.training_forward_pass(step_of(tensors, meta))
    expected_losses = {k.removeprefix("loss."): v for k, v in tensors.items() if k[:5] == "loss."}
    assert set(out.losses) == set(expected_losses)
    for key, value in expected_losses.items():
        close(out.losses[key], value)
    close(out.loss, tensors["loss"])
    close(out.sae_out, tensors["sae_out"])
    feature_acts = out.feature_acts.to_dense() if out.feature_acts.is_sparse else out.feature_acts
    close(feature_acts, tensors["feature_acts"])
    close(out.hidden_pre, tensors["hidden_pre"])
    after = {k.removeprefix("after."): v for k, v in tensors.items() if k.startswith("after.")}
    for key, value in after.items():  # BatchTopK's running threshold moved as SAELens's
        close(sae.state_dict()[key], value)


@pytest.mark.parametrize("name", [c for c in CASES if "sparse" not in c])
def test_gradients_equal_saelens(name):
    """The straight-through estimators (JumpReLU's threshold) and every loss's backward."""
    sae, tensors, meta = load_case(name)
    sae.training_forward_pass(step_of(tensors, meta)).loss.backward()
    for key, param in sae.named_parameters():
        close(param.grad, tensors[f"grad.{key}"])


@pytest.mark.parametrize("name", CASES)
def test_inference_weights_and_config_equal_saelens(name):
    sae, tensors, meta = load_case(name)
    sae.training_forward_pass(step_of(tensors, meta))
    state = {k: v.detach().clone() for k, v in sae.state_dict().items()}
    sae.process_state_dict_for_saving_inference(state)
    expected = {k[10:]: v for k, v in tensors.items() if k.startswith("inference.")}
    assert set(state) == set(expected)
    for key, value in expected.items():
        close(state[key].to(value.dtype), value)
    assert sae.cfg.get_inference_sae_cfg_dict() == json.loads(meta["inference_cfg"])


def test_batchtopk_saves_a_jumprelu_sae_that_loads(tmp_path):
    sae, tensors, meta = load_case("batchtopk")
    sae.save_inference_model(tmp_path)
    loaded = SAE.load_from_disk(tmp_path)
    assert isinstance(loaded, JumpReLUSAE)
    torch.testing.assert_close(loaded.threshold, torch.full((D_SAE,), 0.25))


def test_jumprelu_threshold_is_exp_log_threshold_and_folds():
    sae, tensors, meta = load_case("jumprelu_step")
    assert "threshold" not in dict(sae.named_parameters())
    torch.testing.assert_close(sae.threshold, sae.log_threshold.exp())
    x = tensors["x"]
    before = sae(x)
    sae.fold_W_dec_norm()
    torch.testing.assert_close(sae.W_dec.norm(dim=-1), torch.ones(D_SAE))
    close(sae(x), before)


def test_decoder_init_norm_sets_the_decoder_rows():
    sae = StandardTrainingSAE(StandardTrainingSAEConfig(d_in=D_IN, d_sae=D_SAE))
    torch.testing.assert_close(sae.W_dec.norm(dim=-1), torch.full((D_SAE,), 0.1))
    assert torch.equal(sae.W_enc, sae.W_dec.T)
    loose = StandardTrainingSAE(StandardTrainingSAEConfig(d_in=8, d_sae=8, decoder_init_norm=None))
    assert not torch.allclose(loose.W_dec.norm(dim=-1), torch.full((8,), 0.1))


def test_config_dicts_round_trip_through_the_training_registry():
    cfg = TopKTrainingSAEConfig(d_in=D_IN, d_sae=D_SAE, k=5, metadata=META)
    again = TrainingSAEConfig.from_dict({**cfg.to_dict(), "lr": 3e-4})  # runner keys ignored
    assert again == cfg and type(again) is TopKTrainingSAEConfig
    sae = TrainingSAE.from_dict(cfg.to_dict())
    assert type(sae) is TopKTrainingSAE and sae.cfg.k == 5
    with pytest.raises(ValueError, match="does not match"):
        StandardTrainingSAEConfig.from_dict(cfg.to_dict())
    with pytest.raises(KeyError, match="register_sae_training_class"):
        get_sae_training_class("nonesuch")


def test_inference_config_of_batchtopk_is_jumprelu():
    cfg = BatchTopKTrainingSAEConfig(d_in=D_IN, d_sae=D_SAE, k=2.5)
    assert cfg.get_inference_sae_cfg_dict()["architecture"] == "jumprelu"
    with pytest.raises(ValueError, match="positive number"):
        BatchTopKTrainingSAEConfig(d_in=D_IN, d_sae=D_SAE, k=0)


def test_matryoshka_widths_gain_d_sae_and_must_increase():
    with pytest.warns(UserWarning, match="final matryoshka level"):
        sae = MatryoshkaBatchTopKTrainingSAE(
            MatryoshkaBatchTopKTrainingSAEConfig(d_in=D_IN, d_sae=D_SAE, matryoshka_widths=[8])
        )
    assert sae.cfg.matryoshka_widths == [8, D_SAE]
    with pytest.raises(ValueError, match="strictly increasing"):
        MatryoshkaBatchTopKTrainingSAE(
            MatryoshkaBatchTopKTrainingSAEConfig(d_in=D_IN, d_sae=D_SAE, matryoshka_widths=[16, 8])
        )


def test_no_dead_features_means_no_aux_loss():
    sae, tensors, meta = load_case("topk_rescaled")
    step = step_of(tensors, meta)
    step.dead_neuron_mask = torch.zeros(D_SAE, dtype=torch.bool)
    assert sae.training_forward_pass(step).losses["auxiliary_reconstruction_loss"] == 0


def test_a_training_class_refuses_another_architectures_config():
    with pytest.raises(ValueError, match="cannot take a 'topk' config"):
        StandardTrainingSAE(TopKTrainingSAEConfig(d_in=D_IN, d_sae=D_SAE, k=2))


def test_a_single_matryoshka_level_is_batchtopk():
    """A BatchTopK SAE takes a Matryoshka config (its subclass's) and, with one level,
    computes the same step."""
    cfg = MatryoshkaBatchTopKTrainingSAEConfig(
        d_in=D_IN, d_sae=D_SAE, k=3, matryoshka_widths=[D_SAE]
    )
    with pytest.warns(UserWarning, match="only set one matryoshka level"):
        matryoshka = MatryoshkaBatchTopKTrainingSAE(cfg)
    batchtopk = BatchTopKTrainingSAE(cfg)
    batchtopk.load_state_dict(matryoshka.state_dict())
    x = torch.randn(6, D_IN, generator=torch.Generator().manual_seed(0))
    step = TrainStepInput(x, {}, None, 0, False)
    out, expected = matryoshka.training_forward_pass(step), batchtopk.training_forward_pass(step)
    assert set(out.losses) == set(expected.losses)
    torch.testing.assert_close(out.loss, expected.loss)
