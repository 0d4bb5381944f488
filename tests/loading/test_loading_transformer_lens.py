"""TransformerLens HookedTransformer state dicts: same names and shapes, so they load as they are.

TransformerLens 4.x has no HookedTransformer to produce one offline, so the state dicts here
are ours in TransformerLens 2.x's form: its names plus the buffers it saves with the weights
(``attn.mask`` [n_ctx, n_ctx] and ``attn.IGNORE``), optionally after its ``fold_ln``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformer_lens.weight_processing import ProcessWeights

from interp import HookedTransformer
from interp.loading.checkpoint import CheckpointError
from interp.loading.hf import from_hf_model
from interp.loading.transformer_lens import load_transformer_lens_state_dict
from tests.conftest import make_hf_gpt2
from tests.loading.test_loading_hf import tokens
from tests.support.tolerances import logits_bound, model_error_bound, within_contract


def tl_state_dict(model: HookedTransformer) -> dict[str, torch.Tensor]:
    state_dict = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    n_ctx = model.cfg.n_ctx
    for layer in range(model.cfg.n_layers):
        state_dict[f"blocks.{layer}.attn.mask"] = torch.tril(torch.ones(n_ctx, n_ctx)).bool()
        state_dict[f"blocks.{layer}.attn.IGNORE"] = torch.tensor(-torch.inf)
    return state_dict


@pytest.fixture
def hf_and_model():
    hf_model = make_hf_gpt2()
    return hf_model, from_hf_model(hf_model, tokenizer=None).eval()


def test_weights_load_with_plain_load_state_dict(hf_and_model):
    hf_model, model = hf_and_model
    fresh = HookedTransformer(dataclasses.replace(model.cfg, seed=1))
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        assert (fresh(tokens()) - expected).abs().max() <= logits_bound(model.cfg, expected)


def test_transformer_lens_file_with_buffers_loads(hf_and_model, tmp_path):
    hf_model, model = hf_and_model
    torch.save(tl_state_dict(model), tmp_path / "tl.pt")
    loaded = load_transformer_lens_state_dict(tmp_path / "tl.pt", model.cfg.to_dict())
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        assert (loaded(tokens()) - expected).abs().max() <= logits_bound(model.cfg, expected)


def test_folded_state_dict_needs_lnpre(hf_and_model):
    hf_model, model = hf_and_model
    folded = ProcessWeights.fold_layer_norm(tl_state_dict(model), model.cfg)
    folded = {k: v for k, v in folded.items() if ".ln" not in k and not k.startswith("ln_")}
    with pytest.raises(CheckpointError, match="normalization_type='LNPre'"):
        load_transformer_lens_state_dict(folded, model.cfg)
    cfg = dataclasses.replace(model.cfg, normalization_type="LNPre")
    loaded = load_transformer_lens_state_dict(folded, cfg)
    with torch.no_grad():
        logits = hf_model(tokens()).logits
        expected = logits.log_softmax(-1)
        # A log-probability moves by at most twice its logits' error.
        bound = within_contract(1e-4, 2 * model_error_bound(model.cfg, logits.abs().max()))
        assert (loaded(tokens()).log_softmax(-1) - expected).abs().max() <= bound


def test_wrong_shapes_are_named(hf_and_model):
    _, model = hf_and_model
    state_dict = tl_state_dict(model)
    state_dict["blocks.1.attn.W_Q"] = torch.zeros(4, 64, 8)
    with pytest.raises(CheckpointError, match=r"blocks.1.attn.W_Q: checkpoint \(4, 64, 8\)"):
        load_transformer_lens_state_dict(state_dict, model.cfg)
