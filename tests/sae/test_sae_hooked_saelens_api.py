"""HookedSAETransformer as SAELens 6.45.3 has it: numbers against SAELens's own
(tests/sae_reference/make_hooked_fixtures.py, run in SAELens's environment) for a transcoder,
an SAE on ``mlp.hook_in``, ``exclude_special_tokens`` and the error term; and SAELens's
structure (``_acts_to_saes`` of ``_SAEWrapper``, warnings where SAELens skips, module paths)."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp.hooks import HookPoint
from interp.sae import HookedSAETransformer, load_sae
from interp.sae.analysis.hooked_sae_transformer import (
    HookedSAETransformer as ModulePathClass,
)
from interp.sae.analysis.hooked_sae_transformer import _SAEWrapper, get_deep_attr
from tests.support.tolerances import model_tolerance

REFERENCE = Path(__file__).parents[1] / "sae_reference"
RESID = "blocks.1.hook_resid_post"
MLP_IN = "blocks.0.mlp.hook_in"
TC_OUT = "blocks.0.hook_mlp_out"


@pytest.fixture(scope="module")
def setup():
    model = HookedSAETransformer.from_pretrained_no_processing(str(REFERENCE / "gpt2"))
    saes = {
        name: load_sae(REFERENCE / "saes" / f"hooked_{name}")
        for name in ("transcoder", "mlp_hook_in", "resid")
    }
    return model.eval(), saes, load_file(REFERENCE / "hooked_saelens_api.safetensors")


def close(model, actual, want, sae):
    torch.testing.assert_close(
        actual, want, **model_tolerance(model.cfg, want, spliced=(sae.cfg.d_sae,))
    )


def test_mlp_hook_in_is_a_hook_point_with_saelens_activation(setup):
    model, _, expected = setup
    assert isinstance(get_deep_attr(model, MLP_IN), HookPoint)
    with torch.no_grad():
        _, cache = model.run_with_cache(expected["tokens"])
    close(model, cache[MLP_IN], expected["mlp_hook_in"], load_sae(REFERENCE / "saes/hooked_resid"))


@pytest.mark.parametrize("suffix", ["", "_error_term"])
@pytest.mark.parametrize(
    "name, acts_at, key",
    [("transcoder", TC_OUT, "transcoder"), ("mlp_hook_in", MLP_IN, "mlp_in")],
)
def test_spliced_logits_and_features_equal_saelens(setup, suffix, name, acts_at, key):
    model, saes, expected = setup
    sae = saes[name]
    with torch.no_grad():
        logits, cache = model.run_with_cache_with_saes(
            expected["tokens"], saes=[sae], use_error_term=bool(suffix)
        )
    close(model, logits, expected[f"{key}_logits{suffix}"], sae)
    # cached under the hook SAELens names: the output hook's for a transcoder, mlp.hook_in's
    close(model, cache[f"{acts_at}.hook_sae_acts_post"], expected[f"{key}_acts{suffix}"], sae)
    assert (cache[f"{acts_at}.hook_sae_acts_post"] > 0).any()
    assert not model._acts_to_saes and isinstance(get_deep_attr(model, acts_at), HookPoint)


@pytest.mark.parametrize("suffix", ["", "_error_term"])
def test_exclude_special_tokens_equals_saelens(setup, suffix):
    model, saes, expected = setup
    exclude = expected["exclude"].tolist()
    with torch.no_grad():
        logits, cache = model.run_with_cache_with_saes(
            expected["tokens"],
            saes=[saes["resid"]],
            use_error_term=bool(suffix),
            exclude_special_tokens=exclude,
        )
        plain = model.run_with_saes(expected["tokens"], saes=[saes["resid"]])
    close(model, logits, expected[f"excluded_logits{suffix}"], saes["resid"])
    close(
        model,
        cache[f"{RESID}.hook_sae_output"],
        expected[f"excluded_output{suffix}"],
        saes["resid"],
    )
    if suffix:
        close(model, cache[f"{RESID}.hook_sae_error"], expected["excluded_error"], saes["resid"])
    else:  # the excluded positions are the model's own activation, the others the SAE's
        excluded = torch.isin(expected["tokens"], expected["exclude"])
        assert (plain - logits)[excluded].abs().max() > 1e-3
        close(model, logits[~excluded], plain[~excluded], saes["resid"])


def test_acts_to_saes_holds_wrappers_as_saelens(setup):
    model, saes, _ = setup
    model.add_sae(saes["resid"], use_error_term=True)
    try:
        wrapper = model._acts_to_saes[RESID]
        assert isinstance(wrapper, _SAEWrapper) and wrapper is get_deep_attr(model, RESID)
        assert wrapper.sae is saes["resid"] and wrapper.use_error_term
        assert model.acts_to_saes == {RESID: saes["resid"]}
        model._reset_sae(RESID, _SAEWrapper(saes["resid"], use_error_term=False))
        assert model._acts_to_saes[RESID].use_error_term is False
    finally:
        model.reset_saes()
    assert not model._acts_to_saes and type(get_deep_attr(model, RESID)) is HookPoint


def test_saelens_skips_with_a_warning_and_leaves_the_model(setup, caplog):
    model, saes, expected = setup
    sae = load_sae(REFERENCE / "saes" / "hooked_resid")
    sae.cfg.hook_name = "blocks.1.hook_resid_pots"
    with torch.no_grad():
        before = model(expected["tokens"])
        with caplog.at_level("WARNING"):
            model.add_sae(sae)
            model.reset_saes(RESID)
        assert "No hook found for blocks.1.hook_resid_pots. Skipping." in caplog.text
        assert f"No SAE is attached to {RESID}" in caplog.text
        assert not model._acts_to_saes
        torch.testing.assert_close(model(expected["tokens"]), before, atol=0, rtol=0)


def test_saes_context_restores_the_sae_it_replaced(setup):
    model, saes, expected = setup
    first, second = saes["resid"], load_sae(REFERENCE / "saes" / "hooked_resid")
    model.add_sae(first, use_error_term=True)
    try:
        with model.saes([second]):
            assert model.acts_to_saes[RESID] is second
            assert model._acts_to_saes[RESID].use_error_term is False  # the SAE's own setting
        wrapper = model._acts_to_saes[RESID]
        assert wrapper.sae is first and wrapper.use_error_term
    finally:
        model.reset_saes()
    assert ModulePathClass is HookedSAETransformer
